"""Your server in the dashboard, as a person sees it: the dashboard started with a server
named on its command line (``streamlit run app.py -- --target NAME=URL``; a server of ours
stands in for yours), its Live Profiler offers that server by name, runs it live in headless
Chromium, and shows the server's account of each request with every part labelled where it
came from, and its /metrics beside the client's requests in flight. A screenshot at 1280×800
goes to ``artifacts/``."""
from __future__ import annotations

import pytest

from tests.browser import ROOT, body, chromium_page, streamlit_server, until, wait_idle

pytestmark = pytest.mark.browser


def test_a_server_named_on_the_command_line_runs_live_in_the_browser():
    from latency.core.config import RunConfig
    from latency.serve.http_server import ServerProcess

    server = ServerProcess(RunConfig(model="synthetic-lm", max_running=4,
                                     model_args={"step_ms": 2.0}).checked()).start()
    try:
        with streamlit_server(script_args=["--target", f"mine={server.url}/v1"]) as url, \
                chromium_page(1280, 800) as page:
            page.goto(f"{url}/live?live_kind=streamed+generation+%28LLM%29"
                      "&glive_model=server%3A+mine&glive_duration=3&glive_api=completions")
            wait_idle(page)
            assert until(page, lambda p: "Your server mine" in body(p), 30), body(page)
            page.get_by_role("button", name="Start").click()
            assert until(page, lambda p: "Verdict:" in body(p), 120), body(page)[-2000:]
            legend = "[data-testid='stPlotlyChart'] .legendtext"
            found = until(page, lambda p: "prefill (reported)" in
                           p.locator(legend).all_text_contents(), 30)
            page.screenshot(path="/tmp/dbg_target.png", full_page=True)
            assert found, (page.locator(legend).all_text_contents(), body(page)[-3000:])
            names = page.locator(legend).all_text_contents()
            assert "client: requests in flight" in names and "server: running" in names, names
            assert f"your server at {server.url}/v1" in body(page)
            (ROOT / "artifacts").mkdir(exist_ok=True)
            page.get_by_text("Your server's account of each request").scroll_into_view_if_needed()
            page.screenshot(path=str(ROOT / "artifacts" / "target_live.png"))
    finally:
        server.stop()
