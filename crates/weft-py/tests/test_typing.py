"""The installed package's type stubs: `mypy --strict` accepts typed use of every class and
reports typical mistakes (so the stubs are read, and are precise)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def mypy(path: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy)")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(path)],
        capture_output=True, text=True, timeout=300, cwd=HERE,
    )


def test_typed_use_passes_strict_checking() -> None:
    # Proves the stubs and py.typed are installed and cover the API the example uses.
    result = mypy(HERE / "typing_example.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mistakes_are_reported() -> None:
    # Proves the stubs are precise: a wrong return type, argument type and mode are caught.
    result = mypy(HERE / "typing_mistakes.py")
    assert result.returncode == 1, result.stdout + result.stderr
    for line in (6, 7, 8):
        assert f"typing_mistakes.py:{line}: error" in result.stdout, result.stdout
