"""Streamed generation on the synthetic-lm pipeline, whose costs are known: the stamps add up
exactly, the components have the sizes the costs say, the scheduler behaves as it claims
(continuous batching, prefill-first stalls, chunked prefill, preemption), bad input is one
line, and one failing step fails only its own sequences."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.core.gen_records import (
    GEN_COMPONENTS,
    component_ns,
)
from latency.execution.gen_engine import execute_generation
from sample_models.synthetic_lm import SyntheticLMPipeline
from tests.cli_support import cli_here
from tests.gen_support import (
    CALL_OWN_MS,
    assert_adds_up,
    assert_call_holds,
    crashing_lm_source,
    gaps,
    step_period_ms,
)
from tests.timing_support import machine_note

FAST = {"prefill_ms": 1.0, "prefill_ms_per_token": 0.02, "step_ms": 2.0,
        "step_ms_per_seq": 0.5}


def run(**kw: object):
    args = {**FAST, **kw.pop("model_args", {})}  # type: ignore[dict-item]
    cfg = RunConfig(model="synthetic-lm", model_args=args, warmup=kw.pop("warmup", 2),
                    **kw)  # type: ignore[arg-type]
    result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    return result


def ok_rows(result):
    rows = result.rows
    return rows[(rows["status"] == 0) & ~rows["warmup"]]


def test_every_figure_adds_up_exactly():
    result = run(concurrency=3, requests=30, prompt_tokens="uniform:8:64",
                 output_tokens="uniform:1:12", max_running=2)
    rows = ok_rows(result)
    assert len(rows) == 30
    comps = assert_adds_up(result, rows)
    # each request's tokens: exactly as many as asked, delivered in order
    assert (rows["output_tokens"] >= 1).all()
    # E2E = TTFT + every gap of the request
    e2e = comps["e2e"]
    assert np.array_equal(e2e - comps["ttft"],
                          rows["decode_ns"] + rows["stall_ns"] + rows["detok_ns"]
                          + rows["delivery_ns"])


@pytest.mark.timing
def test_alone_ttft_is_tokenize_plus_prefill_and_itl_is_one_step():
    p = SyntheticLMPipeline(**FAST)
    result = run(concurrency=1, requests=20, prompt_tokens="200", output_tokens="12")
    s = result.summary
    note = machine_note(result)
    prefill = p.prefill_time_ms(200)
    # the prefill part is the prefill call's own time, as the scheduler stamped it ...
    calls = float(np.median(prefill_calls_ms(result)))
    assert s.components_ms["prefill"].p50 == pytest.approx(calls, rel=0.02, abs=0.05), note
    # ... and that is the cost set (never less), plus what sharing one GIL with the
    # in-process client costs it (the client records the last request while the next one
    # prefills) and the call's own logits
    assert prefill <= calls <= prefill * 1.1 + CALL_OWN_MS, (calls, note)
    # TTFT is its prefill, its tokenize and small hand-offs
    assert s.ttft_ms.p50 == pytest.approx(calls + s.components_ms["tokenize"].p50,
                                          rel=0.1, abs=0.6), note
    # each gap is one decode step: the step's period measured in this run, its call the
    # cost set (what the machine adds around the call is in the period, not in the check)
    assert_call_holds(result, 1, p.step_time_ms(1), note)
    period = step_period_ms(result, 1)
    assert s.itl_ms.p50 == pytest.approx(period, rel=0.05, abs=0.15), note
    assert s.tpot_ms.p50 == pytest.approx(period, rel=0.08, abs=0.3), note


@pytest.mark.timing
def test_n_clients_share_each_decode_step():
    p = SyntheticLMPipeline(**FAST)
    result = run(concurrency=4, max_running=4, requests=24, prompt_tokens="16",
                 output_tokens="40", model_args={"prefill_ms": 0.2,
                                                 "prefill_ms_per_token": 0.0})
    s = result.summary
    note = (s.scheduler["mean_running"], machine_note(result))
    # the typical gap is one step shared by the four sequences: its call holds the cost of
    # four, and the gap is that step's period as this run measured it (not four steps)
    assert_call_holds(result, 4, p.step_time_ms(4), note)
    assert s.itl_ms.p50 == pytest.approx(step_period_ms(result, 4), rel=0.08, abs=0.2), note
    assert s.itl_mean_parts_ms["decode"] > 0.8 * s.itl_ms.mean


@pytest.mark.timing
def test_one_slot_queues_like_a_single_server():
    """Closed loop, N clients, one slot: each request waits for the N-1 ahead of it, so its
    queue is the others' service time (measured in the same run)."""
    result = run(concurrency=3, max_running=1, requests=30, prompt_tokens="32",
                 output_tokens="8")
    rows = ok_rows(result)
    comps = component_ns(rows)
    service = comps["e2e"] - comps["queue"] - comps["overhead"]
    queue = comps["queue"]
    expected = 2 * float(np.mean(service))
    assert float(np.mean(queue)) == pytest.approx(expected, rel=0.15), machine_note(result)
    assert result.summary.scheduler["max_waiting"] >= 2


