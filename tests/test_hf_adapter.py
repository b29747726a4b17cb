"""examples/hf_causal_lm.py: a Hugging Face causal LM behind the generative contract gives what
``transformers`` itself gives — greedy tokens equal to ``generate``, chunked prefill equal to
one chunk, batched decode equal to each sequence alone — on a tiny random-weight Llama and a
BPE tokenizer trained here (nothing is downloaded: ``HF_HUB_OFFLINE=1``).

``transformers`` is an optional extra (``pip install -r requirements-hf.txt``): these tests
skip without it, and fail instead where ``LATENCY_LAB_REQUIRE_EXTRAS=1`` (tests/conftest.py).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

from latency.core.errors import PipelineError
from latency.pipelines.generative import DecodeInput, PrefillChunk
from tests.conftest import require_extra
from tests.tiny_llama import build_tiny_llama

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never reach a hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "hf_causal_lm.py"
REASON = "transformers is an optional extra (pip install -r requirements-hf.txt)"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A small model can still tell us where the time goes.",
    "Latency is measured from the outside, one stage at a time.",
    "Every request waits in a queue before its first token appears.",
    "Tokens stream back to the client as soon as they are sampled.",
    "Batching shares one forward pass among many running sequences.",
] * 4
PROMPTS = ["The quick brown fox", "A small model can still tell us where the time",
           "Tokens stream back", "Latency is measured from the outside, one stage at a time."]


def _example():
    """The example module, imported from its file as ``--pipeline FILE:NAME`` does."""
    spec = importlib.util.spec_from_file_location("hf_causal_lm_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A directory as ``save_pretrained`` leaves it: a 2-layer Llama with random weights and
    a byte-level BPE tokenizer trained on a few sentences."""
    transformers = require_extra("transformers", REASON)
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), transformers, SENTENCES)


@pytest.fixture(scope="module")
def pipe(model_dir):
    return _example().HFCausalLMPipeline("cpu", "float32", path=str(model_dir))


def _greedy(pipe, ids: list[int], n: int, chunk: int | None = None) -> list[int]:
    """``n`` tokens through the contract: allocate → prefill (in chunks of ``chunk``) → sample
    → decode, one sequence alone."""
    kv = pipe.allocate(len(ids) + n)
    step = chunk or len(ids)
    with torch.inference_mode():
        for start in range(0, len(ids), step):
            logits = pipe.prefill([PrefillChunk(kv, ids[start:start + step], start)])
        out = pipe.sample(logits)
        while len(out) < n:
            logits = pipe.decode([DecodeInput(kv, out[-1], len(ids) + len(out) - 1)])
            out += pipe.sample(logits)
    pipe.free(kv)
    return out


def test_settings_come_from_the_model_and_tokenizer(pipe):
    assert pipe.max_context == 256
    assert pipe.eos_token_id == pipe.tokenizer.convert_tokens_to_ids("</s>")
    ids = pipe.tokenize(PROMPTS[0])
    assert ids[0] == pipe.tokenizer.convert_tokens_to_ids("<s>")
    assert pipe.detokenize(ids) == PROMPTS[0]
    inputs = pipe.sample_inputs(25, seed=3)
    assert len(inputs) == 25 and all(isinstance(p, str) and p for p in inputs)
    assert inputs == pipe.sample_inputs(25, seed=3)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_tokens_equal_generate(pipe, prompt):
    n = 12
    ids = pipe.tokenize(prompt)
    with torch.inference_mode():
        ref = pipe.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                                  dtype=torch.long), do_sample=False, max_new_tokens=n,
                                  pad_token_id=pipe.eos_token_id)
    theirs = ref[0, len(ids):].tolist()
    ours = _greedy(pipe, ids, n)
    # generate stops at the end-of-sequence token; the contract's loop goes on past it
    assert ours[:len(theirs)] == theirs
    assert len(theirs) == n or theirs[-1] == pipe.eos_token_id


def test_chunked_prefill_equals_one_chunk(pipe):
    ids = pipe.tokenize(PROMPTS[3])
    assert len(ids) > 9
    with torch.inference_mode():
        whole_kv = pipe.allocate(64)
        whole = pipe.prefill([PrefillChunk(whole_kv, ids, 0)])
        for size in (1, 3, 4):
            kv = pipe.allocate(64)
            for start in range(0, len(ids), size):
                last = pipe.prefill([PrefillChunk(kv, ids[start:start + size], start)])
            torch.testing.assert_close(last, whole, rtol=1e-4, atol=1e-5)
    assert whole.shape == (1, pipe.model.config.vocab_size)
    # and the tokens that follow are the same
    assert _greedy(pipe, ids, 8, chunk=3) == _greedy(pipe, ids, 8)


