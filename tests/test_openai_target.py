"""A generation from a server of yours (``run --target URL`` with a generation flag): against a
real third-party server (``transformers serve`` on a random-weight Llama built here), against
our own server (whose account splits every request), against a replay of llama.cpp's stream
shape as its documentation gives it (its ``timings`` join each request), and bad input that is
one line and exit 2 before the run."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation
from latency.loadgen.sse_client import chunk_counts, fitted
from latency.serve.http_server import ServerProcess
from tests.conftest import QuietHandler, loopback_server, require_extra

REASON = "transformers serve is the third-party OpenAI-compatible server (requirements-hf.txt)"
SECRET = "sk-never-stored-0123456789"


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "latency", "run", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    cfg = RunConfig(model="synthetic-lm", model_args={"prefill_ms": 2.0, "step_ms": 1.0},
                    max_running=2).checked()
    proc = ServerProcess(cfg).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_our_server_as_a_target_is_split_by_its_own_account(ours, tmp_path):
    out, csv = tmp_path / "run.json", tmp_path / "run.csv"
    r = cli("--target", f"{ours.url}/v1", "--output-tokens", "8", "--requests", "12",
            "--concurrency", "2", "--warmup", "2", "--json", str(out), "--csv", str(csv),
            "--no-save", env={"OPENAI_API_KEY": SECRET})
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(out.read_text())
    sp = d["server_split"]
    # every request came with our server's account; placed on the client's clock, its parts
    # are all non-negative by construction (its network is the request's own), so none is
    # left out
    assert sp["sources"] == {"Latency Lab's account": 12} and sp["inconsistent"] == 0, sp
    assert "server split of 12 of 12 requests (from Latency Lab's account (12)" in r.stdout
    assert sp["provenance"]["Latency Lab's account"]["queue"] == "reported"
    # each part is a request's own, so their means sum to the mean send-anchored E2E
    rows = d["requests"]["columns"]
    reports = d["reports"]["columns"]
    measured = [i for i, w in enumerate(rows["warmup"]) if not w]
    assert all(reports["source"][i] == 1 for i in measured)
    e2e = np.mean([rows["t_done"][i] - rows["t_sent"][i] for i in measured]) / 1e6
    assert sum(v["mean"] for v in sp["parts_ms"].values()) == pytest.approx(e2e, rel=1e-6)
    # every request carried its own W3C trace id, kept in the CSV
    frame = pd.read_csv(csv, dtype={"trace_id": str})
    ids = frame["trace_id"].tolist()
    assert len(set(ids)) == len(ids) == 14 and all(re.fullmatch(r"[0-9a-f]{32}", i)
                                                   for i in ids)
    assert (frame["server_report"] == "Latency Lab's account").all()
    # the key was sent, and is written nowhere
    assert SECRET not in out.read_text() + csv.read_text() + r.stdout + r.stderr


# ---- replays of other servers' OpenAI-compatible streams, in the shapes their docs give -------
WORDS = ["Once", " upon", " a", " time", " there", " was", " a", " cat", " who", " sang"]
PROMPT_MS = 1.5  # what the replayed server says its prefill took (it waits longer: 4 ms)


def _replay(events) -> type[QuietHandler]:
    """A server that answers each POST with ``events(ask)``: (seconds to wait, event) pairs,
    an event a dict or "[DONE]", each written as its own chunk."""
    class H(QuietHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # each event leaves as written, as servers do

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": "served", "object":
                                                            "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            ask = json.loads(self.read_body())
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for wait, ev in events(ask):
                time.sleep(wait)
                data = ev.encode() if isinstance(ev, str) else json.dumps(ev).encode()
                self._chunk(b"data: " + data + b"\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return H


def _llamacpp(ask: dict) -> list:
    """llama-server's stream: a role chunk, a chunk a token, the last with ``timings``."""
    n = min(int(ask.get("max_tokens") or 4), len(WORDS))
    out: list = [(0.004, {"choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    out += [(0.002, {"choices": [{"index": 0, "delta": {"content": WORDS[i]},
                                  "finish_reason": None}]}) for i in range(n)]
    out.append((0.0, {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                      "usage": {"prompt_tokens": 7, "completion_tokens": n,
                                "total_tokens": 7 + n},
                      "timings": {"prompt_n": 7, "prompt_ms": PROMPT_MS,
                                  "prompt_per_token_ms": PROMPT_MS / 7, "predicted_n": n,
                                  "predicted_ms": 1.0 * n, "cache_n": 0}}))
    return [*out, (0.0, "[DONE]")]


