"""Where the browser is, and where screenshots go (target/console-screenshots, kept by CI)."""

import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from weft_process import ROOT  # noqa: E402

SCREENSHOTS = Path(os.environ.get("WEFT_SCREENSHOTS", ROOT / "target" / "console-screenshots"))


def chromium_path() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if candidate and Path(candidate).exists():
            return candidate
    found = shutil.which("chromium")
    if found:
        return found
    raise FileNotFoundError("no Chromium: `apt-get install chromium` (as .ci/run does) or set CHROMIUM")


def screenshot(page, name: str) -> Path:
    """Keeps a full-page screenshot as a test artifact."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
