"""The getting-started pages and the README's quick starts, run command by command as a reader
would run them; a command that fails, or prints something else than the page shows, fails.

How a page marks what is run and what it prints: interop/docs/doc_runner.py (its docstring).
Against a release server, as the other interop suites:

    WEFT_BIN=target/release/weft python3 -m pytest -q interop/docs

About 30 s on a 2-core machine once target/getting-started-rust holds the Rust page's build
(the page makes a real project against `crates/weft-core` there, `-j 1` at the lowest
priority; the first run adds about a minute). Needs redis-cli, curl, nc (the README's
memcached line) and cargo: a page that runs a missing tool fails and names it.
"""

import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_runner import ROOT, DocError, matches, parse, run_page  # noqa: E402

WEFT_BIN = Path(os.environ.get("WEFT_BIN", ROOT / "target" / "release" / "weft"))
GUIDES = ROOT / "docs" / "getting-started"
STUB = "<!-- stub:"


def pages() -> list[Path]:
    return [ROOT / "README.md"] + sorted(GUIDES.glob("*.md"))


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", pages(), ids=page_id)
def test_page(path: Path, tmp_path: Path) -> None:
    """Every annotated block of the page runs, and prints what the page shows."""
    text = path.read_text()
    if STUB in text:
        runs = [item for item in parse(text) if getattr(item, "kind", None) == "run"]
        assert not runs, f"{page_id(path)} is marked a stub but runs commands"
        pytest.skip(f"{page_id(path)} is a stub: {text.split(STUB, 1)[1].split('-->', 1)[0].strip()}")
    home = tmp_path / "home"
    home.mkdir()
    # The Rust page makes its project beside the reader's clone, `../weft`.
    (home / "weft").symlink_to(ROOT)
    extra_env = {}
    if path.name == "rust.md":
        extra_env = {"CARGO_TARGET_DIR": str(ROOT / "target" / "getting-started-rust"),
                     "CARGO_BUILD_JOBS": "1"}
    guide = path.parent == GUIDES
    blocks = [item for item in parse(text) if getattr(item, "kind", None) == "run"]
    assert blocks, f"{page_id(path)} runs no command"
    run_page(path, home, WEFT_BIN, extra_env, require_annotations=guide)


def test_every_guide_is_linked_from_the_readme() -> None:
    """A newcomer finds each path from the README."""
    readme = (ROOT / "README.md").read_text()
    for path in sorted(GUIDES.glob("*.md")):
        assert f"docs/getting-started/{path.name}" in readme, f"README.md does not link {path.name}"


# The runner itself: it must fail when a page is wrong.


@pytest.mark.parametrize("expected, actual, ok", [
    ("a\nb\n", "a\nb\n", True),
    ("a\nb\n", "a\nc\n", False),
    ("a  \n\n", "a\n", True),                       # trailing spaces and blank lines
    ("took … ms\n", "took 12.5 ms\n", True),
    ("took … ms\n", "took 12.5 s\n", False),
    ("first\n…\nlast\n", "first\nx\ny\nlast\n", True),
    ("first\n…\nlast\n", "first\nlast\n", True),
    ("first\n…\nlast\n", "first\nx\n", False),
    ("a\n", "a\nextra\n", False),
])
def test_output_rules(expected: str, actual: str, ok: bool) -> None:
    """`…` stands for text within a line, or alone on a line for any lines; nothing else is loose."""
    assert matches(expected, actual) is ok