def _vllm_speculative(ask: dict) -> list:
    """vLLM with speculative decoding: two tokens a chunk, the running count in each chunk's
    ``usage`` (``continuous_usage_stats``), its per-request ``metrics`` at the end."""
    n = int(ask.get("max_tokens") or 4)
    chunks = (n + 1) // 2
    per_chunk = "continuous_usage_stats" in (ask.get("stream_options") or {})
    out: list = [(0.003, {"choices": [{"index": 0, "delta": {"role": "assistant",
                                                             "content": ""}}]})]
    for c in range(chunks):
        ev: dict = {"choices": [{"index": 0, "delta": {"content": f" w{c}a w{c}b"},
                                 "finish_reason": None}]}
        if per_chunk:
            done = min(2 * (c + 1), n)
            ev["usage"] = {"prompt_tokens": 9, "completion_tokens": done,
                           "total_tokens": 9 + done}
        out.append((0.003, ev))
    out.append((0.0, {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                      "metrics": {"queue_time_ms": 0.2, "time_to_first_token_ms": 1.0,
                                  "generation_time_ms": 1.0}}))
    out.append((0.0, {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": n,
                                               "total_tokens": 9 + n}}))
    return [*out, (0.0, "[DONE]")]


def test_llamacpp_timings_join_each_request_as_prefill_and_decode():
    with loopback_server(_replay(_llamacpp), path="/v1") as url:
        cfg = RunConfig(target=url, output_tokens="6", requests=8, concurrency=2, warmup=1)
        result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    assert result.summary.successful == 8
    view = result.target_view
    assert view is not None and view.split.sources == {"llama.cpp timings": 8}
    # prefill is what llama.cpp reported; queue is derived and takes the rest of its TTFT
    assert view.parts_ms["prefill"].p50 == pytest.approx(PROMPT_MS, abs=1e-6)
    assert view.parts_ms["decode"].p50 == pytest.approx(6.0, abs=1e-6)
    assert view.split.provenance["llama.cpp timings"]["queue"] == "derived"
    assert (view.split.parts["queue"] >= 0).all()
    # the role-only first event is not a token: six content tokens each, TTFT at the first
    assert (result.rows["output_tokens"] == 6).all()
    assert view.count_compared == 0  # no tokenizer: nothing counted on the client
    assert "llama.cpp timings" in repr(result)


def test_per_chunk_usage_counts_each_chunks_tokens_and_vllm_metrics_split_them():
    with loopback_server(_replay(_vllm_speculative), path="/v1") as url:
        cfg = RunConfig(target=url, output_tokens="8", requests=6, concurrency=2, warmup=1)
        result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    assert result.environment["target"]["chunk_usage"] is True
    rows = result.rows[~result.rows["warmup"]]
    # eight tokens in four chunks: each token gets its chunk's stamp
    assert (rows["output_tokens"] == 8).all() and (rows["stream_chunks"] == 4).all()
    view = result.target_view
    assert view is not None and view.counted_by == "the server's per-chunk usage"
    assert view.tokens_per_chunk == pytest.approx(2.0)
    assert view.split.sources == {"vLLM per-request metrics": 6}
    assert view.parts_ms["queue"].p50 == pytest.approx(0.2, abs=1e-6)
    text = repr(result)
    assert "chunks carry 2.00 tokens on average" in text and "per token" in text
    # a chunk's tokens are 0 ms apart; the gaps between chunks are kept beside them
    assert result.summary.itl_ms.p50 == 0.0
    assert view.itl_chunk_ms.p50 is not None and view.itl_chunk_ms.p50 > 1.0


