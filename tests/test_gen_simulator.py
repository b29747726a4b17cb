"""The generation simulator (latency.simulation.gen_simulator): known answers on an emulated
server whose costs are exact (every step at its fitted time), the scheduler's behaviours it
must show (queueing for a slot, the prefill stall and chunked prefill's cure, static batching,
preemption), and `simulate --from-run` of a generation run."""
from __future__ import annotations

import json

import numpy as np
import pytest

from latency.cli.main import main
from latency.core.config import RunConfig
from latency.core.gen_records import GEN_COMPONENTS, component_ns, token_gaps
from latency.simulation.config import SimConfig
from latency.simulation.gen_service import RATIO_QUANTILES, GenService
from latency.simulation.gen_simulator import simulate_generation
from latency.simulation.gen_step_cost import StepCost
from tests.gen_support import recorded_synthetic_lm_run

#: an emulated server (not a measurement): costs in ms, every step exactly at the model
CALLS = StepCost(fixed_ms=0.0, prefill_fixed_ms=1.0, per_prefill_token_ms=0.01,
                 decode_fixed_ms=2.0, per_sequence_ms=0.5, per_kv_token_ms=0.0)
EXACT = GenService(calls=CALLS, step_own_ms=0.1, step_ratio={"all": (1.0,) * RATIO_QUANTILES},
                   between_steps_ms=0.05,
                   tokenize_fixed_ms=0.2, tokenize_per_token_ms=0.001, detokenize_ms=0.01,
                   delivery_ms=0.02, network_ms=0.0, send_lag_ms=0.0, max_context=8192)


def simulate(prompts, outputs, *, rate=None, clients=None, arrival="constant", service=EXACT,
             requests=None, **scheduler):
    n = requests or len(prompts)
    config = RunConfig(model="synthetic-lm", **scheduler)
    load = SimConfig(rate=rate or 1.0, clients=clients, arrival=arrival, requests=n,
                     seed=3).checked()
    return simulate_generation(config, load, service, np.array(prompts), np.array(outputs))


def ms(ns) -> np.ndarray:
    return np.asarray(ns, dtype=np.float64) / 1e6


def test_one_request_alone_takes_exactly_its_steps():
    r = simulate([200], [5], rate=1)
    row = r.rows[0]
    ttft = ms(row["t_first_deliv"] - row["t_intended"])
    prefill_step = 0.1 + (1.0 + 0.01 * 200) + 0.01  # own work, the call, its token
    assert ttft == pytest.approx(0.2 + 0.001 * 200 + 0.05 + prefill_step + 0.02, abs=1e-5)
    gaps, parts = token_gaps(r.tokens)
    assert len(gaps) == 4
    assert ms(gaps) == pytest.approx([0.05 + 0.1 + (2.0 + 0.5) + 0.01] * 4, abs=1e-5)
    assert ms(parts["decode"]) == pytest.approx([2.5] * 4, abs=1e-5)  # the call alone
    assert r.is_simulated and r.summary.successful == 1
    assert repr(r).startswith("SIMULATED (no model ran; completed)")


def test_a_batched_decode_call_costs_its_own_extra_and_a_decode_what_if_scales_it():
    """Two requests together: every decode step of both is charged the batched call's extra
    (the emulated server's 0.7 ms), a step of one alone is not; ``decode=0.5`` halves the
    extra with the rest of the decode call."""
    from dataclasses import replace

    service = replace(EXACT, calls=replace(CALLS, batched_decode_ms=0.7))
    r = simulate([100, 100], [3, 6], clients=2, service=service)
    decode = ms(token_gaps(r.tokens)[1]["decode"])
    together, alone = 2.0 + 0.7 + 0.5 * 2, 2.0 + 0.5
    assert sorted(decode) == pytest.approx(sorted([together] * 4 + [alone] * 3), abs=1e-5)
    half = service.scaled(decode=0.5).calls
    assert half.decode_call_ms(2, 0) == pytest.approx(together / 2)


def test_every_simulated_request_adds_up_like_a_measured_one():
    rng = np.random.default_rng(0)
    prompts, outputs = rng.integers(16, 600, 300), rng.integers(2, 40, 300)
    r = simulate(prompts, outputs, rate=60, arrival="poisson", max_running=4,
                 chunked_prefill=128)
    comps = component_ns(r.rows)
    assert (sum(comps[c] for c in GEN_COMPONENTS) == comps["e2e"]).all()
    assert sorted(r.rows["prompt_tokens"]) == sorted(prompts)
    assert int(r.rows["output_tokens"].sum()) == int(outputs.sum()) == len(r.tokens)
    s = r.summary
    assert s.successful == 300 and s.errors == 0
    # a request's tokens are what it asked for, each delivered after the one before
    assert (np.diff(r.tokens["t_delivered"])[np.diff(r.tokens["request"]) == 0] > 0).all()
    # the steps never held more than the slots, nor prefilled more than a chunk a sequence
    assert r.steps["running"].max() <= 4
    assert (r.steps["prefill_tokens"] <= 128 * np.maximum(r.steps["prefill_seqs"], 1)).all()


