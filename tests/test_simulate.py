"""The simulation against closed forms (long runs, statistical tolerance) and its speed rule."""
import numpy as np
import pytest

from latency.simulation import queueing as q
from latency.simulation.simulator import (
    ServiceModel,
    SimConfig,
    arrivals_ms,
    simulate,
    summarize_simulation,
)


def mean_wait_ms(config, service):
    rows = simulate(config, service)
    m = rows[~rows["warmup"]]
    return float(((m["t_fwd_start"] - m["t_pre_end"]) / 1e6).mean())


@pytest.mark.parametrize("dist,theory", [
    ("exponential", lambda: q.mm1(0.7 / 10, 10).wait_mean),
    ("constant", lambda: q.md1(0.7 / 10, 10).wait_mean),
])
def test_single_server_matches_mm1_and_md1(dist, theory):
    svc = ServiceModel(forward_ms=10, dist=dist)
    got = mean_wait_ms(SimConfig(rate=70, requests=200_000, seed=1), svc)
    assert got == pytest.approx(theory(), rel=0.05)


def test_three_replicas_match_erlang_c():
    svc = ServiceModel(forward_ms=10, dist="exponential")
    got = mean_wait_ms(SimConfig(rate=240, replicas=3, requests=200_000, seed=2), svc)
    assert got == pytest.approx(q.mmc(0.24, 10, 3).wait_mean, rel=0.06)


def test_batching_forms_batches_and_bounds_the_wait():
    svc = ServiceModel(forward_ms=4, forward_per_item_ms=0.5, dist="constant")
    rows = simulate(SimConfig(rate=50, batch_size=8, max_batch_delay_ms=5, requests=20_000),
                    svc)
    m = rows[~rows["warmup"]]
    assert m["batch_size"].max() <= 8
    wait = (m["t_fwd_start"] - m["t_pre_end"]) / 1e6
    assert wait.max() < 5 + 4 + 0.5 * 7 + 1e-6  # delay, plus at most one batch in service


def test_unstable_is_said_plainly_without_nan():
    sim = summarize_simulation(SimConfig(rate=150, requests=20_000),
                               ServiceModel(forward_ms=10, dist="constant"))
    assert sim.utilisation == pytest.approx(1.5)
    assert sim.summary.warnings[0].startswith("unstable")
    assert np.isfinite(sim.summary.latency_ms.p99)


def test_service_times_resampled_from_a_recorded_run():
    from latency.core.config import RunConfig
    from latency.execution.engine import execute

    run = execute(RunConfig(model="synthetic", model_args={"preprocess_ms": 1, "forward_ms": 4,
                                                            "postprocess_ms": 0.5},
                            concurrency=8, batch_size=4, max_batch_delay_ms=2, requests=400,
                            warmup=8))
    svc = ServiceModel.from_rows(run.log)
    assert 4 in svc.forward_by_batch
    # the samples are the run's own measured times (not the nominal 4 and 1 ms it was set to,
    # which a busy machine stretches)
    rec = run.measured()
    rec = rec[rec["status"] == 0]
    first = np.unique(rec["batch_id"], return_index=True)[1]
    rec_fwd = ((rec["t_fwd_end"] - rec["t_fwd_start"]) / 1e6)[first]
    rec_size = rec["batch_size"][first]
    assert np.median(svc.forward_by_batch[4]) == pytest.approx(
        np.median(rec_fwd[rec_size == 4]), rel=1e-9)
    assert np.median(svc.samples["preprocess"]) == pytest.approx(
        np.median((rec["t_pre_end"] - rec["t_pre_start"]) / 1e6), rel=0.05)
    assert np.median(svc.forward_by_batch[4]) >= 4.0  # a 4 ms hold is never shorter
    rows = simulate(SimConfig(rate=100, batch_size=4, max_batch_delay_ms=2, requests=20_000),
                    svc)
    m = rows[~rows["warmup"]]
    fwd = (m["t_fwd_end"] - m["t_fwd_start"]) / 1e6
    # the simulated batches of 4 are resampled from the recorded ones
    assert np.median(fwd[m["batch_size"] == 4]) == pytest.approx(
        np.median(svc.forward_by_batch[4]), rel=0.05)