def test_one_prefill_call_with_several_chunks(pipe):
    """A step's prefill holds chunks of several prompts, each at its own start: one row each."""
    a, b = pipe.tokenize(PROMPTS[1]), pipe.tokenize(PROMPTS[2])
    with torch.inference_mode():
        alone = [pipe.prefill([PrefillChunk(pipe.allocate(64), p, 0)]) for p in (a, b)]
        ka, kb = pipe.allocate(64), pipe.allocate(64)
        pipe.prefill([PrefillChunk(ka, a[:4], 0)])
        rows = pipe.prefill([PrefillChunk(ka, a[4:], 4), PrefillChunk(kb, b, 0)])
    assert rows.shape[0] == 2
    torch.testing.assert_close(rows[0:1], alone[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(rows[1:2], alone[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batched", [True, False])
def test_batched_decode_equals_each_alone(model_dir, pipe, batched):
    """Three sequences of different lengths decoded together (one joins late, as in continuous
    batching) give each one's own logits and tokens."""
    subject = pipe if batched else _example().HFCausalLMPipeline(
        "cpu", "float32", path=str(model_dir), batched_decode=False)
    prompts = [pipe.tokenize(p) for p in PROMPTS[:3]]
    steps = 8
    alone = [_greedy(pipe, ids, steps + 1) for ids in prompts]

    with torch.inference_mode():
        running = []  # [kv, prompt ids, tokens so far]

        def admit(ids):
            kv = subject.allocate(len(ids) + steps + 1)
            running.append([kv, ids, subject.sample(subject.prefill(
                [PrefillChunk(kv, ids, 0)]))])

        admit(prompts[0])
        admit(prompts[1])
        for step in range(steps + 3):
            if step == 3:
                admit(prompts[2])  # joins while the others are mid-way
            live = [r for r in running if len(r[2]) < steps + 1]
            if not live:
                break
            inputs = [DecodeInput(kv, out[-1], len(ids) + len(out) - 1)
                      for kv, ids, out in live]
            logits = subject.decode(inputs)
            assert logits.shape == (len(live), pipe.model.config.vocab_size)
            for r, token in zip(live, subject.sample(logits)):
                r[2].append(token)
    assert [r[2] for r in running] == alone


def test_batched_decode_logits_match_single(pipe):
    prompts = [pipe.tokenize(p) for p in PROMPTS[:3]]
    with torch.inference_mode():
        kvs_a = [pipe.allocate(64) for _ in prompts]
        kvs_b = [pipe.allocate(64) for _ in prompts]
        for kva, kvb, ids in zip(kvs_a, kvs_b, prompts):
            pipe.prefill([PrefillChunk(kva, ids, 0)])
            pipe.prefill([PrefillChunk(kvb, ids, 0)])
        token = 5
        batched = pipe.decode([DecodeInput(kv, token, len(ids))
                               for kv, ids in zip(kvs_a, prompts)])
        single = torch.cat([pipe.decode([DecodeInput(kv, token, len(ids))])
                            for kv, ids in zip(kvs_b, prompts)])
    torch.testing.assert_close(batched, single, rtol=1e-4, atol=1e-5)


def test_preempted_and_recomputed_sequence_goes_on_the_same(pipe):
    """Freed and prefilled again from its prompt and its tokens (vLLM's recompute), a
    sequence's next tokens are those it would have produced."""
    ids = pipe.tokenize(PROMPTS[0])
    straight = _greedy(pipe, ids, 10)
    with torch.inference_mode():
        kv = pipe.allocate(len(ids) + 10)
        out = pipe.sample(pipe.prefill([PrefillChunk(kv, ids, 0)]))
        for _ in range(3):
            out += pipe.sample(pipe.decode([DecodeInput(kv, out[-1], len(ids) + len(out) - 1)]))
        pipe.free(kv)
        kv = pipe.allocate(len(ids) + 10)
        seen = ids + out[:-1]
        pipe.prefill([PrefillChunk(kv, seen, 0)])
        while len(out) < 10:
            out += pipe.sample(pipe.decode([DecodeInput(kv, out[-1], len(ids) + len(out) - 1)]))
    assert out == straight


def test_positions_the_cache_does_not_hold_are_refused(pipe):
    ids = pipe.tokenize(PROMPTS[0])
    with torch.inference_mode():
        kv = pipe.allocate(len(ids) + 2)
        with pytest.raises(ValueError, match="holds 0 positions"):
            pipe.prefill([PrefillChunk(kv, ids, 3)])
        pipe.prefill([PrefillChunk(kv, ids, 0)])
        with pytest.raises(ValueError, match=f"holds {len(ids)} positions"):
            pipe.decode([DecodeInput(kv, 1, len(ids) + 1)])
        pipe.decode([DecodeInput(kv, 1, len(ids))])
        pipe.decode([DecodeInput(kv, 1, len(ids) + 1)])
        with pytest.raises(ValueError, match="exceed this sequence's allocated"):
            pipe.decode([DecodeInput(kv, 1, len(ids) + 2)])
    with pytest.raises(ValueError, match="exceeds the model's context"):
        pipe.allocate(pipe.max_context + 1)


def test_streamed_text_equals_the_whole(pipe):
    """Text streamed a token at a time adds up to the whole, a character split across byte
    tokens included (held back until its last byte; the random model's own output is no valid
    UTF-8, so real text is streamed here)."""
    text = "Latency of a café's naïve queue — 3 µs?"
    ids = pipe.tokenize(text)
    assert len(ids) > len(text.split())  # unseen characters: byte tokens, split characters
    stream = pipe.detokenizer()
    pieces = [stream.step(i) for i in ids]
    assert "".join(pieces) == pipe.detokenize(ids) == text
    assert not any("\ufffd" in p for p in pieces)


def test_a_directory_that_does_not_load_is_one_line(tmp_path):
    require_extra("transformers", REASON)
    cls = _example().HFCausalLMPipeline
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(PipelineError) as err:
        cls("cpu", "float32", path=str(tmp_path))
    text = str(err.value)
    assert len(text.splitlines()) == 1 and str(tmp_path) in text and "cannot load" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PipelineError) as err:
        cls("cpu", "float32", path=str(empty))
    assert len(str(err.value).splitlines()) == 1


def test_check_args_refuses_a_missing_path_in_one_line(tmp_path):
    cls = _example().HFCausalLMPipeline  # the module imports without transformers
    for args, words in (({"path": ""}, "path is required"),
                        ({"path": str(tmp_path / "nowhere")}, "is not a directory")):
        with pytest.raises(ValueError, match=words) as err:
            cls.check_args({"batched_decode": True, **args})
        assert len(str(err.value).splitlines()) == 1


def test_without_transformers_it_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers → ImportError
    cls = _example().HFCausalLMPipeline
    with pytest.raises(PipelineError, match="requirements-hf.txt") as err:
        cls("cpu", "float32", path=str(tmp_path))
    assert len(str(err.value).splitlines()) == 1


def test_the_dtype_asked_for_is_the_model_s(model_dir):
    bf16 = _example().HFCausalLMPipeline("cpu", "bfloat16", path=str(model_dir))
    assert bf16.model.dtype == torch.bfloat16
    ids = bf16.tokenize(PROMPTS[0])
    with torch.inference_mode():
        logits = bf16.prefill([PrefillChunk(bf16.allocate(32), ids, 0)])
    assert logits.dtype == torch.bfloat16 and logits.shape == (1, bf16.model.config.vocab_size)


def test_the_engine_profiles_the_model_through_the_cli(model_dir, tmp_path, monkeypatch):
    """Your HF model, measured back by the command line: every request served, each token
    stamped, the components adding up, and the context read before it loads."""
    import json

    from tests.cli_support import cli_here

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the run process is started with it too
    out = tmp_path / "hf.json"
    spec = f"{EXAMPLE}:HFCausalLMPipeline"
    done = cli_here("run", "--pipeline", spec, "--model-arg", f"path={model_dir}",
                    "--output-tokens", "6", "--requests", "6", "--min-requests", "6",
                    "--concurrency", "2", "--max-running", "2", "--chunked-prefill", "4",
                    "--warmup", "1", "--no-save", "--quiet", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    assert data["summary"]["successful"] == 6
    cols = data["requests"]["columns"]
    assert set(cols["output_tokens"]) == {6}
    too_long = cli_here("run", "--pipeline", spec, "--model-arg", f"path={model_dir}",
                        "--prompt-tokens", "100000", "--requests", "2", "--no-save")
    assert too_long.returncode == 2 and "context" in too_long.stderr, too_long.stderr
