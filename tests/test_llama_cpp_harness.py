"""The real-llama.cpp harness (tests/llama_cpp.py) itself: the random model it writes is the
Llama llama.cpp expects, and a server started on it streams, times and counts as the tests
that use it will assume."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import require_extra
from tests.llama_cpp import LlamaServer, make_byte_vocab, make_random_gguf, require_llama_server
from tests.llama_cpp import vocab_path as cached_vocab

GGUF_REASON = "the gguf package writes the test's model (pip install gguf)"


def test_random_gguf_reads_back_as_a_llama_of_the_asked_shapes(tmp_path: Path):
    gguf = require_extra("gguf", GGUF_REASON)
    vocab = make_byte_vocab(tmp_path / "vocab.gguf")
    model = make_random_gguf(vocab, tmp_path / "model.gguf", n_layer=2, n_embd=64, n_head=4,
                             n_head_kv=2, n_ff=96, n_ctx=512, seed=3)

    reader = gguf.GGUFReader(model)
    fields = {key: field.contents() for key, field in reader.fields.items()}
    assert fields["general.architecture"] == "llama"
    assert (fields["llama.block_count"], fields["llama.embedding_length"],
            fields["llama.feed_forward_length"], fields["llama.context_length"]) == \
        (2, 64, 96, 512)
    assert (fields["llama.attention.head_count"], fields["llama.attention.head_count_kv"],
            fields["llama.rope.dimension_count"]) == (4, 2, 16)
    assert fields["tokenizer.ggml.model"] == "llama"
    assert fields["tokenizer.ggml.tokens"][:3] == ["<unk>", "<s>", "</s>"]
    assert fields["llama.vocab_size"] == len(fields["tokenizer.ggml.tokens"]) == 259
    # GGUF lists shapes innermost first: (in, out) for a matrix
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in reader.tensors}
    assert shapes["token_embd.weight"] == (64, 259)
    assert "output.weight" not in shapes  # tied (the default): llama.cpp reuses token_embd
    assert shapes["blk.1.attn_q.weight"] == (64, 64)
    assert shapes["blk.1.attn_k.weight"] == shapes["blk.1.attn_v.weight"] == (64, 32)
    assert shapes["blk.1.ffn_up.weight"] == shapes["blk.1.ffn_gate.weight"] == (64, 96)
    assert shapes["blk.1.ffn_down.weight"] == (96, 64)
    assert shapes["output_norm.weight"] == (64,)
    assert len(shapes) == 2 + 2 * 9
    # the same seed writes the same bytes
    again = make_random_gguf(vocab, tmp_path / "again.gguf", n_layer=2, n_embd=64, n_head=4,
                             n_head_kv=2, n_ff=96, n_ctx=512, seed=3)
    assert again.read_bytes() == model.read_bytes()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory):
    """A real llama-server on a random model under Llama 2's vocabulary (from the cache)."""
    binary = require_llama_server()
    require_extra("gguf", GGUF_REASON)
    vocab = cached_vocab(server=binary)
    if vocab is None:
        pytest.fail(f"{binary}: no vocab GGUF beside it (rebuild: python -m tests.llama_cpp "
                    "build)", pytrace=False)
    base = tmp_path_factory.mktemp("llama")
    model = make_random_gguf(vocab, base / "model.gguf")
    with LlamaServer(model, binary=binary, log_path=base / "server.log") as server:
        yield server


@pytest.mark.real_server
def test_a_streamed_completion_ends_with_its_timings_and_metrics_count(llama_server):
    httpx = require_extra("httpx", "httpx is in requirements-dev.txt")
    body = {"prompt": "The quick brown fox jumps over the lazy dog " * 3, "max_tokens": 16,
            "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    chunks = []
    # a connection of its own: the server closes it after a streamed reply (tests/llama_cpp.py)
    with httpx.stream("POST", f"{llama_server.base}/completions", json=body,
                      timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[len("data: "):]))
    metrics = httpx.get(f"{llama_server.url}/metrics", timeout=60)

    assert chunks, "no events in the stream"
    timings = chunks[-1].get("timings")
    assert timings is not None, chunks[-1]
    assert timings["predicted_n"] == 16
    assert chunks[-1]["usage"]["completion_tokens"] == 16
    assert metrics.status_code == 200
    assert any(line.startswith("llamacpp:") for line in metrics.text.splitlines()), \
        metrics.text[:500]
