"""The Load Simulator's generation mode through AppTest: its figures agree with its headline
(the marker on the curve, the bars' totals with the metrics), chunked prefill takes the
stalls off the waterfall, the what-ifs say which lever moves what, a saved generation run's
fitted costs replace the parametric ones, and bad settings are one error box."""

import pytest
from streamlit.testing.v1 import AppTest

from latency.core import fmt
from tests.app_support import chart_with, metric_value, page_in_mode
from tests.gen_support import recorded_synthetic_lm_run


def generation_mode() -> AppTest:
    return page_in_mode("views/load_simulator.py", "sim_kind", "generation")


def longest_stall(at: AppTest) -> float:
    fig = chart_with(at, "stalled (another request's prefill)")
    trace = next(t for t in fig["data"] if t["name"].startswith("stalled"))
    return max(trace.get("x") or [0.0])


def test_the_headline_lies_on_its_curve_and_the_bars_sum_to_it():
    at = generation_mode()
    assert not at.error
    assert any("**Simulated**" in c.value and "parametric server" in c.value for c in at.caption)
    rate = chart_with(at, "TTFT p99")
    line = next(t for t in rate["data"] if t["name"] == "TTFT p99")
    mark = next(t for t in rate["data"] if t["name"] == "your setting")
    i = line["x"].index(mark["x"][1])  # a vertex of the line, not a point near it
    assert line["y"][i] == mark["y"][1]
    assert metric_value(at, "TTFT p99") == fmt.duration(mark["y"][1])
    bars = chart_with(at, "prefill stall")
    p99 = sum(t["y"][-1] for t in bars["data"])
    assert fmt.duration(p99) == metric_value(at, "TTFT p99")
    answer = next(m.value for m in at.markdown if m.value.startswith("**Highest arrival rate"))
    assert "requests/s with 90% of them meeting TTFT ≤ 100 ms and TPOT ≤ 10 ms" in answer
    goodput = chart_with(at, "goodput (meeting the targets)")
    star = next(t for t in goodput["data"] if t["name"].startswith("highest rate"))
    assert f"{star['x'][0]:.2f} requests/s" in answer


def test_an_e2e_target_joins_the_objectives_and_lowers_the_share_meeting_them():
    at = generation_mode()
    before = metric_value(at, "meeting the targets")
    at.sidebar.number_input(key="gsim_e2e").set_value(1.0).run()  # below every request
    assert not at.exception and not at.error
    answer = next(m.value for m in at.markdown if m.value.startswith("**Highest arrival rate"))
    assert "TTFT ≤ 100 ms, TPOT ≤ 10 ms and E2E ≤ 1 ms" in answer
    assert metric_value(at, "meeting the targets") == "0.0%" != before


def test_chunked_prefill_under_a_small_step_budget_shortens_the_stalls():
    at = generation_mode()
    before = longest_stall(at)
    at.sidebar.toggle(key="gsim_chunked").set_value(True).run()
    at.sidebar.slider(key="gsim_chunk").set_value(64).run()
    at.sidebar.slider(key="gsim_step_tokens").set_value(128).run()
    assert not at.exception and not at.error
    assert any("chunked prefill 64" in c.value and "step ≤ 128 tokens" in c.value
               for c in at.caption)
    assert before > 20 and longest_stall(at) < before / 2, (before, longest_stall(at))


def test_the_what_ifs_name_the_lever_that_moves_tpot():
    at = generation_mode()
    at.toggle(key="gsim_whatif").set_value(True).run()
    assert not at.exception
    table = at.table[0].value
    assert list(table.iloc[:, 0]) == ["as set", "chunked prefill 256, step ≤ 264 tokens",
                                      "twice the slots (16)", "a 40 % faster decode step (× 0.6)"]
    assert list(table.iloc[:, -1]) == ["0"] * 4  # nobody refused
    faster = table.iloc[3]["TPOT p50 (ms)"]
    assert faster.endswith("%)") and "(−" in faster  # a faster decode step: shorter TPOT


def test_a_preset_sets_both_targets():
    at = generation_mode()
    at.sidebar.selectbox(key="gsim_preset").set_value("llama3.1-8b-interactive").run()
    assert at.sidebar.number_input(key="gsim_ttft").value == 500.0
    assert at.sidebar.number_input(key="gsim_tpot").value == 30.0
    assert any("TTFT ≤ 500 ms and TPOT ≤ 30 ms" in c.value for c in at.caption)


