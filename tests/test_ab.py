"""A/B runs, the headline and Amdahl, the what-if calculator, and the lesson on measured data."""
import dataclasses
import json

import pytest

from latency.analysis.ab import merge
from latency.analysis.result import RunResult
from latency.cli.ab import format_ab
from latency.cli.main import main
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.ab import ABPlan, run_ab, variant_config
from latency.simulation.simulator import ServiceModel, SimConfig, simulate
from latency.simulation.whatif import decomposition_whatif, load_whatif
from latency.workshop import practice as lesson
from tests.timing_support import watched


def sim_result(forward_ms, pre_ms=10.0, rate=20.0, seed=0, n=4000):
    """Constant arrivals 50 ms apart and constant stages: nothing ever waits."""
    rows = simulate(SimConfig(rate=rate, requests=n, seed=seed, arrival="constant"),
                    ServiceModel(forward_ms=forward_ms, preprocess_ms=pre_ms, dist="constant"))
    rows["warmup"][:] = False
    return RunResult(config=RunConfig(model="synthetic", rate=rate), environment={},
                     status="completed", log=rows)


def test_blocks_alternate_counterbalanced_with_one_seed_per_pair():
    base = RunConfig(model="tabular-mlp", requests=10, seed=5)
    plan = ABPlan(base, variant_config(base, optimize=["int8"]), pairs=3)
    order = plan.blocks()
    assert [arm for arm, _ in order] == ["A", "B", "B", "A", "A", "B"]
    assert [c.seed for _, c in order] == [5, 5, 6, 6, 7, 7]
    assert all(c.optimize == (["int8"] if arm == "B" else []) for arm, c in order)


def test_plan_refuses_identical_arms_and_bad_pairs():
    base = RunConfig(model="tabular-mlp", requests=10)
    with pytest.raises(ConfigError, match="identical"):
        ABPlan(base, variant_config(base), 1).validated()
    with pytest.raises(ConfigError, match="pairs"):
        ABPlan(base, variant_config(base, pre="naive"), 0).validated()
    with pytest.raises(ConfigError, match="unknown setting"):
        variant_config(base, warp=9)


def test_headline_known_answer_at_light_load():
    # Constant stages and arrivals at 20 req/s: no queueing. forward 10 → 5 ms of a 20 ms total:
    # forward −50%, share 50%, so Amdahl predicts and the run shows −25% end to end.
    plan = ABPlan(RunConfig(), RunConfig(), 1)
    ab = merge(plan, [("A", sim_result(10.0)), ("B", sim_result(5.0))])
    h = ab.headline
    assert h.forward_change == pytest.approx(-0.5, abs=1e-3)
    assert h.forward_share == pytest.approx(0.5, abs=1e-3)
    assert h.amdahl_mean_change == pytest.approx(-0.25, abs=1e-3)
    assert h.mean_change == pytest.approx(-0.25, abs=1e-3)
    assert h.p50_change == pytest.approx(-0.25, abs=1e-3)
    assert h.text == "end-to-end p50 −25%, p99 −25%; mean −5.00 ms = forward −5.00 ms"
    assert "50% of A's mean" in h.explanation
    assert "differs" not in h.explanation  # measured matches the forward-only prediction


def test_headline_flags_when_queueing_responds():
    # Near saturation (0.9 utilisation) a faster forward also removes most of the queue:
    # the measured change far exceeds the forward-only Amdahl prediction.
    a = sim_result(45.0, pre_ms=1.0, rate=20.0)
    a.log = simulate(SimConfig(rate=20.0, requests=20000, seed=1),
                     ServiceModel(forward_ms=45.0, preprocess_ms=1.0))
    b = sim_result(22.5, pre_ms=1.0, rate=20.0)
    b.log = simulate(SimConfig(rate=20.0, requests=20000, seed=1),
                     ServiceModel(forward_ms=22.5, preprocess_ms=1.0))
    h = merge(ABPlan(RunConfig(), RunConfig(), 1), [("A", a), ("B", b)]).headline
    assert h.mean_change < h.amdahl_mean_change - 0.2
    assert "other components moved" in h.explanation


def test_decomposition_whatif_known_answer():
    rows = sim_result(10.0).log
    w = decomposition_whatif(rows, "forward", 0.5)
    assert w.before["mean"] == pytest.approx(20.0, abs=0.01)
    assert w.after["mean"] == pytest.approx(15.0, abs=0.01)
    assert w.change["p99"] == pytest.approx(-0.25, abs=1e-3)
    assert w.share == pytest.approx(0.5, abs=1e-3)
    assert "forward 50% faster → mean −25%" in w.sentence()
    with pytest.raises(ValueError):
        decomposition_whatif(rows, "overhead", 0.5)
    with pytest.raises(ValueError):
        decomposition_whatif(rows, "forward", 1.5)