def test_fixed_serving_costs_add_where_they_belong():
    svc = ServiceModel(forward_ms=4, dist="constant", network_ms=0.2, turnaround_ms=1.0)
    rows = simulate(SimConfig(rate=1, arrival="constant", requests=200), svc)
    m = rows[~rows["warmup"]]
    total = (m["t_done"] - m["t_intended"]) / 1e6
    assert np.allclose(total, 4.2)  # no queueing at 1 req/s: forward + network
    assert svc.mean_service_ms() == pytest.approx(5.0)  # the replica's turnaround counts


@pytest.mark.parametrize("batching", [dict(), dict(batch_size=4, max_batch_delay_ms=2.0),
                                      dict(clients=1)], ids=["single", "batched", "closed"])
def test_the_replicas_wake_up_and_turnaround_are_measured_back_from_the_rows(batching):
    """The two hand-offs of a replica are told apart in the rows they leave: the wake-up is
    paid by a request that finds the replica idle (its queue time; at 5 req/s, or from one
    client, nearly all of them), the turnaround by one that finds it busy (the gap between
    two batches; three clients keep one replica always busy)."""
    from latency.simulation.service import measured_turnaround_ms, measured_wakeup_ms

    svc = ServiceModel(forward_ms=2, dist="exponential", wakeup_ms=0.3, turnaround_ms=0.2,
                       postprocess_ms=0.1, network_ms=0.1)  # the client's next comes later
    cfg = SimConfig(rate=5, requests=4000, seed=2, **batching)
    rows = simulate(cfg, svc)
    size, delay = batching.get("batch_size", 1), batching.get("max_batch_delay_ms", 0.0)
    m = rows[~rows["warmup"]]
    queue = (m["t_fwd_start"] - m["t_pre_end"]) / 1e6
    assert np.median(queue) == pytest.approx(0.3 + delay, abs=1e-6)
    assert measured_wakeup_ms(rows, size, delay) == pytest.approx(0.3, abs=1e-3)
    busy = simulate(SimConfig(rate=5, requests=4000, seed=2, clients=3), svc)
    assert measured_turnaround_ms(busy) == pytest.approx(0.2, abs=1e-3)
    # an ideal server (no wake-up) starts a due batch at once: nothing measured back
    ideal = simulate(cfg, ServiceModel(forward_ms=2, dist="exponential"))
    assert measured_wakeup_ms(ideal, size, delay) == 0


def test_recorded_arrivals_are_replayed_and_bursts_queue_more():
    times = np.array([0.0, 10.0, 15.0, 40.0])
    cfg = SimConfig(rate=75, arrival="recorded", arrival_times_ms=times, requests=8)
    t = arrivals_ms(cfg, np.random.default_rng(0))
    gaps = np.diff(t)
    assert np.allclose(gaps[:3], [10, 5, 25]) and np.allclose(gaps[4:7], [10, 5, 25])
    assert gaps[3] == pytest.approx(40 / 3)  # the period: the run's length plus a mean gap
    svc = ServiceModel(forward_ms=5, dist="exponential")
    steady = summarize_simulation(SimConfig(rate=100, requests=60_000), svc)
    bursty = summarize_simulation(SimConfig(rate=100, arrival="bursty", requests=60_000), svc)
    # same mean rate, but in bursts at twice the rate (ρ = 1 while on): far longer queues
    assert bursty.summary.latency_ms.p99 > 3 * steady.summary.latency_ms.p99