def prefill_calls_ms(result) -> np.ndarray:
    """Each step's prefill call (ms), from the scheduler's own stamps."""
    steps = result.steps[result.steps["prefill_seqs"] > 0]
    return (steps["t_prefill_end"] - steps["t_start"]) / 1e6


def _prompts(tmp_path: Path, lengths: list[int]) -> str:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(" ".join(["water"] * n)) + "\n" for n in lengths))
    return str(path)


@pytest.mark.timing
def test_long_prefill_stalls_decodes_and_chunking_bounds_the_stall(tmp_path):
    """One long prompt among short ones: prefill-first, a step that prefills it decodes
    nothing, so the others' gap there holds the whole prefill; with --chunked-prefill C the
    decodes ride along, and no stall is longer than about one chunk's prefill.

    Arrivals are evenly spaced (20 ms) and a short stream lasts longer than three gaps, so
    each long prompt arrives while the three short ones before it decode — by construction,
    not by how the threads happen to interleave (a closed loop of equal lengths can admit
    all four together, and then nobody is running to stall)."""
    p = SyntheticLMPipeline(**FAST)
    prompts = _prompts(tmp_path, [8, 8, 8, 1500])
    common = dict(rate=50.0, arrival="constant", max_running=4, requests=12,
                  prompts=prompts, output_tokens="40", max_step_tokens=2048, warmup=0,
                  model_args={"prefill_ms_per_token": 0.02})
    whole = run(**common)
    _, parts = gaps(whole)
    long_call = prefill_calls_ms(whole).max()
    note = machine_note(whole)
    assert long_call == pytest.approx(p.prefill_time_ms(1500), rel=0.15, abs=0.5), note
    # the short prompts' streams waited through it: their longest stall holds that call
    assert parts["stall"].max() / 1e6 >= 0.9 * long_call, note
    chunked = run(chunked_prefill=128, **common)
    _, parts = gaps(chunked)
    calls = prefill_calls_ms(chunked)
    note = machine_note(chunked)
    # no call prefills more than a chunk and a short prompt or two beside it (90 % of the
    # calls: one call a wake-up late is the scheduler's, not the chunking's)
    assert np.quantile(calls, 0.9) <= 1.3 * p.prefill_time_ms(128 + 3 * 8) + 0.5, note
    # a stream's later gaps wait through at most one chunk's call; its first gap may also
    # hold the rest of the step that prefilled it (that step's decodes), so at most a step
    stall_ms = parts["stall"] / 1e6
    later = _gap_index(chunked.tokens) >= 2
    steps = chunked.steps
    # ... and its step's own work around the call (planning, handing tokens over): on a busy
    # machine a preempted scheduler thread stretches that, not the chunking
    own_ms = ((steps["t_end"] - steps["t_start"] - steps["call_ns"]) / 1e6).max()
    assert stall_ms[later].max() <= calls.max() + own_ms + 1.0, note
    assert stall_ms.max() <= ((steps["t_end"] - steps["t_start"]) / 1e6).max() + 1.0, note
    # and so the longest stall is a fraction of the whole prompt's call it replaced
    assert stall_ms.max() < 0.5 * long_call, note
    # the users' view: the tail of the gaps (nine of the ~470 gaps held a whole long call
    # without chunking; one late wake-up of the client can make any single gap long)
    assert chunked.summary.itl_ms.p99 < whole.summary.itl_ms.p99, note