def test_load_whatif_lets_the_queue_respond():
    # Recorded at light load; simulated at 85% utilisation of the forward pass, a 50% faster
    # forward pass cuts p99 by far more than the decomposition (which keeps the queue) says.
    rows = simulate(SimConfig(rate=20.0, requests=5000, seed=2),
                    ServiceModel(forward_ms=10.0, preprocess_ms=2.0))
    flat = decomposition_whatif(rows, "forward", 0.5)
    load = load_whatif(rows, "forward", 0.5, rate=85.0)
    assert load.simulated and load.utilisation[0] == pytest.approx(0.85, rel=0.1)
    assert load.utilisation[1] == pytest.approx(load.utilisation[0] / 2, rel=0.05)
    assert load.change["p99"] < flat.change["p99"] - 0.2
    with pytest.raises(ValueError):
        load_whatif(rows, "queue", 0.5, rate=10.0)


@pytest.mark.timing
def test_the_lesson_reproduces_its_point_on_measured_data():
    """int8 makes the forward pass much faster; end-to-end p50 falls by much less, because
    preprocessing and queueing dominate. Then the levers that help do help.

    Measured here, on this noisy, shared machine, so the tolerances are generous and
    theory-based. The forward speed-up is B's model against the baseline model, one batch of 8
    each, timed call by call side by side in B's run process (``forward_alone_change``): the
    forward time *served* under load also includes waits for the Python interpreter held by
    the naive preprocessing threads, and scatters too much on two shared cores to assert on."""
    with watched() as machine:  # the A/B's run processes are this test's children
        ab = run_ab(lesson.quantise_plan(duration_s=1.5, pairs=1))
        helped = run_ab(lesson.helping_plan(duration_s=1.5, pairs=1))
    note = machine.note()
    h = ab.headline
    assert ab.b.optimization["agreement"] >= 0.95
    assert h.forward_alone_change is not None and h.forward_alone_change < -0.3, (h.text, note)
    # end to end, p50 fell by less than half of what the forward pass gained (or rose)
    assert h.p50_change > 0.5 * h.forward_alone_change, (h.text, note)
    # why: the forward pass was a small share; preprocessing and queueing dominated
    comps = ab.a.components_ms
    dominant = (comps["preprocess"].mean + comps["queue"].mean) / ab.a.latency_ms.mean
    assert dominant > 0.6 and h.forward_share < 0.3, (dominant, h.forward_share, note)
    assert helped.headline.p50_change < -0.4, (helped.headline.text, note)
    assert helped.headline.p50_change < h.p50_change - 0.3, (helped.headline.text, note)