@pytest.mark.parametrize("key,value,says", [
    ("gsim_prompts", "lots", "--prompt-tokens must be a number of tokens"),
    ("gsim_outputs", "", "needs prompt and output lengths"),
])
def test_a_bad_setting_is_one_error_box(key, value, says):
    at = generation_mode()
    at.sidebar.text_input(key=key).set_value(value).run()
    assert not at.exception
    assert len(at.error) == 1 and says in at.error[0].value


def test_a_saved_generation_runs_costs_are_fitted_and_simulated():
    from latency.storage.store import RunStore

    result = recorded_synthetic_lm_run()
    run_id = RunStore().save(result)
    at = generation_mode()
    at.sidebar.selectbox(key="gsim_source").set_value(f"history:{run_id}").run()
    assert not at.exception and not at.error
    # the run's own scheduler and lengths, its costs fitted with their error
    assert at.sidebar.slider(key="gsim_max_running").value == 4
    assert at.sidebar.text_input(key="gsim_prompts").value == ""
    caption = next(c.value for c in at.caption if "**Simulated**" in c.value)
    assert "the run's prompt lengths" in caption and "a step predicted within" in caption
    assert "parametric" not in caption


def test_prompts_that_cannot_fit_a_step_are_refused_alone_and_counted():
    at = generation_mode()
    at.sidebar.slider(key="gsim_step_tokens").set_value(256).run()  # whole prompts up to 900
    assert not at.exception and not at.error
    warning = next(w.value for w in at.warning if "requests refused" in w.value)
    refused = int(warning.split("**")[1].split(" of ")[0].replace(",", ""))
    # uniform:16:900 prompts: those over the 256-token step cannot be prefilled whole
    assert 0.6 * 400 < refused < 0.85 * 400, warning
    assert any(f"({refused:,} refused)" in c.value for c in at.caption)


def test_validate_runs_the_setting_for_real_and_sets_it_beside_the_prediction():
    from tests.conftest import rerun_until
    from ui.server import run_manager

    at = generation_mode()
    at.sidebar.text_input(key="gsim_prompts").set_value("uniform:16:300").run()
    at.sidebar.number_input(key="gsim_rate").set_value(6.0).run()
    at.slider(key="gsim_val_len").set_value(5).run()
    at.button(key="gsimbtn_validate").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run_id = at.session_state["gsimval_run"].run_id
    handle = run_manager().get(run_id)
    assert handle.kind == "generation" and handle.config.model == "synthetic-lm"
    assert handle.config.model_args["step_ms"] == 4.0  # the parametric costs, held for real
    rerun_until(at, lambda a: handle.done() and any(
        "predicted (calibrated)" in t.value.columns for t in a.table), timeout=150)
    table = next(t.value for t in at.table if "predicted (calibrated)" in t.value.columns)
    assert list(table.iloc[:, 0]) == ["TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"]
    measured = handle.result().summary
    assert table.iloc[0]["measured"] == fmt.duration(measured.ttft_ms.p50)
    assert table.iloc[3]["measured"] == fmt.duration(measured.tpot_ms.p99)
    assert any(f"Measured on this machine by `{run_id}`" in c.value for c in at.caption)


def test_a_saved_run_of_a_server_of_yours_is_fitted_from_outside():
    from latency.core.config import RunConfig
    from latency.execution.gen_engine import execute_generation
    from latency.serve.http_server import ServerProcess
    from latency.simulation.gen_replay import target_fit
    from latency.storage.store import RunStore

    server = RunConfig(model="synthetic-lm", model_args={"prefill_ms": 2.0, "step_ms": 3.0},
                       max_running=4).checked()
    proc = ServerProcess(server).start()
    try:
        cfg = RunConfig(target=f"{proc.url}/v1", output_tokens="uniform:12:32", rate=12.0,
                        requests=80, warmup=2, seed=5).checked()
        result = execute_generation(cfg, force=True)
    finally:
        proc.stop()
    run_id = RunStore().save(result)
    at = generation_mode()
    source = f"history:{run_id}"
    assert any(run_id in o and "fitted from outside" in o
               for o in at.sidebar.selectbox(key="gsim_source").options)
    at.sidebar.selectbox(key="gsim_source").set_value(source).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    # the slots slider takes the server's slots as the run showed them
    assert at.sidebar.slider(key="gsim_max_running").value == target_fit(result).slots
    caption = next(c.value for c in at.caption if "**Simulated**" in c.value)
    assert "fitted from outside" in caption and "decode step" in caption


