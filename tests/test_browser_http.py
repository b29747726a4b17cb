"""A person's view of an HTTP run across an emulated WAN: the dashboard in headless Chromium.

Opens the Live Profiler from a shared link that selects the HTTP transport and a 40 ms emulated
RTT, starts a short run, and checks what a learner reads: the caption labelling the delay as
EMULATED and the network segment in the stacked bars. Saves a screenshot to ``artifacts/``.
"""
import time

import pytest

from tests.browser import ROOT, chromium_page, streamlit_server, wait_idle

# skips without Chromium or Playwright, fails instead where LATENCY_LAB_REQUIRE_EXTRAS=1
# (tests/conftest.py)
pytestmark = pytest.mark.browser


def test_http_run_with_emulated_rtt_from_a_shared_link():
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with streamlit_server() as url, chromium_page(1280, 900) as page:
        page.goto(f"{url}/live?duration=3&transport=HTTP&net_rtt=40&fwd_ms=2")
        wait_idle(page)
        page.wait_for_function(  # the sidebar's widgets render in turn after the script runs
            "(() => { const t = document.querySelector(\"[data-testid='stSidebar']\").innerText;"
            " return t.includes('Transport') && t.includes('Emulated WAN'); })()",
            timeout=30_000)
        page.get_by_role("button", name="Start").click()
        page.wait_for_function("document.body.innerText.includes('completed')",
                               timeout=90_000)
        time.sleep(1.5)
        body = page.inner_text("[data-testid='stMain']")
        assert "EMULATED" in body and "RTT 40 ms" in body
        legend = page.inner_text("[data-testid='stPlotlyChart']")
        assert "network" in legend
        page.mouse.move(1200, 880)  # no tooltip over the screenshot
        page.screenshot(path=str(ROOT / "artifacts" / "live_profiler_http_wan.png"))