def test_cli_ab_prints_headline_and_accuracy(tmp_path, capsys):
    out_json = tmp_path / "ab.json"
    code = main(["ab", "--model", "tabular-mlp", "--concurrency", "2", "--duration", "0.4",
                 "--warmup", "3", "--pairs", "1", "--b-pre", "naive", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0
    assert "headline: end-to-end p50" in out and "Amdahl" in out
    assert "B = preprocessing naive (A: fast)" in out
    assert "variants: preprocess naive" in out and "top-1 agreement 100.0%" in out
    data = json.loads(out_json.read_text())
    assert data["order"] == ["A", "B"] and data["B"]["components_ms"]["preprocess"]["mean"] > 0


def test_cli_ab_bad_input_is_one_line(capsys):
    assert main(["ab", "--model", "tabular-mlp", "--b-optimize", "channels_last"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "convolutional" in err
    assert main(["ab", "--model", "tabular-mlp"]) == 2
    assert "identical" in capsys.readouterr().err


def test_format_ab_lists_every_component():
    ab = merge(ABPlan(RunConfig(), RunConfig(), 1), [("A", sim_result(10.0)),
                                                      ("B", sim_result(5.0))])
    text = format_ab(ab)
    for c in ("network", "queue", "preprocess", "forward", "postprocess", "overhead"):
        assert f"\n{c}" in text
    assert "headline: end-to-end p50 −25%" in text


def test_pooled_blocks_keep_batches_apart():
    # every block numbers its batches from 0; pooled, they must stay distinct batches, or the
    # simulator would resample merged "batches" spanning two runs
    one, two = sim_result(10.0, seed=1), sim_result(10.0, seed=2)
    ab = merge(ABPlan(RunConfig(), RunConfig(), 2),
               [("A", one), ("B", sim_result(5.0)), ("B", sim_result(5.0)), ("A", two)])
    assert len(set(ab.a.rows["batch_id"].tolist())) == len(one.log) + len(two.log)
    w = load_whatif(ab.a.rows, "forward", 0.5, rate=40.0)
    assert 0.3 < w.utilisation[0] < 0.5 and w.utilisation[1] < w.utilisation[0]
    assert not any(x.startswith("only") for x in ab.a.warnings)  # 8000 pooled requests


def test_a_pooled_arm_replayed_as_recorded_reproduces_its_own_measurement():
    """The Lab's 'simulated under load, now' is the arm's own load: its blocks follow each
    other in time (not overlapping, not paused while the other arm ran), so the replayed rate
    is the measured one and the simulation as measured lands on the measurement (blocks laid
    out wrongly gave a 'now' half the measured mean, simulated at 80 % of the rate)."""
    def queued(seed):
        rows = simulate(SimConfig(rate=70.0, requests=6000, seed=seed),
                        ServiceModel(forward_ms=10.0))  # M/M/1 at ρ 0.7: it queues
        return RunResult(config=RunConfig(model="synthetic", rate=70.0), environment={},
                         status="completed", log=rows[~rows["warmup"]])

    ab = merge(ABPlan(RunConfig(), RunConfig(), 2),
               [("A", queued(1)), ("B", sim_result(5.0)), ("B", sim_result(5.0)),
                ("A", queued(2))])
    w = load_whatif(ab.a.rows, "forward", 0.3)  # no rate: the arm's own send times
    assert w.arrival == "recorded" and w.rate == pytest.approx(70.0, rel=0.05)
    assert w.utilisation[0] == pytest.approx(0.7, rel=0.05)
    # mean and p50 settle fast; a p99 at ρ 0.7 scatters ±15 % per run of this length (the
    # pool is worth ~400 independent requests), and here two runs are compared
    for k, tol in (("mean", 0.12), ("p50", 0.12), ("p99", 0.4)):
        assert abs(w.calibration()[k]) < tol, (k, w.before, w.measured)
    assert w.after["mean"] < w.before["mean"]
    assert "same load, not the same clients" in w.assumption
    flat = decomposition_whatif(ab.a.rows, "forward", 0.3)
    assert "nothing else moves" in flat.assumption
    # the queue responds: the simulated gain exceeds the decomposition's
    assert w.change["mean"] < flat.change["mean"]


def test_every_setting_an_arms_label_names_is_a_runconfig_field():
    """The label's settings are RunConfig's fields, read by attribute: a renamed field cannot
    silently read None and drop a change from the label."""
    from latency.analysis import ab

    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(ab.SETTING_NAMES) <= names and set(ab.NOT_WALKED) <= names
    assert set(ab.ARM_SETTINGS) <= names
    assert all(ab.NOT_WALKED.values())  # each field left out says why


def test_an_arm_that_changes_a_setting_nobody_listed_is_labelled_with_it():
    """B served by Ray Serve, A by our server: B's label names the backend, so the result is
    not credited to nothing ('the same settings as A')."""
    a, b = sim_result(10.0), sim_result(10.0)
    b.config = dataclasses.replace(a.config, backend="ray", ray_preprocess="deployment")
    ab = merge({}, [("A", a), ("B", b)])
    assert ab.b.label == "backend ray (A: builtin), ray-preprocess deployment (A: replica)"


def test_the_headline_names_every_change_and_its_parts_sum_to_the_total():
    """The A/B of the lesson's step 2 changes levers, preprocessing, postprocessing and the
    worker pool: B's label names all four, and the end-to-end change is attributed component
    by component, the parts summing to the whole — never credited to the model alone."""
    from latency.analysis.ab import arm_changes

    plan = lesson.helping_plan()
    changes = arm_changes(plan.baseline.to_dict(), plan.variant.to_dict())
    assert changes == ["levers int8 (A: none)", "pre workers 4 (A: 1)",
                       "preprocessing fast (A: naive)", "postprocessing fast (A: naive)"]
    a = sim_result(10.0, pre_ms=30.0)
    b = sim_result(9.0, pre_ms=3.0)
    a.config = plan.baseline
    b.config = plan.variant
    ab = merge(plan, [("A", a), ("B", b)])
    d = ab.headline.component_deltas_ms
    total = ab.b.latency_ms.mean - ab.a.latency_ms.mean
    assert sum(d.values()) == pytest.approx(total, abs=1e-9)
    assert d["preprocess"] == pytest.approx(-27.0, abs=1e-6)
    assert "preprocess −27.0 ms" in ab.headline.text and "forward −1.00 ms" in ab.headline.text
    assert ab.b.label == ", ".join(changes)