def test_a_calibration_run_older_than_the_listed_ones_is_found_by_its_name():
    """One pass of the course saves more generations than the picker lists: the run you
    calibrated on falls off the list, and typing its name (or id) finds it in the whole
    history; its whole label is shown under the box."""
    import uuid

    from latency.storage.store import RunStore
    from ui.gen_simulator import LISTED_RUNS

    result = recorded_synthetic_lm_run()
    store = RunStore()
    name = f"calibration {uuid.uuid4().hex[:6]}"
    old = store.save(result, name=name)
    for i in range(LISTED_RUNS + 1):
        store.save(result, name=f"a lesson's run {i}")
    at = generation_mode()
    source = f"history:{old}"
    assert not any(old in o for o in at.sidebar.selectbox(key="gsim_source").options)
    at.sidebar.text_input(key="gsim_find").set_value(name).run()
    found = at.sidebar.selectbox(key="gsim_source").options[1:]
    assert len(found) == 1 and old in found[0] and name in found[0], found
    at.sidebar.selectbox(key="gsim_source").set_value(source).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(name in c.value and old in c.value for c in at.sidebar.caption)
    # clearing the search keeps the chosen run in the picker
    at.sidebar.text_input(key="gsim_find").set_value("").run()
    assert at.sidebar.selectbox(key="gsim_source").value == source


def _on_machine(result, other_cores: float):
    """A real generation with CRAFTED machine samples: other processes using ``other_cores``
    of 2 cores over a 10-s measurement (the quiet limit there is 0.4)."""
    import dataclasses

    from tests.test_disturbed_marks import machine

    env = {k: v for k, v in result.environment.items() if k != "disturbance"}
    env["disturbance"] = machine(other_cores)
    return dataclasses.replace(result, environment=env)


def test_a_prediction_calibrated_on_a_busy_machine_or_a_poor_fit_says_so():
    """The predictions of a run measured while other processes used 1.3 of 2 cores say that
    their calibration was DISTURBED, where they are shown; a poor fit says to read them as
    rough and what Validate does; a quiet run that fits well says neither."""
    import dataclasses

    from latency.simulation.gen_replay import fitted_service
    from latency.storage.store import RunStore
    from ui.gen_simulator import calibration_warnings

    result = recorded_synthetic_lm_run()
    busy = _on_machine(result, 1.3)
    run_id = RunStore().save(busy, name="busy calibration")
    at = generation_mode()
    at.sidebar.selectbox(key="gsim_source").set_value(f"history:{run_id}").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Calibrated on a DISTURBED run" in w.value and "1.3 of 2 cores" in w.value
               for w in at.warning), [w.value for w in at.warning]
    service = fitted_service(result)
    quiet = _on_machine(result, 0.03)
    good = dataclasses.replace(service, step_r2=0.99)
    assert calibration_warnings(quiet, good) == []
    poor = calibration_warnings(quiet, dataclasses.replace(service, step_r2=0.70))
    assert len(poor) == 1 and "R² 0.70" in poor[0] and "Validate" in poor[0], poor


def test_a_validated_setting_of_a_doubtful_calibration_is_headed_by_its_calibrated_prediction():
    """Once Validate has run the setting of a DISTURBED calibration, the page's first figures
    are the calibrated prediction (the validation table's calibrated column), named as such,
    above the prediction as set from the saved run."""
    from latency.storage.store import RunStore
    from tests.conftest import rerun_until
    from ui.server import run_manager

    busy = _on_machine(recorded_synthetic_lm_run(), 1.3)
    run_id = RunStore().save(busy, name="busy calibration")
    at = generation_mode()
    at.sidebar.selectbox(key="gsim_source").set_value(f"history:{run_id}").run()
    assert not any(m.label == "TTFT p50 (calibrated)" for m in at.metric)
    at.slider(key="gsim_val_len").set_value(5).run()
    at.button(key="gsimbtn_validate").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    handle = run_manager().get(at.session_state["gsimval_run"].run_id)
    rerun_until(at, lambda a: handle.done() and any(
        m.label == "TTFT p50 (calibrated)" for m in a.metric), timeout=150)
    table = next(t.value for t in at.table if "predicted (calibrated)" in t.value.columns)
    labels = [m.label for m in at.metric]
    first = labels.index("TTFT p50 (calibrated)")
    assert first < labels.index("TTFT p50 (simulated)")
    assert at.metric[first].value == table.iloc[0]["predicted (calibrated)"]
    assert at.metric[first + 1].value == table.iloc[1]["predicted (calibrated)"]
    assert any(f"by the validation run `{handle.run_id}`" in c.value for c in at.caption)
