"""A person's view of Compare Runs: the page in headless Chromium on a history of real runs,
both charts drawn, and the Chrome-trace download a file Perfetto can read.

Saves ``artifacts/compare_runs.png``. Skips with a reason where Chromium or Playwright is
absent (fails instead with LATENCY_LAB_REQUIRE_EXTRAS=1).
"""
import json
import time
from pathlib import Path

import pytest

from latency.core.config import RunConfig
from latency.core.records import HANDOFF
from latency.execution.engine import execute
from latency.storage.store import RunStore
from tests.browser import ROOT, chromium_page, streamlit_server, wait_idle

ARTIFACTS = ROOT / "artifacts"

# skips without Chromium or Playwright, fails instead where LATENCY_LAB_REQUIRE_EXTRAS=1
# (tests/conftest.py)
pytestmark = pytest.mark.browser


def test_compare_runs_in_a_browser(tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    db = tmp_path / "runs.sqlite"
    store = RunStore(db)
    stages = {"preprocess_ms": 0.5, "postprocess_ms": 0.3, "dist": "exponential"}
    for name, fwd in (("baseline", 2.0), ("faster forward", 1.0)):
        store.save(execute(RunConfig(model="synthetic", model_args={**stages, "forward_ms": fwd},
                                     rate=150.0, requests=600, warmup=10, seed=3)), name=name)
    with streamlit_server({"LATENCY_LAB_DB": str(db)}) as url, \
            chromium_page(1280, 1800) as page:
        page.goto(f"{url}/compare")
        wait_idle(page)
        page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=60_000)
        time.sleep(1.5)
        body = page.inner_text("[data-testid='stMain']")
        assert "B vs A: p50" in body and "Component by component" in body
        assert "faster forward" in body and "baseline" in body
        assert page.locator("[data-testid='stPlotlyChart']").count() == 2
        # every component of the stacked bars is drawn (legend entries of the second chart)
        legend = page.locator("[data-testid='stPlotlyChart']").nth(1).inner_text()
        # both runs are in-process: their first component is the hand-off
        for comp in (HANDOFF, "queue", "preprocess", "forward", "postprocess"):
            assert comp in legend
        page.screenshot(path=str(ARTIFACTS / "compare_runs.png"), full_page=True)
        with page.expect_download(timeout=60_000) as download:
            page.get_by_role("button", name="Chrome trace (Perfetto)").click()
        trace = json.loads(Path(download.value.path()).read_text())
        assert download.value.suggested_filename.endswith(".trace.json")
        reqs = [e for e in trace["traceEvents"] if e.get("name") == "request"]
        assert len(reqs) == 610 and all(e["ph"] == "X" and e["dur"] > 0 for e in reqs)