def test_one_slot_makes_the_second_request_wait_the_whole_first():
    r = simulate([100, 100], [10, 10], clients=2, max_running=1)
    first, second = sorted(r.rows, key=lambda x: x["t_admitted"])
    assert second["t_admitted"] >= first["t_done"] - 1
    queue = ms(component_ns(np.array([second]))["queue"])[0]
    e2e_first = ms(first["t_done"] - first["t_admitted"])
    assert queue == pytest.approx(e2e_first, rel=0.05)


def test_a_long_prompt_stalls_everyone_unless_prefill_is_chunked():
    """Eight short requests decode; a 4,000-token prompt arrives mid-stream. Prefill-first:
    their next gap holds its whole prefill (41 ms here); chunked by 256: no gap holds more
    than one chunk's call and two decode calls (a token made by a step's prefill call waits
    for that step's decode call and the next step's)."""
    prompts, outputs = [32] * 8 + [4000], [60] * 8 + [4]
    long_call = 1.0 + 0.01 * 4000
    worst = {}
    for chunk in (None, 256):
        r = simulate(prompts, outputs, rate=200, max_running=16, max_step_tokens=8192,
                     chunked_prefill=chunk)
        short = np.flatnonzero(r.rows["prompt_tokens"] == 32)
        gaps, _ = token_gaps(r.tokens[np.isin(r.tokens["request"], short)])
        worst[chunk] = float(ms(gaps).max())
    assert worst[None] >= long_call
    assert worst[256] <= 2 * (0.1 + 2.0 + 0.5 * 9) + (1.0 + 0.01 * 256) + 0.5
    assert worst[256] < 0.5 * long_call


def test_static_batching_makes_a_late_arrival_wait_for_the_whole_batch():
    prompts, outputs = [64] * 5, [50, 50, 50, 50, 5]
    results = {b: simulate(prompts, outputs, rate=100, max_running=4, batching=b)
               for b in ("continuous", "static")}
    late = {b: r.rows[r.rows["prompt_tokens"] == 64][-1] for b, r in results.items()}
    waits = {b: ms(component_ns(np.array([row]))["queue"])[0] for b, row in late.items()}
    assert waits["static"] > 5 * waits["continuous"] + 50


def test_a_small_kv_budget_preempts_and_still_completes_every_request():
    r = simulate([300] * 6, [200] * 6, clients=6, max_running=6, kv_tokens=1600)
    assert r.rows["preemptions"].sum() > 0
    assert (r.rows["output_tokens"] == 200).all()
    assert r.summary.scheduler  # the scheduler's figures, preemptions among them
    assert int(r.steps["preempted"].sum()) == int(r.rows["preemptions"].sum())


def test_a_request_the_server_would_refuse_fails_alone():
    r = simulate([100, 9000, 100], [10, 10, 10], rate=10)
    assert r.summary.errors == 1 and r.summary.successful == 2
    assert "exceed the model's context of 8,192" in next(iter(r.errors.values()))


def test_a_simulation_too_large_to_store_is_refused_in_one_line():
    from latency.core.errors import ConfigError

    with pytest.raises(ConfigError, match="simulate fewer requests"):
        simulate([10], [5000], rate=10, requests=1000)


# ---- simulate --from-run, on a recorded run ------------------------------------------------
@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    result = recorded_synthetic_lm_run(rate=40)
    path = tmp_path_factory.mktemp("gen") / "run.json"
    path.write_text(result.json_text())
    return result, path