def _gap_index(tokens: np.ndarray) -> np.ndarray:
    """The index of the token that ends each gap, in the order ``gaps`` gives them."""
    same = tokens["request"][1:] == tokens["request"][:-1]
    return tokens["index"][1:][same]


def test_too_small_a_kv_budget_preempts_and_recomputes_as_stall():
    """A recompute prefills the prompt and what was generated in one call: with 0.1 ms a
    prompt token it takes at least 11 ms, longer than a decode step of four (4 ms)."""
    result = run(concurrency=4, max_running=4, requests=12, prompt_tokens="100",
                 output_tokens="40", kv_tokens=300, warmup=0,
                 model_args={"prefill_ms_per_token": 0.1})
    s = result.summary
    assert s.preemptions > 0 and s.requests_preempted > 0
    assert s.errors == 0 and s.successful == 12
    t = result.tokens
    recomputed = t[t["kind"] == 2]
    # every request completed, so every preempted sequence came back: one recompute each
    assert len(recomputed) == s.preemptions, (len(recomputed), s.preemptions)
    # each recompute's call holds the prefill of its prompt and the tokens it had made
    # (its index), and is longer than a decode step
    call_ms = (t["t_produced"] - t["t_call_start"]).astype(np.int64) / 1e6
    again = t["kind"] == 2
    known = 1.0 + 0.1 * (100 + recomputed["index"])
    assert (call_ms[again] >= 0.9 * known).all(), (call_ms[again], known)
    assert call_ms[again].min() > np.median(call_ms[t["kind"] == 1])
    _, parts = gaps(result)
    assert parts["stall"].sum() > 0
    rows = ok_rows(result)
    comps = component_ns(rows)
    assert np.array_equal(sum(comps[c] for c in GEN_COMPONENTS), comps["e2e"])
    assert any("preempt" in str(w) for w in result.findings)


def test_a_failing_decode_step_fails_only_its_sequences():
    result = run(concurrency=2, max_running=2, requests=10, prompt_tokens="8",
                 output_tokens="6", warmup=0, model_args={"fail_decode_at": 7})
    s = result.summary
    assert 1 <= s.errors <= 2
    assert s.successful == 10 - s.errors
    assert all("decode call 7 failed" in m for m in s.error_messages)


def test_open_loop_accounts_for_every_request():
    result = run(rate=40.0, requests=40, prompt_tokens="16", output_tokens="4", warmup=0)
    assert result.timings.offered_requests == 40
    assert result.summary.requests + result.summary.dropped == 40
    assert result.validity.valid, result.validity.line()
    assert result.summary.ttft_ms.p50 is not None


def test_goodput_counts_requests_meeting_both_objectives():
    result = run(concurrency=2, requests=20, prompt_tokens="16", output_tokens="8",
                 slo_ttft_ms=10_000.0, slo_tpot_ms=10_000.0)
    s = result.summary
    assert s.slo_met_share == 1.0
    assert s.goodput_rps == pytest.approx(s.throughput_rps)
    tight = run(concurrency=2, requests=20, prompt_tokens="16", output_tokens="8",
                slo_ttft_ms=0.001)
    assert tight.summary.slo_met_share == 0.0
    assert any("objective missed" in str(w) for w in tight.findings)