@pytest.mark.parametrize("workers", [1, 2])
def test_the_preprocess_pool_queues_like_mmc(workers):
    # preprocessing 8 ms exponential, a negligible model: the pool is an M/M/c queue at ρ 0.8
    svc = ServiceModel(forward_ms=0.001, preprocess_ms=8, dist="exponential")
    rate = 100 * workers
    cfg = SimConfig(rate=rate, preprocess_workers=workers, requests=200_000)
    rows = simulate(cfg, svc)
    m = rows[~rows["warmup"]]
    wait = (m["t_pre_start"] - m["t_received"]).mean() / 1e6
    assert wait == pytest.approx(q.mmc(rate / 1000, 8, workers).wait_mean, rel=0.1)
    from latency.simulation.simulator import utilisation
    assert utilisation(cfg, svc) == pytest.approx(0.8)
    unlimited = simulate(SimConfig(rate=rate, requests=20_000), svc)
    assert (unlimited["t_pre_start"] == unlimited["t_received"]).all()


def test_a_closed_loop_of_n_clients_matches_its_known_answers():
    """N clients on c replicas of constant or exponential service τ, nothing else: the
    replicas never idle, so throughput is c/τ and (Little's law) each request takes N·τ/c."""
    from latency.core.records import component_ns
    from latency.simulation.closed_loop import simulate_closed

    for clients, replicas, dist in ((4, 1, "constant"), (4, 1, "exponential"),
                                    (8, 2, "exponential")):
        rows = simulate_closed(clients, ServiceModel(forward_ms=10.0, dist=dist),
                               requests=20_000, replicas=replicas)
        kept = rows[~rows["warmup"]]
        total = component_ns(kept)["total"] / 1e6
        span_s = (kept["t_done"].max() - kept["t_intended"].min()) / 1e9
        assert total.mean() == pytest.approx(clients * 10.0 / replicas, rel=0.02)
        assert len(kept) / span_s == pytest.approx(1000 * replicas / 10.0, rel=0.02)
        # never more than N requests in the system: each client has one outstanding
        assert set(np.bincount(kept["client"])) and kept["client"].max() == clients - 1


def test_a_closed_loop_arm_replayed_as_a_closed_loop_reproduces_itself_and_speeds_up():
    """The Lab's what-if for a closed-loop arm: the same clients, as measured, land on the
    measurement; a 50 % faster forward pass (the bottleneck, constant 10 ms for 4 clients)
    raises the throughput the clients reach and cuts the mean by the same factor (N·τ)."""
    from latency.simulation.closed_loop import simulate_closed
    from latency.simulation.whatif import load_whatif

    measured = simulate_closed(4, ServiceModel(forward_ms=10.0, preprocess_ms=1.0,
                                               dist="exponential"), requests=8000, seed=3)
    w = load_whatif(measured[~measured["warmup"]], "forward", 0.5, clients=4,
                    preprocess_workers=4)
    assert w.arrival == "closed" and "4 closed-loop clients" in w.assumption
    for k, tol in (("mean", 0.08), ("p50", 0.1)):
        assert abs(w.calibration()[k]) < tol, (k, w.before, w.measured)
    assert w.rate_after > 1.6 * w.rate  # a faster server is asked more often
    assert w.after["mean"] == pytest.approx(w.before["mean"] * 0.5, rel=0.1)


@pytest.mark.parametrize("settings,named", [
    ({"requests": 10**9}, "--requests"),
    ({"rate": 100, "requests": 10**9}, "--requests"),
    ({"rate": 100, "replicas": 0}, "--replicas"),
    ({"rate": 100, "batch_size": 10**6}, "--batch-size"),
    ({"rate": 100, "max_batch_delay_ms": -1}, "--max-batch-delay-ms"),
    ({"rate": 2e6}, "--rate"),
    ({"rate": 100, "seed": -1}, "--seed"),
    ({"clients": 0}, "--clients"),
    ({"rate": 100, "preprocess_workers": 0}, "--preprocess-workers"),
    ({"rate": 100, "service_ms": 0}, "--service-ms"),
    ({"rate": 100, "arrival": "weekly"}, "--arrival"),
])
def test_the_api_refuses_what_the_cli_refuses_naming_the_setting(settings, named):
    import latency
    from latency.cli.main import main
    from latency.core.errors import ConfigError

    with pytest.raises(ConfigError, match=named) as refused:
        latency.simulate(**settings)
    assert "\n" not in str(refused.value)
    flags = [x for k, v in settings.items()
             for x in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["simulate", *flags]) == 2  # the CLI refuses the same values