def test_simulate_from_a_generation_run_prints_it_beside_the_run(recorded, capsys, tmp_path):
    result, path = recorded
    out_json = tmp_path / "sim.json"
    assert main(["simulate", "--from-run", str(path), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED (no model ran): open 40 req/s poisson, continuous batching")
    assert "step cost fitted from" in out and "R²" in out
    assert "the same settings: the difference is the simulator's error" in out
    assert "TTFT" in out and "TPOT" in out and "validity" not in out
    saved = json.loads(out_json.read_text())
    assert saved["kind"] == "generation" and "simulated" in saved["environment"]
    assert saved["summary"]["requests"] == result.summary.requests


def test_simulate_names_what_it_changed(recorded, capsys):
    _, path = recorded
    assert main(["simulate", "--from-run", str(path), "--chunked-prefill", "64",
                 "--rate", "60", "--decode-scale", "0.6"]) == 0
    out = capsys.readouterr().out
    assert "chunked_prefill: not set → 64" in out and "rate: 40 → 60" in out


@pytest.mark.parametrize("flags,says", [
    (["--batch-size", "4"], "--batch-size simulate a one-shot server"),
    (["--decode-scale", "0"], "--decode-scale must be from 0.01 to 100"),
    (["--chunked-prefill", "5000", "--max-step-tokens", "1024"], "--max-step-tokens 1,024"),
    (["--rate", "5", "--clients", "3"], "exclude each other"),
])
def test_a_bad_generation_simulation_is_one_line(recorded, capsys, flags, says):
    _, path = recorded
    assert main(["simulate", "--from-run", str(path), *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_generation_flags_without_a_generation_run_are_refused(capsys):
    assert main(["simulate", "--rate", "5", "--max-running", "4"]) == 2
    assert "--max-running simulate a generation server" in capsys.readouterr().err


@pytest.mark.timing
def test_a_replay_of_the_runs_own_trace_predicts_its_ttft_and_tpot():
    """The run simulated with its own fitted costs and its own trace (arrival times and
    lengths): TTFT and TPOT at p50 within 15 % of what it measured, at p99 within 30 % (80
    requests: a p99 is the slowest one or two). The prediction is the median of five
    simulations, as the fidelity benchmark's: one simulation is one draw of the machine's
    fitted drift and spikes, and over 80 requests a draw moves a p50 by several per cent.
    Both sides are this run's, so a busy machine moves them together — a timing test all the
    same, measured alone (its own run, not the module's, which another worker's test may
    have measured beside)."""
    import latency
    from tests.timing_support import machine_note

    result = recorded_synthetic_lm_run(rate=40)
    sims = [latency.simulate(from_run=result, arrival="recorded", seed=seed)
            for seed in range(5)]
    assert all(s.is_simulated and s.summary.requests == result.summary.requests for s in sims)
    for metric in ("ttft_ms", "tpot_ms"):
        for stat, tol in (("p50", 0.15), ("p99", 0.3)):
            got = float(np.median([getattr(getattr(s.summary, metric), stat) for s in sims]))
            want = getattr(getattr(result.summary, metric), stat)
            assert got == pytest.approx(want, rel=tol), (metric, stat, machine_note(result))


def test_the_machines_drift_is_told_apart_from_single_steps_spikes():
    """A known series: a slowly drifting level (AR(1), ρ 0.99 a step, spread 0.2 in log) times
    independent spikes (lognormal, σ 0.1): the fit finds the drift's spread and correlation,
    and a simulated level has them too."""
    from latency.simulation.gen_service import MachineLevel, machine_level

    rng = np.random.default_rng(0)
    n, rho, spread = 40_000, 0.99, 0.2
    x = np.empty(n)
    x[0] = rng.standard_normal()
    for i in range(1, n):
        x[i] = rho * x[i - 1] + np.sqrt(1 - rho ** 2) * rng.standard_normal()
    log_ratio = spread * x + 0.1 * rng.standard_normal(n)
    _, (mean, got_spread, got_rho) = machine_level(log_ratio)
    assert got_spread == pytest.approx(spread, rel=0.2) and got_rho == pytest.approx(rho, abs=0.005)
    level = MachineLevel((mean, got_spread, got_rho), np.random.default_rng(1))
    simulated = np.log([level.next() for _ in range(n)])
    assert float(simulated.std()) == pytest.approx(got_spread, rel=0.25)
    z = simulated - simulated.mean()
    assert float(np.mean(z[:-1] * z[1:]) / np.mean(z * z)) == pytest.approx(got_rho, abs=0.01)


def test_a_simulation_beyond_the_calibrations_range_says_it_extrapolates(recorded):
    import latency

    result, _ = recorded  # prompts up to 300 tokens, 4 slots
    far = latency.simulate(from_run=result, prompt_tokens="1500", max_running=8,
                           requests=40)
    said = " ".join(far.warnings)
    assert "prefill calls of up to 1,500 prompt tokens" in said and "extrapolated" in said
    assert "decode steps of up to" in said
    near = latency.simulate(from_run=result, requests=40)
    assert not any("extrapolated" in w for w in near.warnings)
    assert any("extrapolated" in w for w in far.findings)  # shown with the result's findings


def test_a_closed_loop_simulates_exactly_the_requests_asked():
    """8 clients, 50 requests: each client's next request is scheduled only while fewer
    than 50 are (it once counted only those that had arrived: 56 were simulated)."""
    for clients in (2, 8, 32):
        r = simulate([64] * 5, [16] * 5, clients=clients, requests=50)
        assert r.summary.requests == 50, (clients, r.summary.requests)
