"""tiny-lm through the generative contract: the KV-cached paths (prefill in chunks, batched
decode of sequences of different lengths) compute what a plain full-recompute forward pass
computes, what it writes is words of its corpus, its text round-trips, and its costs have the
shape the profiler expects (prefill linear in the prompt, a decode step batched)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch

from latency.pipelines.generative import DecodeInput, GenerativePipeline, PrefillChunk
from sample_models import lm_corpus
from sample_models.tiny_lm import KVCache, TinyLMPipeline
from tests.timing_support import watched

ATOL = 1e-4  # float32: the cached paths sum in a different order than the reference


@pytest.fixture(scope="module")
def lm() -> TinyLMPipeline:
    return TinyLMPipeline("cpu", torch.float32)


def _prompt_ids(lm: TinyLMPipeline, n: int, seed: int = 0) -> list[list[int]]:
    return [lm.tokenize(p) for p in lm.sample_inputs(n, seed)]


def _generate(lm: TinyLMPipeline, ids: list[int], n: int) -> list[int]:
    """Greedy through the contract: allocate, prefill the prompt, sample, decode one by one."""
    kv = lm.allocate(len(ids) + n)
    out = lm.sample(lm.prefill([PrefillChunk(kv, ids, 0)]))
    while len(out) < n:
        out += lm.sample(lm.decode([DecodeInput(kv, out[-1], len(ids) + len(out) - 1)]))
    lm.free(kv)
    return out


@torch.inference_mode()
def _reference(lm: TinyLMPipeline, ids: list[int], n: int) -> list[int]:
    """Greedy by recomputing the whole sequence each token, with no cache at all."""
    seq = list(ids)
    for _ in range(n):
        seq.append(int(lm.model(torch.tensor([seq]))[0, -1].argmax()))
    return seq[len(ids):]


def test_cached_greedy_equals_full_recompute(lm: TinyLMPipeline) -> None:
    for ids in _prompt_ids(lm, 3):
        assert _generate(lm, ids, 40) == _reference(lm, ids, 40), lm.detokenize(ids)


@torch.inference_mode()
def test_prefill_in_chunks_equals_one_chunk(lm: TinyLMPipeline) -> None:
    ids = max(_prompt_ids(lm, 4), key=len)
    assert len(ids) > 21, "a prompt long enough for several chunks"
    whole = lm.allocate(len(ids))
    one = lm.prefill([PrefillChunk(whole, ids, 0)])
    full = lm.model(torch.tensor([ids]))[0]  # every position's logits, no cache
    chunked = lm.allocate(len(ids))
    for start in range(0, len(ids), 7):
        part = ids[start:start + 7]
        got = lm.prefill([PrefillChunk(chunked, part, start)])
        torch.testing.assert_close(got[0], full[start + len(part) - 1], atol=ATOL, rtol=0)
    torch.testing.assert_close(got, one, atol=ATOL, rtol=0)
    torch.testing.assert_close(chunked.data[:, :, :, :len(ids)], whole.data[:, :, :, :len(ids)],
                               atol=ATOL, rtol=0)


def test_batched_decode_equals_each_alone(lm: TinyLMPipeline) -> None:
    ids = _long_ids(lm, 200)
    prompts = [ids[start:start + n] for start, n in ((0, 5), (40, 17), (100, 30))]
    steps = 12
    batched = [lm.allocate(len(p) + steps + 1) for p in prompts]
    alone = [lm.allocate(len(p) + steps + 1) for p in prompts]
    first = lm.prefill([PrefillChunk(kv, p, 0) for kv, p in zip(batched, prompts)])
    first_alone = torch.cat([lm.prefill([PrefillChunk(kv, p, 0)])
                             for kv, p in zip(alone, prompts)])
    torch.testing.assert_close(first, first_alone, atol=ATOL, rtol=0)
    tokens, positions = lm.sample(first_alone), [len(p) for p in prompts]
    for _ in range(steps):
        got = lm.decode([DecodeInput(kv, t, pos)
                         for kv, t, pos in zip(batched, tokens, positions)])
        want = torch.cat([lm.decode([DecodeInput(kv, t, pos)])
                          for kv, t, pos in zip(alone, tokens, positions)])
        assert got.shape == (3, lm.model.embed.num_embeddings)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
        tokens, positions = lm.sample(want), [p + 1 for p in positions]
    for a, b in zip(batched, alone):
        assert a.length == b.length
        torch.testing.assert_close(a.data[:, :, :, :a.length], b.data[:, :, :, :b.length],
                                   atol=ATOL, rtol=0)


def test_continuation_is_corpus_text(lm: TinyLMPipeline) -> None:
    vocab = lm_corpus.vocabulary()
    for prompt, ids in zip(lm.sample_inputs(3, 2), _prompt_ids(lm, 3, seed=2)):
        out = _generate(lm, ids, 48)
        text = lm.detokenize(out)
        words = lm_corpus.words(text)
        known = sum(w in vocab for w in words) / max(1, len(words))
        assert len(words) >= 10 and known >= 0.8, (prompt, text)
        assert len(set(words)) >= 5 and max(out.count(t) for t in out) < len(out) / 2, text


def test_text_round_trips(lm: TinyLMPipeline) -> None:
    texts = lm_corpus.documents(40, 0, "test")
    assert any(not t.isascii() for t in texts), "multi-byte characters among them"
    for text in texts:
        ids = lm.tokenize(text)
        assert lm.detokenize(ids) == text
        for make in (lm.detokenizer, lambda: GenerativePipeline.detokenizer(lm)):
            d = make()
            assert "".join(d.step(i) for i in ids) == text


def test_text_splits_multibyte_characters(lm: TinyLMPipeline) -> None:
    """A character outside the trained merges comes as byte tokens: nothing half-printed."""
    text = "Weather for Zürich: 12 °C, ☂ later — naïve 🌧."
    ids = lm.tokenize(text)
    assert len(ids) > len(text.split()), "some characters split into byte tokens"
    d = lm.detokenizer()
    pieces = [d.step(i) for i in ids]
    assert "".join(pieces) == text and "\ufffd" not in "".join(pieces)


def test_sample_inputs_are_heldout_prompts(lm: TinyLMPipeline) -> None:
    a, b = lm.sample_inputs(5, 3), lm.sample_inputs(5, 3)
    assert a == b and len(a) == 5 and a != lm.sample_inputs(5, 4)
    docs = lm_corpus.documents(5, 3, "heldout")
    assert all(doc.startswith(p) and len(p) < len(doc) for p, doc in zip(a, docs))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_runs(dtype: torch.dtype) -> None:
    lm = TinyLMPipeline("cpu", dtype)
    ids = [_long_ids(lm, 40)[:n] for n in (9, 20)]
    kvs = [lm.allocate(32) for _ in ids]
    first = lm.prefill([PrefillChunk(kv, p, 0) for kv, p in zip(kvs, ids)])
    logits = lm.decode([DecodeInput(kv, t, len(p))
                        for kv, t, p in zip(kvs, lm.sample(first), ids)])
    assert logits.dtype == dtype and logits.shape[0] == 2 and torch.isfinite(logits).all()


def test_cache_misuse_is_refused(lm: TinyLMPipeline) -> None:
    with pytest.raises(ValueError, match="capacity"):
        lm.allocate(lm.max_context + 1)
    kv = lm.allocate(8)
    lm.prefill([PrefillChunk(kv, [5, 6, 7], 0)])
    with pytest.raises(ValueError, match="position"):
        lm.decode([DecodeInput(kv, 8, 5)])  # the cache holds 3 positions, not 5
    with pytest.raises(ValueError, match="capacity"):
        lm.prefill([PrefillChunk(kv, list(range(9, 15)), 3)])
    lm.free(kv)
    assert isinstance(kv, KVCache) and kv.capacity == 0


# ---- costs ---------------------------------------------------------------------------------
@pytest.fixture
def one_thread() -> Iterator[None]:
    """Time on one torch thread: on a 2-core machine, two threads that share a core with any
    other process wait for each other at every op, and the times say more about the machine
    than about the shape of the costs measured here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _least_s(fn: Callable[[], object], repeats: int) -> float:
    """The least of ``repeats`` timed calls (after one untimed): another process can only
    add time to a call, so the least is its own cost (timeit's rule) — the shape of the
    costs holds on a busy machine, where a median takes in the preemptions."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _long_ids(lm: TinyLMPipeline, n: int) -> list[int]:
    ids = [i for doc in lm_corpus.documents(40, 0, "heldout") for i in lm.tokenize(doc)]
    assert len(ids) >= n
    return ids[:n]


@pytest.mark.timing
def test_prefill_time_is_linear_in_prompt_length(lm: TinyLMPipeline, one_thread: None) -> None:
    lengths = [32, 64, 128, 192, 256, 384, 512]
    ids = _long_ids(lm, max(lengths))
    with watched() as machine:
        times = [_least_s(lambda n=n: lm.prefill([PrefillChunk(lm.allocate(n), ids[:n], 0)]),
                          repeats=9) for n in lengths]
    slope, intercept = np.polyfit(lengths, times, 1)
    fit = np.polyval([slope, intercept], lengths)
    r2 = 1 - float(np.sum((np.array(times) - fit) ** 2) / np.sum((times - np.mean(times)) ** 2))
    shown = {n: f"{t * 1e3:.2f} ms" for n, t in zip(lengths, times)}
    assert slope > 0 and r2 >= 0.95, (shown, f"R² {r2:.3f}", machine.note())


@pytest.mark.timing
def test_a_decode_step_is_batched(lm: TinyLMPipeline, one_thread: None) -> None:
    """Eight sequences of different lengths in one step cost less than half of eight steps of
    one: the matmuls run once for the batch, not once per sequence."""
    ids = _long_ids(lm, 300)
    kvs = [lm.allocate(400) for _ in range(8)]
    lens = [60 + 30 * i for i in range(8)]
    lm.prefill([PrefillChunk(kv, ids[:n], 0) for kv, n in zip(kvs, lens)])

    def step(kvs: list[KVCache]) -> None:
        lm.decode([DecodeInput(kv, 42, kv.length) for kv in kvs])
        for kv in kvs:  # step back, so every repeat decodes at the same lengths
            kv.length -= 1

    with watched() as machine:
        one = statistics.median(_least_s(lambda kv=kv: step([kv]), 15) for kv in kvs)
        eight = _least_s(lambda: step(kvs), 15)
    assert eight < 4 * one, (f"batch 8: {eight * 1e3:.2f} ms a step, batch 1: "
                             f"{one * 1e3:.2f} ms", machine.note())