@pytest.mark.parametrize("settings", [
    {"rate": 10, "clients": 4},
    {},
    {"rate": 10, "arrival": "recorded"},
    {"rate": 10, "from_run": "no-such-run.json"},
])
def test_the_cli_and_the_api_word_the_same_mistake_alike(settings, capsys):
    """One glue (``simulation_setup``) behind both: a mistake reads the same line whether it
    was made with flags or with keywords."""
    import latency
    from latency.cli.main import main
    from latency.core.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        latency.simulate(**settings)
    flags = [x for k, v in settings.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["simulate", *flags]) == 2
    assert capsys.readouterr().err.strip() == f"latency: error: {refused.value}"


def test_a_replayed_batched_closed_loop_charges_every_component_as_the_engine_does():
    """The engine charges a request's wait for its replica to post-process the earlier
    requests of its batch to ``queue`` (docs/method.md's component table); a batch-8 closed loop
    replayed through the simulator must do the same, component by component, not only in
    total. Postprocessing 2 ms a request makes the wait (~7 ms a request at batch 8) far
    larger than the tolerance."""
    import latency
    from latency.core.config import RunConfig
    from latency.execution.engine import execute

    run = execute(RunConfig(model="synthetic",
                            model_args={"forward_ms": 4, "forward_per_item_ms": 0.5,
                                        "postprocess_ms": 2},
                            batch_size=8, max_batch_delay_ms=3, concurrency=16, requests=800))
    sim = latency.simulate(from_run=run, requests=20_000)  # a closed loop of 16, batch 8
    measured, simulated = run.summary.components_ms, sim.summary.components_ms
    tolerance = max(0.5, 0.06 * run.summary.latency_ms.mean)  # the replay's own error
    misplaced = []
    for name, stats in measured.items():
        if abs(simulated[name].mean - stats.mean) > tolerance:
            misplaced.append(f"{name}: simulated {simulated[name].mean:.2f} ms, "
                             f"measured {stats.mean:.2f} ms")
    assert not misplaced, f"tolerance {tolerance:.2f} ms: " + "; ".join(misplaced)
    assert sim.summary.latency_ms.mean == pytest.approx(run.summary.latency_ms.mean,
                                                       abs=tolerance)
    assert not sim.unstable  # a saturated closed loop reads ρ ≈ 1 but never grows a queue


@pytest.mark.parametrize("run,simulated", [
    ({"concurrency": 8}, {"rate": 1.0, "clients": 8}),
    ({"concurrency": 1}, {"rate": 1.0, "clients": 1}),
    ({"rate": 150, "arrival": "poisson"}, {"rate": 150}),
    ({"rate": 2.5, "arrival": "constant"}, {"rate": 2.5, "arrival": "constant"}),
])
def test_a_simulated_load_is_worded_as_a_measured_one(run, simulated, capsys):
    """The history, the Compare page and a run's summary call a load what the simulator's
    header and the Load Simulator's caption call the same load."""
    from latency.cli.main import main
    from latency.core.config import RunConfig
    from latency.core.describe import load_description

    said = load_description(RunConfig(**run))
    assert SimConfig(**simulated).describe().startswith(f"{said}, ")
    flags = (["--clients", str(run["concurrency"])] if "concurrency" in run else
             ["--rate", str(run["rate"]), "--arrival", run["arrival"]])
    assert main(["simulate", *flags, "--requests", "500"]) == 0
    assert capsys.readouterr().out.startswith(f"SIMULATED (no model ran): {said}, ")


