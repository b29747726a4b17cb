"""Compare Runs for generations through AppTest, on a history seeded with two real
synthetic-lm generations (the decode step 2 ms and 6 ms): the headline says what the stored
summaries say, the charts are the runs', the diff's figures are the summaries', and a
generation can be renamed and exported."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation
from latency.storage.store import RunStore

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def generations():
    def run(step_ms: float):
        cfg = RunConfig(model="synthetic-lm", concurrency=2, requests=16, warmup=2,
                        prompt_tokens="32", output_tokens="12", max_running=2,
                        model_args={"step_ms": step_ms, "step_ms_per_seq": 0.0})
        result = execute_generation(cfg, force=True)
        assert result.status == "completed", result.failure
        return result

    return run(2.0), run(6.0)


@pytest.fixture
def seeded(tmp_path, monkeypatch, generations):
    db = tmp_path / "runs.sqlite"
    monkeypatch.setenv("LATENCY_LAB_DB", str(db))
    store = RunStore(db)
    fast, slow = generations
    return store, store.save(fast, name="fast decode"), store.save(slow)


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["cmp_kind"] = "generations (LLM)"  # a bound control: its label
    at.run()
    at.switch_page("views/compare_runs.py").run()
    assert not at.exception
    return at


def test_two_generations_are_compared_figure_by_figure(seeded, generations):
    store, fast_id, slow_id = seeded
    at = page()
    assert at.multiselect(key="gcmp_runs").value == [fast_id, slow_id]  # older first: A
    heads = [m.value for m in at.markdown if m.value.startswith("**B vs A")]
    assert len(heads) == 1 and "TPOT p99" in heads[0] and "output tokens/s" in heads[0]
    assert any("Setup A → B" in c.value and "2 → 6" in c.value for c in at.caption)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 3
    ttft, itl, parts = charts
    assert {t["name"] for t in ttft["data"] if t.get("showlegend", True)} >= \
        {"A · fast decode", "B · synthetic-lm"}
    # the parts' bars: the stored summaries' own TTFT parts, mean and around p99
    fast, slow = (store.load(rid).summary for rid in (fast_id, slow_id))
    queue = next(t for t in parts["data"] if t["name"] == "queue")
    assert queue["y"] == pytest.approx([fast.ttft_mean_parts_ms["queue"],
                                        slow.ttft_mean_parts_ms["queue"],
                                        fast.ttft_p99_parts_ms["queue"],
                                        slow.ttft_p99_parts_ms["queue"]])
    table = at.dataframe[1].value
    tpot = table[table["figure"] == "TPOT p50"].iloc[0]
    assert tpot["A"] == pytest.approx(fast.tpot_ms.p50, abs=1e-3)
    assert tpot["B"] == pytest.approx(slow.tpot_ms.p50, abs=1e-3)
    assert tpot["Δ% B"] > 100  # a 6 ms decode step against a 2 ms one
    assert {b.key for b in at.download_button} == {f"gcmpbtn_dl_{f}" for f in
                                                   ("csv", "parquet", "json", "trace", "html")}


def test_the_page_opens_on_the_kind_of_the_newest_run(seeded):
    """One history: with generations saved last, Compare Runs shows them (it had opened on
    "No saved runs yet" while generations existed)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare_runs.py").run()
    assert not at.exception
    assert at.multiselect(key="gcmp_runs").value == list(seeded[1:])
    assert not any("No saved" in i.value for i in at.info)


def test_a_generation_is_renamed_and_an_empty_history_says_how_to_fill_it(
        seeded, tmp_path, monkeypatch):
    store, fast_id, slow_id = seeded
    at = page()
    at.selectbox(key="gcmp_target").set_value(slow_id).run()
    at.text_input(key=f"gcmp_name_{slow_id}").input("slow decode").run()
    next(b for b in at.button if b.key == "gcmpbtn_rename").click().run()
    assert store.info(slow_id).name == "slow decode"
    monkeypatch.setenv("LATENCY_LAB_DB", str(tmp_path / "empty.sqlite"))
    at = page()
    assert any("No saved generations yet" in i.value for i in at.info)
