"""The scheduler step's cost model (latency.simulation.gen_step_cost), fitted from a recorded
run of the synthetic-lm pipeline, whose costs are set: the fit recovers them, and it predicts
the run's own steps within the error it states."""
from __future__ import annotations

import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.core.gen_records import STEP_DTYPE
from latency.execution.gen_engine import execute_generation
from latency.simulation.gen_step_cost import FitError, fit_step_cost
from tests.timing_support import machine_note

COSTS = {"prefill_ms": 1.0, "prefill_ms_per_token": 0.02, "step_ms": 2.0,
         "step_ms_per_seq": 0.5}


@pytest.fixture(scope="module")
def run():
    cfg = RunConfig(model="synthetic-lm", model_args=COSTS, concurrency=6, max_running=4,
                    requests=60, prompt_tokens="uniform:16:400", output_tokens="uniform:4:24",
                    chunked_prefill=128, warmup=2)
    result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    return result


def test_the_fit_predicts_the_runs_own_steps_within_the_error_it_states(run):
    cost = fit_step_cost(run.steps)
    steps = run.steps[run.steps["t_end"] > run.steps["t_start"]]
    # every term the fit has, the attention pairs' and the chunks' too (a disturbed run may
    # give them a cost)
    predicted = cost.predict_ms(steps["prefill_tokens"], steps["decode_seqs"],
                                steps["kv_used"], steps["prefill_attn"], steps["prefill_seqs"])
    measured = (steps["t_end"] - steps["t_start"]) / 1e6
    rel = np.abs(predicted - measured) / measured
    assert float(np.median(rel)) == pytest.approx(cost.median_error, rel=1e-9)
    assert cost.steps == len(steps) and all(c >= 0 for c in cost.coefficients())
    assert "fitted on" in cost.describe() and "R²" in cost.describe()


@pytest.mark.timing
def test_the_fit_of_the_calls_recovers_the_set_costs(run):
    """Of the pipeline's calls alone, the fit predicts each kind of step's measured calls and
    the per-token slope of its prefill calls (each at least what the pipeline was set to); a
    whole step adds the scheduler's own work (and detokenizing) on top. Judged on the steps'
    predicted costs, not on single coefficients: the KV a step holds grows with its
    sequences, so the two slopes can trade between them."""
    calls = fit_step_cost(run.steps, of="calls")
    note = machine_note(run)
    said = (calls.describe(), note)
    # (the median error, not R²: one call a busy core stretched moves R², not the median)
    assert calls.median_error < 0.1, said
    st = run.steps
    # its per-token cost is the slope of this run's own prefill calls over their tokens
    pre = st[st["prefill_tokens"] > 0]
    slope = np.polyfit(pre["prefill_tokens"], (pre["t_prefill_end"] - pre["t_start"]) / 1e6,
                       1)[0]
    assert calls.per_prefill_token_ms == pytest.approx(slope, rel=0.2), (slope, said)
    # a held call is never shorter than set (each call: a fitted slope is no floor, since a
    # busy core that stretches short calls more than long ones flattens it)
    held_ms = (pre["t_prefill_end"] - pre["t_start"]) / 1e6
    set_ms = 1.0 + 0.02 * pre["prefill_tokens"]
    assert float(np.min(held_ms / set_ms)) >= 0.98, (float(np.min(held_ms / set_ms)), note)
    for seqs, chunk in ((4, 0), (4, 128), (2, 0)):
        group = st[(st["decode_seqs"] == seqs) & ((st["prefill_tokens"] > 0) == bool(chunk))]
        if not len(group):
            continue
        kv = np.array([float(group["kv_used"].mean())])
        got = float(calls.predict_ms(np.array([chunk]), np.array([seqs]), kv)[0])
        # against the calls this run measured (a busy machine stretches them all) …
        measured = float(np.median(group["call_ns"])) / 1e6
        assert got == pytest.approx(measured, rel=0.1), (seqs, chunk, got, measured, said)
        # … which hold at least what the pipeline was set to
        set_ms = (1.0 + 0.02 * chunk if chunk else 0.0) + 2.0 + 0.5 * seqs
        assert measured >= 0.98 * set_ms, (seqs, chunk, measured, set_ms, note)
    whole = fit_step_cost(run.steps)
    extra = whole.predict_ms(st["prefill_tokens"], st["decode_seqs"], st["kv_used"]) - \
        calls.predict_ms(st["prefill_tokens"], st["decode_seqs"], st["kv_used"])
    assert float(np.median(extra)) >= 0, (whole.describe(), note)


def test_too_few_steps_are_one_line():
    with pytest.raises(FitError, match="at least 20"):
        fit_step_cost(np.zeros(5, dtype=STEP_DTYPE))


