"""Fixtures of the console's browser tests: Debian's headless Chromium driven by Playwright,
and where each page's screenshot is kept (target/console-screenshots, a CI artifact)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console_browser import chromium_path  # noqa: E402


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=chromium_path(), headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.set_default_timeout(15_000)
    yield page
    context.close()
    # A script error or a blocked resource (Content-Security-Policy) fails the test. A failed
    # request the test provoked on purpose (a 401 before logging in, a 404 looked up) is
    # logged by Chromium as "Failed to load resource": those are expected.
    unexpected = [e for e in errors if "Failed to load resource" not in e]
    assert not unexpected, unexpected