def _recorded_run_file(path, seed: int = 1):
    """A run JSON as `run --json` writes it: an open loop at a constant 40 req/s of ~5 ms
    requests (no request ever waits for another), whose stamps are whole ns with an odd
    network time — half of it lands on .5 ns in a simulation, where float round-off flips
    the rounding."""
    import json

    from latency.core.config import RunConfig
    from latency.core.records import rows_to_table

    svc = ServiceModel(forward_ms=4.0, dist="lognormal", cv=0.3, preprocess_ms=0.5,
                       postprocess_ms=0.2)
    rows = simulate(SimConfig(rate=40, arrival="constant", requests=400), svc)
    rng = np.random.default_rng(seed)
    hop = rng.integers(20_000, 90_000, size=len(rows)) | 1  # odd ns
    for stamp in ("received", "pre_start", "pre_end", "fwd_start", "fwd_end", "post_start",
                  "post_end", "done"):
        rows[f"t_{stamp}"] += hop
    rows["t_done"] += rng.integers(10_000, 45_000, size=len(rows)) * 2
    config = RunConfig(rate=40, arrival="constant", requests=400).to_dict()
    path.write_text(json.dumps({"config": config, "requests": rows_to_table(rows)}))
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_replay_where_nothing_waits_prints_a_queue_of_exactly_zero(tmp_path, seed, capsys):
    """`simulate --from-run RUN --arrival recorded` of a run where no request waited: its
    queue is 0 — not −2.2e-09 ms, a float round-off printed as a negative wait."""
    from latency.cli.main import main

    run_file = _recorded_run_file(tmp_path / "run.json")
    assert main(["simulate", "--from-run", str(run_file), "--arrival", "recorded",
                 "--seed", str(seed)]) == 0
    out = capsys.readouterr().out
    queue = next(line for line in out.splitlines() if line.startswith("queue")).split()[1:]
    assert queue == ["0"] * 7, out
    for line in out.splitlines():
        if line.split()[:1] in (["network"], ["preprocess"], ["forward"], ["postprocess"],
                                ["overhead"], ["total"]):
            assert not any(v.startswith("-") for v in line.split()[1:]), line


@pytest.mark.parametrize("config,service", [
    (SimConfig(rate=30, requests=100_000), ServiceModel(forward_ms=10, dist="exponential")),
    (SimConfig(rate=70, requests=100_000, seed=3),
     ServiceModel(forward_ms=10, dist="exponential", network_ms=0.1234567)),
    (SimConfig(rate=60, requests=50_000, preprocess_workers=1),
     ServiceModel(forward_ms=2, dist="exponential", preprocess_ms=8, postprocess_ms=0.3)),
    (SimConfig(rate=150, replicas=2, requests=50_000),
     ServiceModel(forward_ms=10, dist="lognormal", cv=1.5)),
    (SimConfig(rate=300, batch_size=8, max_batch_delay_ms=2, requests=50_000),
     ServiceModel(forward_ms=10, forward_per_item_ms=1, dist="exponential",
                  postprocess_ms=0.3)),
    (SimConfig(rate=1, clients=6, replicas=2, batch_size=4, max_batch_delay_ms=1,
               requests=20_000), ServiceModel(forward_ms=3, dist="exponential",
                                              preprocess_ms=1, postprocess_ms=0.2)),
])
def test_no_simulated_component_is_ever_negative(config, service):
    """Every component is a duration: never below 0 in any request, whichever path the
    simulator takes (the vectorised Lindley recursion — where float round-off once made
    ~1 request in 50,000 wait −1 ns —, the preprocess pool, replicas, batching, the closed
    loop)."""
    from latency.core.records import COMPONENTS, component_ns

    comps = component_ns(simulate(config.checked(), service.checked()))
    below = {c: int((comps[c] < 0).sum()) for c in (*COMPONENTS, "total")}
    assert not any(below.values()), below