# ---- transformers serve: a real third-party OpenAI-compatible server -------------------------
@pytest.fixture(scope="module")
def tserve(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """`transformers serve` on a random-weight 2-layer Llama with a BPE tokenizer and a chat
    template, built here (nothing is downloaded)."""
    transformers = require_extra("transformers", REASON)
    require_extra("fastapi", REASON)
    require_extra("uvicorn", REASON)
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    out = tmp_path_factory.mktemp("tserve-llama")
    text = ["the weather today is sunny with a light breeze from the west",
            "a recipe for bread needs flour, water, salt and a little time",
            "once upon a time a cat lived in a cottage near the sea"] * 30
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[
        ("<s>", bos)])
    wrapped = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    wrapped.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                             "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
    wrapped.save_pretrained(out)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, bos_token_id=bos, eos_token_id=eos,
        initializer_range=0.2)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(out)
    port = free_port()
    exe = Path(sys.executable).with_name("transformers")
    proc = subprocess.Popen(
        [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
         str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read() if proc.stderr else ""
                pytest.fail(f"transformers serve did not start: {err[-1500:]}")
            time.sleep(0.5)
        yield f"{base}/v1", out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_transformers_serve_streams_are_measured_per_token_with_its_tokenizer(tserve, tmp_path):
    url, model = tserve
    out = tmp_path / "run.json"
    r = cli("--target", url, "--api", "chat", "--tokenizer", str(model), "--output-tokens", "6",
            "--requests", "8", "--concurrency", "2", "--warmup", "1", "--json", str(out),
            "--max-error-rate", "0.3", "--no-save")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    d = json.loads(out.read_text())
    # (a random model may end a request at its end-of-sequence token before any text: that
    # one is a counted error, "no content")
    s = d["summary"]
    assert s["successful"] + s["errors"] == 8 and s["successful"] >= 6, s
    assert all("no content" in m for m in s["error_messages"]), s["error_messages"]
    assert d["environment"]["target"]["model"] == str(model)
    # it reports nothing of its requests' insides: the split says so instead of guessing
    assert d["server_split"]["requests_split"] == 0
    assert "server split: unavailable" in r.stdout
    # what it does not do is named: no [DONE], no forced lengths
    assert "without [DONE]" in r.stdout and "ignore_eos/min_tokens" in r.stdout
    # its usage count is each request's token count, spread over the chunks by the tokenizer
    reports = d["reports"]["columns"]
    rows = d["requests"]["columns"]
    for i, warm in enumerate(rows["warmup"]):
        if not warm and rows["status"][i] == 0:
            assert 1 <= rows["output_tokens"][i] == reports["output_tokens"][i] <= 6
            assert 1 <= rows["stream_chunks"][i] <= rows["output_tokens"][i]
    assert d["server_split"]["counted_by"] == "tokenizer"


def test_transformers_serve_completions_without_a_tokenizer_counts_chunks(tserve, tmp_path):
    url, _ = tserve
    r = cli("--target", url, "--api", "completions", "--output-tokens", "5", "--requests", "6",
            "--concurrency", "2", "--warmup", "1", "--no-save")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    assert "(completions)" in r.stdout
    assert "gaps: per chunk (tokens counted by chunks)" in r.stdout


# ---- bad input: one line, exit 2, before the run -------------------------------------------
@pytest.mark.parametrize("args,says", [
    (["--output-tokens", "4", "--max-running", "4"], "--max-running: our scheduler's"),
    (["--prompt-tokens", "64"], "--prompt-tokens with a --target"),
    (["--output-tokens", "4", "--tokenizer", "/no/such/dir"], "no tokenizer.json"),
    (["--output-tokens", "4", "--served-model", "no-such-model"], "404|HTTP 4"),
])
def test_bad_target_generation_input_is_one_line(ours, args, says):
    r = cli("--target", f"{ours.url}/v1", "--no-save", *args, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(says, r.stderr), r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_unreachable_target_and_target_flags_without_one_are_one_line():
    r = cli("--target", f"http://127.0.0.1:{free_port()}/v1", "--output-tokens", "4",
            "--no-save", timeout=120)
    assert r.returncode == 2 and "cannot reach it" in r.stderr, r.stderr
    r = cli("--model", "synthetic-lm", "--api", "chat", "--no-save", timeout=120)
    assert r.returncode == 2 and "give its --target URL" in r.stderr, r.stderr


def test_the_servers_count_is_kept_and_the_tokenizers_spread_over_the_chunks():
    assert fitted([1, 2, 1], 4) == [1, 2, 1]
    assert sum(fitted([1, 3, 2, 2], 6)) == 6 and fitted([1, 3, 2, 2], 6)[1] >= 2
    assert fitted([0, 0], 3) in ([2, 1], [1, 2])


def test_the_servers_metrics_are_scraped_beside_the_clients(ours):
    cfg = RunConfig(target=f"{ours.url}/v1", output_tokens="16", rate=20.0, duration_s=3.0,
                    warmup=2, scrape_metrics=True)
    result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    series = result.environment["server_metrics"]
    assert series["failures"] == 0 and len(series["t_ns"]) >= 3
    running = series["values"]["latency_lab_gen_running"]
    assert len(running) == len(series["t_ns"]) and max(running) >= 1
    assert re.search(r"server metrics \(\d+ scrapes .* while measuring\): running mean .* the "
                     r"client had [\d.]+ requests in flight", repr(result))


def test_target_runs_compare_by_their_server_split(ours, tmp_path):
    files = []
    for clients in (1, 3):
        cfg = RunConfig(target=f"{ours.url}/v1", output_tokens="8", requests=10,
                        concurrency=clients, warmup=1)
        result = execute_generation(cfg, force=True)
        files.append(tmp_path / f"c{clients}.json")
        files[-1].write_text(result.json_text())
    r = subprocess.run([sys.executable, "-m", "latency", "compare", *map(str, files)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "concurrency: 1 → 3" in r.stdout
    for part in ("network", "queue", "prefill", "decode", "other"):
        assert f"split: {part} (mean)" in r.stdout
    assert "tokenize (mean)" not in r.stdout  # the client's own components are not shown
    # the server's running counts: an event without text hands its tokens to the next one
    assert chunk_counts([2, 4, 4, 5], [0, 1, 3], 9) == [2, 2, 1]
    assert chunk_counts([1, None], [0, 1], 9) is None  # a text event that did not say
    assert chunk_counts([1, 2, None], [0, 1], 9) == [1, 1]  # the last, textless, said nothing
    assert chunk_counts([3, 2], [0, 1], 9) is None  # backwards: not believed
    assert chunk_counts([3, 10**9], [0, 1], 9) is None  # beyond what was asked for
    assert chunk_counts([0, 0], [0, 1], 9) is None  # nothing at all


def test_an_older_reports_table_keeps_its_missing_columns_missing():
    from latency.analysis.gen_result import reports_of
    from latency.core.gen_reports import MISSING

    d = {"reports": {"count": 2, "t0_ns": 0, "columns": {"source": [2, 2],
                                                          "prefill_ns": [5, 6]}}}
    got = reports_of(d, 2)
    assert list(got["prefill_ns"]) == [5, 6]
    assert (got["network_ns"] == MISSING).all() and (got["counted_tokens"] == MISSING).all()
    assert (reports_of({}, 3)["source"] == 0).all()


def test_a_key_that_cannot_be_a_header_is_refused_without_showing_it(monkeypatch):
    from latency.core.errors import ConfigError
    from latency.execution.openai_probe import api_key

    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc\r\nX-Evil: 1")
    with pytest.raises(ConfigError) as err:
        api_key(None)
    assert "sk-abc" not in str(err.value) and "OPENAI_API_KEY" in str(err.value)


def test_model_and_one_shot_flags_are_refused_with_a_generation_target(ours):
    r = cli("--target", f"{ours.url}/v1", "--output-tokens", "4", "--model", "tiny-lm",
            "--no-save", timeout=120)
    assert r.returncode == 2 and "--served-model tiny-lm" in r.stderr, r.stderr
    r = cli("--target", f"{ours.url}/v1", "--output-tokens", "4", "--target-protocol", "http",
            "--no-save", timeout=120)
    assert r.returncode == 2 and "--target-protocol is for one-shot" in r.stderr, r.stderr
