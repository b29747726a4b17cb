"""Simulating a server of yours from a ``--target`` run: its costs fitted from outside (the
client's stamps, the server's reports), checked on our own server in its own process — whose
account of each request, measured in the same run, is the known answer — and by a replay of
the run's own trace; the CLI's ``simulate --from-run`` of a target run."""
from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Iterator

import numpy as np
import pytest

from latency.analysis.gen_result import GenResult
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.gen_engine import execute_generation
from latency.serve.http_server import ServerProcess
from latency.simulation.gen_replay import gen_replay, target_fit

#: synthetic-lm's set costs (ms): a prefill of 2 + 0.02/token, a decode step of 3 + 0.5/seq
COSTS = {"prefill_ms": 2.0, "prefill_ms_per_token": 0.02, "step_ms": 3.0,
         "step_ms_per_seq": 0.5}
SLOTS = 4


@pytest.fixture(scope="module")
def target_run(tmp_path_factory) -> Iterator[tuple[GenResult, str]]:
    server = RunConfig(model="synthetic-lm", model_args=COSTS, max_running=SLOTS).checked()
    proc = ServerProcess(server).start()
    try:
        cfg = RunConfig(target=f"{proc.url}/v1", output_tokens="uniform:12:40", rate=12.0,
                        requests=160, warmup=4, seed=3, scrape_metrics=True).checked()
        run = execute_generation(cfg, force=True)
    finally:
        proc.stop()
    assert run.status == "completed", run.failure
    path = tmp_path_factory.mktemp("target") / "run.json"
    path.write_text(run.json_text(requests=True))
    yield run, str(path)


def test_the_decode_step_fitted_from_outside_is_the_servers_own(target_run):
    run, _ = target_run
    fit = target_fit(run)
    calls = fit.service.calls
    # the server's own account of each request (measured in this run): its decode time per
    # token after the first; the fit from the client's gaps must predict it at the number of
    # streams decoding alongside each request
    rows, rep = run.rows, run.reports
    ok = np.flatnonzero((~rows["warmup"]) & (rows["status"] == 0) & (rows["output_tokens"] > 2))
    per_token = rep["decode_ns"][ok] / (rows["output_tokens"][ok] - 1) / 1e6
    first, done = np.sort(rows["t_first_deliv"][ok]), np.sort(rows["t_done"][ok])
    mid = (rows["t_first_deliv"][ok] + rows["t_done"][ok]) // 2
    alongside = np.searchsorted(first, mid, "right") - np.searchsorted(done, mid, "right")
    predicted = calls.decode_fixed_ms + calls.per_sequence_ms * alongside
    assert np.median(predicted / per_token) == pytest.approx(1.0, abs=0.15), (
        fit.about, np.median(per_token))
    # the per-sequence cost is the pipeline's (0.5 ms set) within what the client can see
    assert 0.2 <= calls.per_sequence_ms <= 1.0, fit.about
    # the prefill: at the median prompt, the server's set cost plus what the client sees of
    # a first token beyond it (the HTTP write; small)
    p = float(np.median(rows["prompt_tokens"][ok]))
    set_ms = COSTS["prefill_ms"] + COSTS["prefill_ms_per_token"] * p
    got = (calls.prefill_fixed_ms + calls.per_prefill_token_ms * p
           + calls.per_attention_ms * p * (p + 1) / 2)
    assert set_ms * 0.9 <= got <= set_ms * 1.6, fit.about
    # the slots: the most the server ran at once (its gauge, or the streams the client saw
    # decoding together), never above what it has; exactly them when it queued meanwhile
    assert 1 <= fit.slots <= SLOTS, fit.slots_from
    if "queued" in fit.slots_from:
        assert fit.slots == SLOTS, fit.slots_from


def test_a_replay_of_a_target_runs_own_trace_predicts_its_ttft_and_tpot(target_run):
    run, _ = target_run
    sims = [gen_replay(run, arrival="recorded", max_running=SLOTS, seed=s).run()
            for s in range(3)]
    assert all(s.is_simulated for s in sims)
    for metric in ("ttft_ms", "tpot_ms"):
        measured = getattr(run.summary, metric).p50
        simulated = statistics.median(getattr(s.summary, metric).p50 for s in sims)
        assert simulated == pytest.approx(measured, rel=0.25), (metric, measured, simulated)
    # a what-if the fit was not measured at: more load queues more (the slots hold)
    busier = gen_replay(run, rate=2 * run.config.rate, max_running=SLOTS, seed=0).run()
    assert busier.summary.ttft_ms.p99 > statistics.median(s.summary.ttft_ms.p99 for s in sims)


def test_simulate_from_a_target_run_on_the_command_line(target_run, tmp_path):
    _, path = target_run
    out = tmp_path / "sim.json"
    r = cli_simulate("--from-run", path, "--rate", "30", "--json", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("SIMULATED (no model ran)")
    assert "the server's costs fitted from" in r.stdout and "fitted from outside" in r.stdout
    assert "the server's slots:" in r.stdout
    assert "simulated vs the recorded run" in r.stdout
    d = json.loads(out.read_text())
    assert d["environment"]["simulated"]
    given = cli_simulate("--from-run", path, "--max-running", "16")
    assert given.returncode == 0 and "16 slots (given)" in given.stdout, given.stderr[-2000:]


def test_a_target_run_too_short_to_fit_is_one_line(target_run):
    run, _ = target_run
    few = GenResult.from_dict(json.loads(run.json_text(requests=True)))
    keep = np.zeros(len(few.rows), dtype=bool)
    keep[:6] = True
    few.rows["status"][~keep] = 1  # all but six failed
    with pytest.raises(ConfigError, match="cannot be simulated: .* successful measured"):
        gen_replay(few)


def cli_simulate(*args: str) -> subprocess.CompletedProcess[str]:
    from tests.cli_support import cli_here

    return cli_here("simulate", *args)