def test_an_e2e_objective_counts_beside_ttft_and_tpot():
    """Goodput with an E2E limit too (vLLM's ``--goodput e2el``): a request counts only if it
    meets every limit set — the share is the run's own requests meeting all three, and a
    limit between its fastest and slowest E2E splits them."""
    loose = run(concurrency=3, requests=30, prompt_tokens="uniform:16:200",
                output_tokens="uniform:4:24", slo_ttft_ms=10_000.0, slo_tpot_ms=10_000.0)
    f = loose.requests_frame()
    ok = f[(~f["warmup"]) & (f["status"] == "ok")]
    e2e_limit = float(ok["e2e_ms"].median())
    tight = dataclasses.replace(loose.config, slo_e2e_ms=e2e_limit)
    assert str(tight.objectives) == f"TTFT ≤ 10000 ms, TPOT ≤ 10000 ms and E2E ≤ {e2e_limit:g} ms"
    from latency.analysis.gen_summary import summarize_generation

    t = loose.timings
    s = summarize_generation(loose.rows, loose.tokens, loose.steps, loose.errors,
                             t.measure_start_ns, t.measure_end_ns, tight.objectives)
    expected = float((ok["e2e_ms"] <= e2e_limit + 1e-6).sum()) / loose.summary.requests
    assert s.slo_met_share == pytest.approx(expected, abs=1e-9)
    assert 0.3 < s.slo_met_share < 0.7, s.slo_met_share
    assert s.slo["e2e_ms"] == e2e_limit and "E2E ≤" in s.slo["text"]
    # a limit below every request: none counts, and the p99 is said to miss it
    none = run(concurrency=2, requests=20, prompt_tokens="16", output_tokens="8",
               slo_e2e_ms=0.001)
    assert none.summary.slo_met_share == 0.0
    assert any("objective missed: E2E p99" in str(w) for w in none.findings)


def test_json_round_trip_keeps_every_stamp_and_the_summary(tmp_path):
    from latency.analysis.gen_result import GenResult

    result = run(concurrency=2, requests=8, prompt_tokens="16", output_tokens="5")
    back = GenResult.from_dict(json.loads(result.json_text()))
    assert np.array_equal(back.rows, result.rows)
    assert np.array_equal(back.tokens, result.tokens)
    assert back.summary.ttft_ms == result.summary.ttft_ms
    assert back.summary.itl_ms == result.summary.itl_ms
    frame = result.requests_frame()
    assert len(frame) == len(result.rows)
    assert {"ttft_ms", "tpot_ms", "e2e_ms", "prefill_ms", "stall_ms"} <= set(frame.columns)


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "latency", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("flags, says", [
    (["--output-tokens", "0"], "--output-tokens"),
    (["--output-tokens", "lognormal:x:1"], "--output-tokens"),
    (["--prompt-tokens", "lognormal:1e308:1"], "the median must be from 1 to 1,000,000"),
    (["--prompt-tokens", "uniform:9:3"], "MIN must not exceed MAX"),
    (["--chunked-prefill", "512", "--max-step-tokens", "256"], "smaller than a chunk"),
    (["--prompt-tokens", "100", "--output-tokens", "50", "--kv-tokens", "120"],
     "KV budget"),
    (["--prompt-tokens", "5000"], "context"),
    (["--prompt-tokens", "3000", "--max-step-tokens", "1024"], "--chunked-prefill"),
    (["--batch-size", "4"], "one-shot"),
    (["--slo", "nope"], "--slo must be one of"),
    (["--slo-e2e-ms", "0"], "--slo-e2e-ms must be > 0"),
])
def test_bad_generation_input_is_one_line_exit_2(flags, says, tmp_path):
    out = cli_here("run", "--model", "synthetic-lm", "--requests", "2", "--no-save", *flags)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_generation_flags_on_a_one_shot_pipeline_are_refused():
    out = cli("run", "--model", "synthetic", "--output-tokens", "8", "--requests", "2",
              "--no-save")
    assert out.returncode == 2
    assert "not a generative pipeline" in out.stderr and "Traceback" not in out.stderr


