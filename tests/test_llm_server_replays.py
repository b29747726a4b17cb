"""Other servers' OpenAI-compatible streams replayed in the shapes their documentation gives
(llama.cpp's ``timings``, vLLM's per-chunk usage and per-request ``metrics``): each request is
joined with the report and split, each part labelled where it came from."""
from __future__ import annotations

import json
import time

import pytest

from latency.analysis.gen_result import GenResult
from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation
from tests.conftest import QuietHandler, loopback_server
from tests.target_support import cli

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


def replayed(events, **settings) -> GenResult:
    """A completed run against a replay of ``events`` (``_replay``), with these settings."""
    with loopback_server(_replay(events), path="/v1") as url:
        result = execute_generation(RunConfig(target=url, **settings), force=True)
    assert result.status == "completed", result.failure
    return result


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
    result = replayed(_llamacpp, output_tokens="6", requests=8, concurrency=2, warmup=1)
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
    result = replayed(_vllm_speculative, output_tokens="8", requests=6, concurrency=2,
                      warmup=1)
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


def test_a_servers_missing_tokenizer_is_one_line_before_the_run_from_the_cli():
    """``--tokenizer server`` against a server that streams but has no tokenize endpoint
    (llama.cpp's stream replayed, every other route answered with the stream too): the CLI
    says so in one line and exits 2 before it measures — a tokenizer found missing inside
    the run was a failed run, exit 1, kept in the history."""
    with loopback_server(_replay(_llamacpp), path="/v1") as url:
        r = cli("--target", url, "--tokenizer", "server", "--output-tokens", "4",
                "--requests", "2", "--no-save", timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--tokenizer server" in r.stderr and "none of vLLM's" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "measured" not in r.stdout


def _stops_early(ask: dict) -> list:
    """A server that takes ignore_eos and min_tokens without a word and ends every reply at
    its end-of-sequence token anyway: three tokens, finish_reason "stop"."""
    n = min(int(ask.get("max_tokens") or 4), 3)
    out: list = [(0.001, {"choices": [{"index": 0, "delta": {"content": WORDS[i]},
                                       "finish_reason": None}]}) for i in range(n)]
    out.append((0.0, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    return [*out, (0.0, "[DONE]")]


def test_a_server_that_ignores_forced_lengths_is_named():
    result = replayed(_stops_early, output_tokens="8", requests=5, concurrency=1, warmup=1)
    assert result.environment["target"]["forces_length"] is True  # it took the fields
    assert result.environment["target"]["finish_reasons"] == {"stop": 6}
    assert any("6 of 6 replies ended before their asked length (6 × 'stop') though the "
               "server took ignore_eos/min_tokens" in w for w in result.warnings), \
        result.warnings
    # a server that honours them is not named (llama.cpp's replay ends each at "length")
    result = replayed(_llamacpp, output_tokens="4", requests=3, concurrency=1, warmup=0)
    assert result.environment["target"]["finish_reasons"] == {"length": 3}
    assert not any("before their asked length" in w for w in result.warnings)


def test_an_invalid_generation_is_listed_as_invalid_not_as_completed(tmp_path):
    """A quarter of the replies are error events: the run completes, INVALID (errors over
    --max-error-rate), and the history's listing says INVALID beside 'completed'."""
    import itertools

    from latency.storage.store import RunStore
    from tests.cli_support import cli_here

    calls = itertools.count()

    def events(ask: dict) -> list:
        if next(calls) % 4 == 3:
            return [(0.0, {"error": {"message": "overloaded"}}), (0.0, "[DONE]")]
        return _llamacpp(ask)

    result = replayed(events, output_tokens="4", requests=8, concurrency=1, warmup=0)
    assert result.summary.errors >= 1 and not result.validity.valid
    db = tmp_path / "history.db"
    RunStore(db).save(result)
    out = cli_here("history", "--db", str(db))
    assert out.returncode == 0, out.stderr
    line = out.stdout.splitlines()[1]
    assert "completed" in line and "INVALID" in line, out.stdout


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_recorded_llama_server_streams_are_joined_and_its_closed_connections_cost_nothing(api):
    """Real llama-server replies, replayed byte for byte at their recorded times
    (tests/recorded_streams.py), the connection closed after each as the server does: no
    request fails, each is split by its timings, the race counted where it was met."""
    from tests.recorded_streams import replay_server

    with replay_server() as server:
        result = execute_generation(RunConfig(
            target=f"http://127.0.0.1:{server.port}/v1", api=api, output_tokens="48",
            requests=12, concurrency=2, warmup=0), force=True)
    assert result.status == "completed", result.failure
    assert result.summary.errors == 0, result.summary.error_messages
    view = result.target_view
    assert view is not None and view.split.sources == {"llama.cpp timings": view.split.n}
    assert view.split.n >= 11, view.lines()
    # the server's own count, one token a chunk (no tokenizer): what it said it generated
    rows = result.rows[~result.rows["warmup"]]
    assert (rows["output_tokens"] == result.reports["output_tokens"][~result.rows["warmup"]]).all()
    assert result.environment["target"]["retried_requests"] <= 2


def test_a_servers_token_count_beyond_what_streamed_is_not_believed():
    """Six chunks of a few bytes each, a usage that claims the 60 tokens asked for: a token
    writes at least a byte, so 60 cannot have come in 19 bytes — each chunk stays one token.
    A claim within the bytes (a held-back partial character) is believed."""
    def lying(ask: dict) -> list:
        out = [(0.001, {"choices": [{"index": 0, "text": f" w{i}", "finish_reason": None}]})
               for i in range(6)]
        out.append((0.0, {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                          "usage": {"prompt_tokens": 3, "completion_tokens": 60},
                          "timings": {"prompt_n": 3, "prompt_ms": 0.01, "predicted_n": 60,
                                      "predicted_ms": 0.001, "cache_n": 0}}))
        return [*out, (0.0, "[DONE]")]

    result = replayed(lying, api="completions", output_tokens="60", requests=4, warmup=0)
    assert (result.rows["output_tokens"] == 6).all(), result.rows["output_tokens"]
    # nor does llama.cpp's predicted_n make six one-token chunks "carry" ten tokens each
    assert result.target_view is not None and result.target_view.tokens_per_chunk == 1.0
    assert not any("tokens a chunk" in str(f) for f in result.findings), result.findings

    def held_back(ask: dict) -> list:  # 7 tokens; two of them sent together
        out = [(0.001, {"choices": [{"index": 0, "text": t, "finish_reason": None}]})
               for t in (" a", " b", " café", " d", " e", " f")]
        out.append((0.0, {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                          "usage": {"prompt_tokens": 3, "completion_tokens": 7}}))
        return [*out, (0.0, "[DONE]")]

    result = replayed(held_back, api="completions", output_tokens="7", requests=4, warmup=0)
    assert (result.rows["output_tokens"] == 7).all(), result.rows["output_tokens"]


@pytest.mark.parametrize("content", [["a", "b"], 7, {"text": "x"}])
def test_a_reply_whose_text_is_not_text_fails_alone_and_the_run_ends(content):
    """A delta.content that is a list, a number or an object: that stream fails with why,
    the client's recording thread lives on, the run ends with every request accounted for."""
    import itertools

    calls = itertools.count()

    def events(ask: dict) -> list:
        if next(calls) % 2:  # every other request (the probe's is a good one)
            return [(0.0, {"choices": [{"index": 0, "delta": {"content": content},
                                        "finish_reason": None}]}), (0.0, "[DONE]")]
        return _llamacpp(ask)

    t = time.monotonic()
    result = replayed(events, output_tokens="4", requests=8, concurrency=2, warmup=0)
    assert time.monotonic() - t < 60
    s = result.summary
    assert s.successful + s.errors == 8 and s.errors >= 3, s.error_messages
    assert all("not a string" in m for m in s.error_messages), s.error_messages


def test_a_request_that_cannot_be_recorded_fails_alone_and_the_receiver_lives_on():
    """Whatever a server or pipeline hands back, the one thread that records every request
    does not die on it: the request is recorded failed, with why, and the run goes on."""
    import threading

    from latency.core.gen_records import GenRequest
    from latency.loadgen.gen_driver import GenDriver

    recorded: list[GenRequest] = []

    def record(req: GenRequest) -> None:
        if req.error is None and req.max_tokens == 3:
            raise OverflowError("Python integer 70000 out of bounds for int16")
        recorded.append(req)

    def submit(req: GenRequest) -> None:  # an instant server: one token, done
        from latency.core.timing import now_ns

        t = now_ns()
        req.t_sent = req.t_received = req.t_tok_start = req.t_tok_end = t
        req.t_admitted = req.t_first = req.t_first_detok = t
        for name in ("call_start", "produced", "detok"):
            getattr(req, name).append(t)
        req.kinds.append(0)
        req.batches.append(1)
        req.output.append(0)
        req.on_token(req, True)

    work = [("a prompt", 2), ("another", 3), ("a third", 2)]
    driver = GenDriver(submit, work, record, threading.Event())
    driver.closed(1, 6, None, False, 5.0)
    assert len(recorded) == 6
    failed = [r for r in recorded if r.error]
    assert len(failed) == 2 and all("could not be recorded" in r.error and "int16" in r.error
                                    for r in failed)


def test_another_choices_tokens_are_not_counted_as_the_requests_own():
    """A server that streams a second completion (index 1) beside the one asked for: only
    choice 0's four tokens are the request's."""
    def two_choices(ask: dict) -> list:
        out: list = []
        for i in range(4):
            out.append((0.001, {"choices": [{"index": 1, "text": f" other{i}",
                                             "finish_reason": None}]}))
            out.append((0.001, {"choices": [{"index": 0, "text": f" w{i}",
                                             "finish_reason": "length" if i == 3 else None}]}))
        return [*out, (0.0, "[DONE]")]

    result = replayed(two_choices, api="completions", output_tokens="4", requests=4, warmup=0)
    assert result.summary.errors == 0, result.summary.error_messages
    assert (result.rows["output_tokens"] == 4).all(), result.rows["output_tokens"]


def _forged(k: int, **extra) -> dict:
    """A Latency Lab account of the right shape for ``k`` tokens (any server can send one)."""
    from latency.loadgen.gen_layout import ACCOUNT_VERSION

    return {"version": ACCOUNT_VERSION, "tokens": k, "prompt_tokens": 5, "preemptions": 0,
            "prefill_chunks": 1, "replica": 0,
            "ns": {"tok_start": 0, "tok_end": 0, "admitted": 0, "prefill": 0},
            "token_ns": {"call": [0] * k, "run": [0] * k, "detok": [0] * k, "pick": [0] * k},
            "kinds": ("0" + "1" * (k - 1)) if k else "", "batches": [1] * k, **extra}


def test_a_forged_account_is_checked_against_what_was_asked_and_streamed():
    """An account claiming 1,000 tokens a chunk for six chunks of six asked is not believed
    (six tokens stand); one of no token at all, after a stream of no token, is no success."""
    from latency.serve.gen_account import ACCOUNT_KEY

    def inflated(ask: dict) -> list:
        out = [(0.001, {"choices": [{"index": 0, "text": f" w{i}", "finish_reason": None}]})
               for i in range(6)]
        out.append((0.0, {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                          ACCOUNT_KEY: _forged(6000, chunk_tokens=[1000] * 6)}))
        return [*out, (0.0, "[DONE]")]

    result = replayed(inflated, api="completions", output_tokens="6", requests=4, warmup=0)
    assert result.summary.errors == 0, result.summary.error_messages
    assert (result.rows["output_tokens"] == 6).all(), result.rows["output_tokens"]

    def empty(ask: dict) -> list:
        return [(0.001, {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                         ACCOUNT_KEY: _forged(0)}), (0.0, "[DONE]")]

    with loopback_server(_replay(empty), path="/v1") as url:
        r = execute_generation(RunConfig(target=url, api="completions", output_tokens="6",
                                         requests=4, warmup=0), force=True)
    assert r.summary.successful == 0 and r.summary.errors == 4
    assert not r.validity.valid


def _plain(ask: dict) -> list:
    """A server that reports nothing of its requests: a chunk a token, then [DONE]."""
    n = min(int(ask.get("max_tokens") or 4), len(WORDS))
    out: list = [(0.004, {"choices": [{"index": 0, "delta": {"content": WORDS[i]},
                                       "finish_reason": None}]}) for i in range(n)]
    return [*out, (0.0, {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
            (0.0, "[DONE]")]


def test_a_closed_loop_run_that_cannot_be_simulated_says_so_and_which_run_would_be(tmp_path):
    """A closed loop on a server that reports nothing (docs/your-llm-server.md's second
    example): no request ever found the server idle, so no prefill cost can be fitted. The
    run's own output says so and what run would do; `simulate --from-run` says the same in one
    line."""
    from tests.cli_support import cli_here

    out = tmp_path / "closed.json"
    with loopback_server(_replay(_plain), path="/v1") as url:
        r = cli("--target", url, "--output-tokens", "6", "--concurrency", "4", "--requests",
                "40", "--warmup", "2", "--json", str(out), "--no-save")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    line = next((x for x in r.stdout.splitlines() if x.startswith("simulate:")), "")
    assert "cannot be simulated" in line and "lower load" in line, r.stdout[-3000:]
    sim = cli_here("simulate", "--from-run", str(out))
    assert sim.returncode == 2 and "Traceback" not in sim.stderr, sim.stderr[-2000:]
    assert "lower load" in sim.stderr and len(sim.stderr.strip().splitlines()) == 1