def write_page(tmp_path: Path, body: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(body)
    (tmp_path / "home").mkdir()
    return page


def run_synthetic(tmp_path: Path, body: str, annotations: bool = False) -> None:
    run_page(write_page(tmp_path, body), tmp_path / "home", WEFT_BIN, require_annotations=annotations)


def test_runner_passes_a_correct_page(tmp_path: Path) -> None:
    """State carries from block to block; output and `file` work."""
    run_synthetic(tmp_path, "<!-- file: greeting.txt -->\n```text\nhi\n```\n\n"
                  "<!-- run -->\n```sh\nexport NAME=weft\ncd /\n```\n"
                  "<!-- run -->\n```sh\necho \"$NAME in $PWD\"\n```\n<!-- output -->\n```text\nweft in /\n```\n")


@pytest.mark.parametrize("body, message", [
    ("<!-- run -->\n```sh\necho one\n```\n<!-- output -->\n```text\ntwo\n```\n", "output differs"),
    ("<!-- run -->\n```sh\nfalse\necho not reached\n```\n", "failed (exit status 1)"),
    ("<!-- run -->\n```sh\nfalse | cat\n```\n", "failed"),
    ("<!-- run: timeout=1 -->\n```sh\nsleep 5\n```\n", "did not finish within 1 s"),
    ("<!-- run -->\n```sh\nsleep 30 &\n```\n", "leaves processes"),
    ("<!-- run: background ready=never -->\n```sh\nsleep 1\n```\n", "did not print"),
    ("<!-- run: background ready=up -->\n```sh\necho up; exit 3\n```\n<!-- stop -->\n", "exited with 3"),
    ("<!-- output -->\n```text\nx\n```\n", "no run block"),
    ("<!-- run -->\n\nsome prose\n```sh\necho\n```\n", "not followed by a code block"),
])
def test_runner_fails_a_wrong_page(tmp_path: Path, body: str, message: str) -> None:
    """A page whose command fails, hangs, leaks a process or prints something else fails."""
    with pytest.raises(DocError, match=re.escape(message)):
        run_synthetic(tmp_path, body)


def test_guides_annotate_every_shell_block(tmp_path: Path) -> None:
    """On a getting-started page, a shell block says whether it runs."""
    with pytest.raises(DocError, match="neither"):
        run_synthetic(tmp_path, "```sh\necho forgotten\n```\n<!-- run -->\n```sh\ntrue\n```\n", annotations=True)


def test_redis_error_replies_must_be_shown(tmp_path: Path) -> None:
    """redis-cli exits 0 on an error reply; the runner does not let one pass unseen."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "redis-cli").write_text("#!/bin/sh\necho '(error) WRONGTYPE Operation against a key'\n")
    (fake / "redis-cli").chmod(0o755)
    body = "<!-- run -->\n```sh\nredis-cli get k\n```\n"
    os.environ["PATH"], saved = f"{fake}:{os.environ['PATH']}", os.environ["PATH"]
    try:
        with pytest.raises(DocError, match="error reply the page does not show"):
            run_synthetic(tmp_path, body)
        shown = body + "<!-- output -->\n```text\n(error) WRONGTYPE Operation against a key\n```\n"
        (tmp_path / "again").mkdir()
        run_synthetic(tmp_path / "again", shown)
    finally:
        os.environ["PATH"] = saved


def test_background_server_is_stopped_cleanly(tmp_path: Path) -> None:
    """A background `weft server` is waited for on its port and must exit 0 on SIGTERM."""
    if not WEFT_BIN.exists():
        pytest.fail(f"{WEFT_BIN} missing: run `cargo build --release -p weft-server` or set WEFT_BIN")
    run_synthetic(tmp_path, "<!-- run: background -->\n```sh\nweft server\n```\n"
                  "<!-- run -->\n```sh\nweft cli -c \"put default k v\" -c \"get default k\"\n```\n"
                  "<!-- output -->\n```text\nv\n```\n<!-- stop -->\n")



def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("path", [ROOT / "README.md"] + sorted(GUIDES.glob("*.md")), ids=page_id)
def test_links_resolve(path: Path) -> None:
    """Every relative link of the page names a file that exists, and a heading in it."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{page_id(path)} links {target}: no such file"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.M)
            assert anchor in {github_anchor(h) for h in headings}, f"{page_id(path)} links {target}: no such heading"