def test_your_generative_pipeline_from_a_file_is_measured(tmp_path):
    source = tmp_path / "my_lm.py"
    source.write_text(textwrap.dedent('''
        import torch
        from latency.pipelines.generative import GenerativePipeline

        class EchoLM(GenerativePipeline):
            """Repeats the prompt's last token: a tiny generative pipeline of a user's."""
            name = "echo-lm"
            max_context = 512

            def sample_inputs(self, n, seed):
                return [f"{i} {i + 1} {i + 2}" for i in range(n)]

            def tokenize(self, prompt):
                return [int(w) % 50 for w in prompt.split()]

            def detokenize(self, ids):
                return " ".join(str(i) for i in ids)

            def prefill(self, chunks):
                return torch.nn.functional.one_hot(
                    torch.tensor([c.tokens[-1] for c in chunks]), 50).float()

            def decode(self, inputs):
                return torch.nn.functional.one_hot(
                    torch.tensor([i.token for i in inputs]), 50).float()
    '''))
    out_json = tmp_path / "gen.json"
    out = cli("run", "--pipeline", f"{source}:EchoLM", "--output-tokens", "5",
              "--requests", "30", "--concurrency", "2", "--no-save", "--json", str(out_json),
              "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "TTFT" in out.stdout and "ITL" in out.stdout and "verdict:" in out.stdout
    data = json.loads(out_json.read_text())
    assert data["kind"] == "generation"
    assert data["summary"]["successful"] == 30
    assert data["requests"]["columns"]["output_tokens"] == [5] * len(
        data["requests"]["columns"]["output_tokens"])


def test_python_api_profiles_a_generative_pipeline_object_with_its_prompts():
    import latency

    p = SyntheticLMPipeline(**FAST)
    result = latency.profile(p, prompts=["the water is hot today", "a long day of rain"],
                             output_tokens="6", concurrency=2, requests=8)
    assert isinstance(result, latency.GenResult)
    assert result.summary.successful == 8
    assert set(result.rows["prompt_tokens"][~result.rows["warmup"]].tolist()) == {5}
    assert "TTFT" in repr(result)


def test_the_trace_draws_each_request_with_parts_that_sum_to_it():
    from latency.storage.trace import gen_trace

    result = run(concurrency=2, requests=6, prompt_tokens="32", output_tokens="5", warmup=0)
    trace = gen_trace(result.rows, result.tokens, result.steps, result.errors)
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    for i in range(len(result.rows)):
        mine = [e for e in spans if e["pid"] == 1 and e["args"].get("request") == i]
        whole = [e for e in mine if e["name"] == "request"]
        assert len(whole) == 1
        parts = sum(e["dur"] for e in mine if e["name"] != "request")
        assert parts == pytest.approx(whole[0]["dur"], abs=0.01)  # µs, 3 decimals each
    steps = [e for e in spans if e["pid"] == 2 and e["name"] == "step"]
    assert len(steps) == len(result.steps)
    assert any(e.get("ph") == "C" for e in trace["traceEvents"])


def test_compare_two_generation_runs_names_the_setting_and_gates(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    common = ["--model", "synthetic-lm", "--prompt-tokens", "64", "--output-tokens", "6",
              "--requests", "8", "--min-requests", "8", "--concurrency", "2", "--no-save",
              "--quiet"]
    assert cli_here("run", *common, "--json", str(a)).returncode == 0
    # B's steps are ~8× as long (40 ms against 4 + 0.5 a sequence): a busy machine's
    # hiccup in A's forty-odd gaps cannot lift its p99 past them, as it could at 2×
    assert cli_here("run", *common, "--model-arg", "step_ms=40",
                    "--json", str(b)).returncode == 0
    out = cli_here("compare", str(a), str(b), "--fail-if-p99-worse", "10")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "model_args" in out.stdout and "ITL p99" in out.stdout
    assert "gate FAILED" in out.stdout
    mixed = cli_here("compare", str(a), str(tmp_path / "nope.json"))
    assert mixed.returncode == 2 and "Traceback" not in mixed.stderr
    # a generation run is simulated step by step
    sim = cli_here("simulate", "--from-run", str(a))
    assert sim.returncode == 0 and sim.stdout.startswith("SIMULATED (no model ran)"), sim.stderr


CRASHING_LM = crashing_lm_source()


def test_a_prompt_longer_than_the_context_names_the_fix_and_the_fix_runs():
    """docs/generation.md's second example: prompts of lognormal:512:0.8 can reach past
    synthetic-lm's 4,096-token context. The refusal names the model-arg that lengthens it, with
    a value that fits, and that value runs; a model without such an arg is told to shorten."""
    import re

    lengths = ["--prompt-tokens", "lognormal:512:0.8", "--output-tokens", "uniform:16:128"]
    refused = cli_here("run", "--model", "synthetic-lm", *lengths, "--requests", "2",
                       "--no-save")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    fix = re.search(r"--model-arg (max_context=\d+)", refused.stderr)
    assert fix and "context of 4,096" in refused.stderr, refused.stderr
    ran = cli_here("run", "--model", "synthetic-lm", *lengths, "--model-arg", fix.group(1),
                   "--model-arg", "prefill_ms_per_token=0.001", "--chunked-prefill", "128",
                   "--requests", "4",
                   "--min-requests", "4", "--warmup", "0", "--no-save", "--quiet")
    assert ran.returncode == 0, ran.stdout[-1500:] + ran.stderr[-1500:]
    tiny = cli_here("run", "--model", "tiny-lm", "--prompt-tokens", "1000", "--output-tokens",
                    "64", "--requests", "2", "--no-save")
    assert tiny.returncode == 2 and "give shorter --prompt-tokens" in tiny.stderr, tiny.stderr
    assert "max_context" not in tiny.stderr


def test_a_pipeline_that_kills_its_process_is_a_failed_run_not_a_crash(tmp_path):
    source = tmp_path / "crash_lm.py"
    source.write_text(CRASHING_LM)
    out = cli("run", "--pipeline", f"{source}:CrashLM", "--output-tokens", "4",
              "--requests", "3", "--no-save", "--quiet")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "run failed" in out.stdout and "exit code 3" in out.stdout
    assert "Traceback" not in out.stderr
    refused = cli("run", "--pipeline", f"{source}:CrashLM", "--prompt-tokens", "300",
                  "--requests", "3", "--no-save")
    assert refused.returncode == 2 and "context" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_the_series_counts_every_measured_token_once():
    result = run(concurrency=2, requests=16, prompt_tokens="16", output_tokens="10",
                 warmup=2)
    series = result.series
    ok = ok_rows(result)
    assert sum(series["output_tokens_per_s"]) == int(ok["output_tokens"].sum())
    assert sum(series["requests_finished"]) == len(ok)
    assert len(series["t_s"]) == len(series["running"])


@pytest.mark.timing
def test_one_slot_open_loop_queues_as_pollaczek_khinchine_says():
    """Poisson arrivals into one slot: the mean wait for the slot is λ·E[S²]/(2(1−ρ)), with
    the service times S measured in the same run."""
    result = run(rate=60.0, requests=360, max_running=1, prompt_tokens="32",
                 output_tokens="4", warmup=10, seed=3,
                 model_args={"prefill_ms": 2.0, "step_ms": 1.5})
    rows = ok_rows(result)
    comps = component_ns(rows)
    service = (comps["e2e"] - comps["queue"] - comps["overhead"]) / 1e9
    lam = 60.0
    rho = lam * service.mean()
    theory = lam * float(np.mean(service ** 2)) / (2 * (1 - rho))
    waited = comps["queue"] / 1e9
    batches = np.array_split(waited, 10)
    se = float(np.std([b.mean() for b in batches], ddof=1) / np.sqrt(10))
    assert abs(waited.mean() - theory) <= 4.5 * se + 0.1 * theory, (
        waited.mean(), theory, rho, se, machine_note(result))


def test_a_generation_is_saved_listed_shown_exported_compared_and_deleted(tmp_path):
    db = str(tmp_path / "runs.sqlite")
    common = ["--model", "synthetic-lm", "--prompt-tokens", "32", "--output-tokens", "5",
              "--requests", "6", "--min-requests", "6", "--concurrency", "2", "--quiet",
              "--db", db]
    first = cli_here("run", *common, "--name", "baseline")
    assert first.returncode == 0, first.stderr
    gid = first.stdout.strip().splitlines()[-1].split()[3]
    second = cli_here("run", *common, "--model-arg", "step_ms=9")
    gid2 = second.stdout.strip().splitlines()[-1].split()[3]
    listing = cli_here("history", "--db", db)
    assert gid in listing.stdout and "baseline" in listing.stdout and "tok/s" in listing.stdout
    latest = cli_here("history", "show", "latest", "--db", db)  # one id space: the newest
    assert latest.stdout.startswith(f"generation {gid2}") and "TTFT" in latest.stdout
    shown = cli_here("history", "show", gid, "--db", db)
    assert "TTFT" in shown.stdout and "verdict:" in shown.stdout
    out = tmp_path / "g.json"
    assert cli_here("history", "export", gid, "--format", "json", "--out", str(out),
               "--db", db).returncode == 0
    from latency.analysis.gen_result import GenResult

    back = GenResult.from_dict(json.loads(out.read_text()))
    assert back.summary.successful == 6
    compared = cli_here("compare", gid, gid2, "--db", db, "--fail-if-p99-worse", "20")
    assert compared.returncode == 1 and "gate FAILED" in compared.stdout, compared.stdout
    assert cli_here("history", "delete", gid, "--db", db).returncode == 0
    assert gid not in cli_here("history", "--db", db).stdout
    gone = cli_here("history", "show", gid, "--db", db)
    assert gone.returncode == 2 and f"no run {gid!r}" in gone.stderr
    # a one-shot run joins the same history; a compare across kinds is one clear line
    one_shot = cli_here("run", "--model", "synthetic", "--requests", "5", "--min-requests", "5",
                        "--quiet", "--db", db)
    assert one_shot.returncode == 0, one_shot.stderr
    mixed = cli_here("compare", "latest~1", "latest", "--db", db)
    assert mixed.returncode == 2 and "compare runs of one kind" in mixed.stderr, mixed.stderr
    assert mixed.stderr.count("\n") == 1


def test_a_stopped_generation_keeps_what_it_measured(tmp_path):
    import signal
    import time

    out = tmp_path / "stopped.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "latency", "run", "--model", "synthetic-lm", "--prompt-tokens",
         "32", "--output-tokens", "20", "--concurrency", "2", "--duration", "60",
         "--warmup", "2", "--no-save", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline and "[measuring]" not in line:
        line = proc.stderr.readline()
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "run stopped" in stdout
    data = json.loads(out.read_text())
    assert data["status"] == "stopped" and data["summary"]["successful"] > 0


def test_replicas_each_run_their_own_scheduler():
    result = run(concurrency=4, max_running=2, replicas=2, requests=16, prompt_tokens="16",
                 output_tokens="6", warmup=0)
    rows = ok_rows(result)
    assert set(rows["replica"].tolist()) == {0, 1}
    assert set(result.steps["replica"].tolist()) == {0, 1}
    # no replica runs more than its slots
    assert result.steps["running"].max() <= 2


def test_an_overloaded_open_loop_counts_what_its_grace_dropped():
    """Far more arrivals than one slot serves, and a short grace: what still waited when the
    grace ran out is dropped by overload — counted, so every offered request is accounted
    for, the run says it was overloaded, and (as a one-shot run) it is INVALID for it."""
    result = run(rate=200.0, requests=120, max_running=1, prompt_tokens="16",
                 output_tokens="10", warmup=0, drain_grace_s=0.5,
                 model_args={"step_ms": 5.0}, min_requests=0)
    s = result.summary
    assert s.dropped > 0
    assert s.requests + s.dropped == 120, (s.requests, s.dropped)
    v = result.validity
    assert [c.name for c in v.failed] == ["nothing dropped by overload"], v.line()
    assert next(c for c in v.checks if c.name == "every request accounted for").passed
    assert any(w.kind == "overloaded" for w in result.findings)


def test_an_overloaded_open_loop_that_dropped_requests_is_invalid_as_a_one_shot_run_is():
    """One validity for both kinds: 2,000 requests/s offered to synthetic-lm for a second
    overflow its backlog; the dropped requests make the run INVALID ('nothing dropped by
    overload'), as they make a one-shot run, and each passed check says what passed."""
    cfg = RunConfig(model="synthetic-lm", model_args=FAST, output_tokens="8", rate=2000.0,
                    duration_s=1.0, warmup=0)
    result = execute_generation(cfg, force=True)
    assert result.summary.dropped > 0
    v = result.validity
    assert not v.valid and [c.name for c in v.failed] == ["nothing dropped by overload"], \
        v.line()
    names = [c.name for c in v.checks]
    assert names[:3] == ["finished as planned", "warm-up finished", "requests succeeded"]
    assert all("no successful" not in c.detail for c in v.checks if c.passed)


def test_a_prefill_sample_shortfall_fails_only_that_calls_sequences():
    """A pipeline whose sample() gives one id too few in a prefill call: the sequences of
    that call fail with why; the others running beside them finish."""
    from sample_models.synthetic_lm import SyntheticLMPipeline

    class SampleFewer(SyntheticLMPipeline):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.prefills = 0
            self.short_call: int | None = None
            self.prefilling = False

        def prefill(self, chunks):
            self.prefilling = True
            return super().prefill(chunks)

        def sample(self, logits):
            ids = super().sample(logits)
            if self.prefilling:
                self.prefilling = False
                self.prefills += 1
                if self.prefills == 4:  # once others are decoding
                    self.short_call = len(ids)
                    return ids[:-1]
            return ids

    pipe = SampleFewer(**FAST)
    cfg = RunConfig(model="synthetic-lm", concurrency=3, requests=9, warmup=0,
                    prompt_tokens="8", output_tokens="uniform:8:40", seed=5)
    result = execute_generation(cfg, pipeline=pipe, force=True)
    assert pipe.short_call is not None
    s = result.summary
    assert s.errors == pipe.short_call, (s.errors, pipe.short_call, s.error_messages)
    assert all("prefill gave" in m for m in s.error_messages), s.error_messages
    assert s.successful == 9 - s.errors


def test_the_generation_gate_says_whether_a_worse_p99_is_outside_its_interval():
    """--fail-if-p99-worse on generation runs: each figure that failed the gate says whether
    the two p99 95 % intervals overlap (a failure inside them may be noise) or that there were
    too few samples for one — as the one-shot gate does."""
    from latency.analysis.gen_compare import gen_gate
    from latency.analysis.gen_summary import GenSummary
    from latency.analysis.stats import LatencyStats

    def summary(ttft, ci, tpot=5.0):
        return GenSummary(ttft_ms=LatencyStats(p99=ttft, p99_ci95=ci),
                          tpot_ms=LatencyStats(p99=tpot, p99_ci95=None),
                          itl_ms=LatencyStats(p99=4.0, p99_ci95=(3.9, 4.1)))

    apart = gen_gate(summary(100.0, (95.0, 105.0)), summary(130.0, (120.0, 140.0)), 10, "A", "B")
    assert not apart.passed and "TTFT p99 100 → 130 ms" in apart.message
    assert "do not overlap" in apart.message, apart.message
    close = gen_gate(summary(100.0, (80.0, 125.0)), summary(115.0, (95.0, 140.0)), 10, "A", "B")
    assert not close.passed and "overlap: may be noise" in close.message, close.message
    few = gen_gate(summary(100.0, None, tpot=5.0), summary(100.0, None, tpot=6.0), 10, "A", "B")
    assert "TPOT p99" in few.message and "too few samples" in few.message, few.message