def test_a_prefill_that_grows_faster_than_its_length_is_fitted_by_its_attention():
    """Emulated steps (not a measurement): prefill calls of 2 + 0.01·tokens + 1e-5·pairs ms
    over one whole prompt each; the fit recovers the attention term, and predicts a prompt
    three times longer than any it saw."""
    from latency.core.gen_records import prefill_attention

    rng = np.random.default_rng(0)
    n = rng.integers(16, 400, 200)
    steps = np.zeros(len(n), dtype=STEP_DTYPE)
    steps["prefill_tokens"], steps["prefill_seqs"] = n, 1
    steps["prefill_attn"] = [prefill_attention([(0, int(k))]) for k in n]
    took = 2 + 0.01 * n + 1e-5 * steps["prefill_attn"]
    steps["t_start"] = np.arange(len(n)) * 10**9
    steps["call_ns"] = (took * 1e6).astype(np.int64)
    steps["t_end"] = steps["t_start"] + steps["call_ns"]
    cost = fit_step_cost(steps, of="calls")
    assert cost.per_attention_ms == pytest.approx(1e-5, rel=0.01)
    long = prefill_attention([(0, 1200)])
    assert cost.predict_ms(np.array([1200]), np.array([0]), np.array([0]),
                           np.array([long]))[0] == pytest.approx(2 + 12 + 1e-5 * long, rel=0.01)


@pytest.mark.parametrize("per_call,per_chunk", [(0.0, 1.5), (1.5, 0.0), (0.5, 1.0)])
def test_a_prefill_calls_fixed_cost_is_told_apart_per_call_and_per_chunk(per_call, per_chunk):
    """Emulated steps (not a measurement): prefill calls of one to four prompts, each call
    costing ``per_call`` + ``per_chunk`` a prompt + 0.01·tokens ms — a pipeline running one
    forward a chunk (tiny-lm's) or one for the call (a fused one): the fit tells them apart,
    and so prices a chunked prefill's one-chunk calls as the pipeline does."""
    rng = np.random.default_rng(1)
    chunks = rng.integers(1, 5, 300)
    tokens = np.array([int(rng.integers(16, 200, k).sum()) for k in chunks])
    steps = np.zeros(len(chunks), dtype=STEP_DTYPE)
    steps["prefill_tokens"], steps["prefill_seqs"] = tokens, chunks
    took = per_call + per_chunk * chunks + 0.01 * tokens
    steps["t_start"] = np.arange(len(chunks)) * 10**9
    steps["call_ns"] = (took * 1e6).astype(np.int64)
    steps["t_end"] = steps["t_start"] + steps["call_ns"]
    cost = fit_step_cost(steps, of="calls")
    assert cost.prefill_fixed_ms == pytest.approx(per_call, abs=0.01)
    assert cost.per_prefill_chunk_ms == pytest.approx(per_chunk, abs=0.01)
    one = cost.predict_ms(np.array([128]), np.array([0]), np.array([0]),
                          prefill_chunks=np.array([1]))[0]
    assert one == pytest.approx(per_call + per_chunk + 1.28, rel=0.01)


def test_a_saved_step_of_the_layout_before_attention_reads_back_with_it_unknown():
    from latency.core.gen_records import STEP_DTYPE_V1, steps_from_bytes

    old = np.zeros(3, dtype=STEP_DTYPE_V1)
    old["prefill_tokens"], old["t_end"] = [5, 6, 7], [10, 20, 30]
    back = steps_from_bytes(old.tobytes(), 1)
    assert back.dtype == STEP_DTYPE and list(back["prefill_tokens"]) == [5, 6, 7]
    assert list(back["t_end"]) == [10, 20, 30] and not back["prefill_attn"].any()
    assert (steps_from_bytes(back.tobytes(), 2) == back).all()


@pytest.mark.parametrize("batched", [0.0, 0.8])
def test_a_batched_decode_calls_own_cost_is_fitted_only_where_the_steps_show_one(batched):
    """Emulated steps (not a measurement): decode calls of one to eight sequences costing
    2 + ``batched`` (two or more) + 0.4·sequences + 1e-4·KV tokens ms — a pipeline whose lone
    sequence takes another path (tiny-lm's) or one that does not. The fit finds the jump where
    there is one and none where there is not, and a lone call and a full batch are each
    predicted as they cost: a line through both would miss the batches of two to four."""
    rng = np.random.default_rng(2)
    seqs = np.where(rng.random(600) < 0.5, 1, rng.integers(2, 9, 600))
    kv = seqs * rng.integers(50, 900, 600)
    steps = np.zeros(len(seqs), dtype=STEP_DTYPE)
    steps["decode_seqs"], steps["kv_used"] = seqs, kv
    took = 2 + batched * (seqs >= 2) + 0.4 * seqs + 1e-4 * kv
    steps["t_start"] = np.arange(len(seqs)) * 10**9
    steps["call_ns"] = (took * 1e6).astype(np.int64)
    steps["t_end"] = steps["t_start"] + steps["call_ns"]
    cost = fit_step_cost(steps, of="calls")
    assert cost.batched_decode_ms == pytest.approx(batched, abs=0.01)
    for n, k in ((1, 400), (3, 1200), (8, 4000)):
        want = 2 + batched * (n >= 2) + 0.4 * n + 1e-4 * k
        assert cost.decode_call_ms(n, k) == pytest.approx(want, rel=0.01)
        assert cost.predict_ms(np.array([0]), np.array([n]), np.array([k]))[0] == \
            pytest.approx(want, rel=0.01)
    assert ("if batched" in cost.describe()) == (batched > 0)
