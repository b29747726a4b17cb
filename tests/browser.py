"""Start the dashboard with ``streamlit run`` on a free port, and a headless Debian Chromium.

Shared by the browser test and the screenshot script (``python -m tests.browser``).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.health_check import wait_healthy

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict[str, str] | None = None,
                     script_args: Sequence[str] = ()) -> Iterator[str]:
    """``streamlit run app.py [-- SCRIPT_ARGS]`` on 127.0.0.1:<free port>; yields the base
    URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
         *(["--", *script_args] if script_args else [])],
        cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(f"{url}/_stcore/health", proc, 60):
            out = proc.stdout.read().decode() if proc.poll() is not None else ""
            raise RuntimeError(f"streamlit did not start: {out[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 800) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


@contextlib.contextmanager
def chromium_browser() -> Iterator[object]:
    """A headless Chromium for several pages in separate contexts (separate sessions, as two
    people's browsers)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_idle(page: object, timeout_ms: int = 60_000) -> None:
    """Wait until Streamlit has finished running the script (its own e2e tests' rule)."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']",  # type: ignore[attr-defined]
                           timeout=timeout_ms)


def until(page: Any, check: Any, timeout_s: float = 30.0) -> bool:
    """Poll ``check(page)`` until it is true (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check(page):
            return True
        time.sleep(0.25)
    return False


def body(page: Any) -> str:
    """The app's text as a person reads it."""
    return page.inner_text("[data-testid='stApp']")

