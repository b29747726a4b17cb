"""Generation against a real llama.cpp ``llama-server`` (built once per machine, a random-weight
model written by the test: ``tests/llama_cpp.py``): the per-request join with its ``timings``,
connections as the real server keeps (and closes) them, token counts, its prompt cache, the
stalls another client's prefill causes, and the machine line naming the server's process.

Our own servers report exact figures and close no connection early; this one does neither,
which is why these tests exist. Each run is small (tens of requests of 64 tokens: ~2 ms a
decode step at one thread), so the module takes well under a minute once the server is up.
"""
from __future__ import annotations

import json
import threading
import urllib.request

import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation
from tests.llama_cpp import served

pytestmark = pytest.mark.real_server


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory):
    """Two slots, as the issue's measurements had; 4,096 tokens of KV cache between them."""
    with served(tmp_path_factory.mktemp("llama"), slots=2, ctx=4096) as server:
        yield server


@pytest.fixture(scope="module")
def llama3(tmp_path_factory: pytest.TempPathFactory):
    """Three slots with room for a long prompt in each (the stall test's other client)."""
    with served(tmp_path_factory.mktemp("llama3"), slots=3, ctx=12288, n_ctx=4096) as server:
        yield server


def _run(server, **settings):
    cfg = RunConfig(target=server.base, **{"warmup": 2, **settings})
    result = execute_generation(cfg, force=True)
    assert result.status == "completed", result.failure
    return result


@pytest.mark.timing
@pytest.mark.parametrize("clients, seed", [(1, 11), (4, 12)])
def test_the_join_covers_the_requests_and_no_connection_fails(llama, clients, seed):
    """40 requests at 1 and at 4 clients on 2 slots: none fails on a connection the server
    closed, and at least 95 % are split with llama.cpp's own timings — the rest counted."""
    r = _run(llama, prompt_tokens="64", output_tokens="64", concurrency=clients,
             requests=40, tokenizer="server", seed=seed)
    assert r.summary.errors == 0, r.summary.error_messages
    assert r.summary.successful == 40
    view = r.target_view
    assert view is not None and view.split.sources.get("llama.cpp timings") == view.split.n
    target = r.environment["target"]
    assert view.split.n >= 38, (view.lines(), target)
    # the server closes a connection after each streamed reply (announcing keep-alive):
    # at most one request per connection met it, and was sent again, counted
    assert target["retried_requests"] <= clients
    assert target["resolution_ms"] > 0 and target["jitter_round_trips"] > 0
    # every request's parts add up to its own times, the llama.cpp parts its own report
    s = view.split
    parts = sum(s.parts[p] for p in ("network", "queue", "prefill", "decode", "other"))
    assert (parts == s.e2e_ns).all()
    assert (r.rows["output_tokens"][~r.rows["warmup"]] == 64).all()


def test_tokens_are_counted_as_the_server_generated_them_without_a_tokenizer(llama):
    """A token whose text is part of a character is sent with the next one: with no
    tokenizer, events with text undercount; the server's usage says how many it made."""
    r = _run(llama, output_tokens="48", concurrency=2, requests=10, seed=21)
    rows = r.rows[~r.rows["warmup"]]
    reps = r.reports[~r.rows["warmup"]]
    assert (reps["output_tokens"] == 48).all()  # llama.cpp's predicted_n
    assert (rows["output_tokens"] == 48).all(), rows["output_tokens"]
    assert (rows["stream_chunks"] <= 48).all()


def test_prompt_cache_hits_are_shown_and_not_advised_again(llama):
    """The same prompts twice: llama.cpp reads them from its prompt cache the second time
    (cache_n): the run says how much, and never advises prefix caching on top of it."""
    settings = {"output_tokens": "8", "concurrency": 1, "requests": 6, "seed": 31,
                "warmup": 0}
    _run(llama, **settings)
    again = _run(llama, **settings)
    view = again.target_view
    assert view is not None and view.cached_share is not None
    assert view.cached_share >= 0.5 and view.cache_hits == 6
    assert any(line.startswith("prompt cache: ") for line in view.lines())
    assert "prefix caching" not in str(again.verdict)


def test_a_shared_prefix_is_read_from_the_servers_cache_and_shortens_the_prefill(llama):
    """One 256-token prefix before every 16-token prompt (--shared-prefix 1:256): after the
    first request, llama.cpp reads the prefix from its prompt cache (cache_n), so its own
    prefill is a fraction of the same run's without the prefix shared (272 fresh tokens)."""
    common = {"output_tokens": "8", "concurrency": 1, "requests": 12, "warmup": 0,
              "tokenizer": "server"}
    shared = _run(llama, prompt_tokens="16", shared_prefix="1:256", seed=41, **common)
    fresh = _run(llama, prompt_tokens="272", seed=42, **common)
    rows, reps = shared.rows, shared.reports
    assert (rows["prompt_tokens"] >= 270).all(), rows["prompt_tokens"]  # prefix + prompt
    later = reps[1:]  # the first request fills the cache
    assert (later["cached_tokens"] >= 250).all(), later["cached_tokens"]
    fresh_reps = fresh.reports[1:]
    # (a fresh window of the corpus can overlap an earlier one: most share little)
    assert np.median(fresh_reps["cached_tokens"]) < 50, fresh_reps["cached_tokens"]
    assert np.median(later["prefill_ns"]) < 0.5 * np.median(fresh_reps["prefill_ns"]), (
        np.median(later["prefill_ns"]), np.median(fresh_reps["prefill_ns"]))
    view = shared.target_view
    assert view is not None and view.cached_share is not None and view.cached_share > 0.8


@pytest.fixture(scope="module")
def sessions(llama):
    """Two clients holding chat sessions of 4 turns (64-token messages, 16-token replies)."""
    return _run(llama, prompt_tokens="64", output_tokens="16", turns=4, concurrency=2,
                requests=40, warmup=0, tokenizer="server", seed=5)


def test_chat_sessions_grow_their_prompt_and_the_server_reads_the_history_from_its_cache(
        sessions):
    """Turn k sends the conversation so far: its prompt grows by a message and a reply a
    turn, and llama.cpp reads most of the history from its prompt cache (cache_n) — the
    run says so by turn."""
    from latency.analysis.gen_turns import turn_of

    turn = turn_of(sessions.rows, 4)
    prompt = [float(np.median(sessions.rows["prompt_tokens"][turn == k])) for k in (1, 2, 3, 4)]
    cached = [float(np.median(sessions.reports["cached_tokens"][turn == k])) for k in (1, 2, 3, 4)]
    assert all(b > a + 64 for a, b in zip(prompt, prompt[1:])), prompt
    for k in (1, 2, 3):  # turn k+1 finds turn k's prompt in the cache, nearly all of it
        assert cached[k] >= 0.6 * prompt[k - 1], (prompt, cached)
    text = repr(sessions)
    assert "TTFT by turn (chat sessions of 4 turns" in text, text
    assert "prompt tokens read from the server's cache, by turn: 1: " in text, text
    assert list(sessions.requests_frame()["turn"][:2]) == [1, 1]


@pytest.mark.timing
def test_with_the_history_cached_a_later_turns_prefill_grows_far_less_than_its_prompt(
        sessions):
    from latency.analysis.gen_turns import turn_of

    turn = turn_of(sessions.rows, 4)
    first, last = (turn == 1), (turn == 4)
    grew = (np.median(sessions.rows["prompt_tokens"][last])
            / np.median(sessions.rows["prompt_tokens"][first]))
    prefill = (np.median(sessions.reports["prefill_ns"][last])
               / np.median(sessions.reports["prefill_ns"][first]))
    assert grew > 3 and prefill < 2, (grew, prefill)


def test_a_local_servers_cpu_is_the_targets_not_other_processes(llama):
    r = _run(llama, output_tokens="32", concurrency=2, requests=8, seed=41)
    machine = r.environment["disturbance"]
    assert machine["target_pids"] == [llama.process.pid]
    assert machine["target_cores_mean"] > 0
    assert f"the target server (pid {llama.process.pid})" in repr(r)


def _long_prompts(server, count: int, words: int, done: threading.Event) -> list[dict]:
    """Another client: ``count`` long prompts, one after another (each prefilled in one
    step beside the run's decodes), their timings kept."""
    out: list[dict] = []
    text = " ".join(f"word{i % 97}" for i in range(words))
    for k in range(count):
        body = json.dumps({"prompt": f"{k} {text}", "max_tokens": 1, "ignore_eos": True,
                           "cache_prompt": False}).encode()
        req = urllib.request.Request(f"{server.base}/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as reply:
            out.append(json.loads(reply.read())["timings"])
    done.set()
    return out


@pytest.mark.timing
def test_another_clients_prefill_is_found_as_a_stall_of_every_stream(llama3):
    """Two of the run's streams decode; another client's long prompts are prefilled in the
    same steps and stall both at once: found, and not blamed on the run's own prefills,
    nor answered with 'more slots' (the server's /metrics saw nobody wait for one)."""
    done = threading.Event()
    timings: list[dict] = []
    cfg = RunConfig(target=llama3.base, output_tokens="400", concurrency=2, requests=4,
                    warmup=0, seed=51, scrape_metrics=True)
    other = threading.Thread(
        target=lambda: timings.extend(_long_prompts(llama3, 3, 500, done)), daemon=True)

    def start_other() -> None:
        threading.Timer(1.0, other.start).start()  # once the run's streams are decoding

    start_other()
    result = execute_generation(cfg, force=True)
    other.join(120)
    assert result.status == "completed", result.failure
    assert done.is_set() and len(timings) == 3
    view = result.target_view
    assert view is not None and view.stalls is not None
    foreign = view.stalls - view.stalls_own
    assert foreign >= 1, view.to_dict()
    # a stall as long as the other client's prefill (its prompt_ms) at least once
    longest_prefill = max(t["prompt_ms"] for t in timings)
    assert view.stall_max_ms >= 0.5 * longest_prefill, (view.stall_max_ms, timings)
    assert any("another client's prompt" in str(f) for f in result.findings)
    assert "more slots" not in str(result.verdict)


@pytest.mark.timing
def test_a_wait_behind_another_clients_prefill_is_not_answered_with_more_slots(llama3):
    """One client of ours, a slot always free, while another client keeps the server busy
    prefilling long prompts: each of our requests waits for the step running when it came
    (the queue part: TTFT less llama.cpp's own prompt_ms) or shares its step with a long
    prompt (a prefill far longer than its own short prompt needs). No request waited for a
    slot — the server's /metrics say 0 deferred — so the verdict asks neither for more
    slots nor for shorter prompts or prefix caching: it names the other prompts."""
    stop = threading.Event()

    def other() -> None:
        text = " ".join(f"word{i % 97}" for i in range(500))
        for k in range(40):  # bounded; stops with the run
            if stop.is_set():
                return
            body = json.dumps({"prompt": f"{k} {text}", "max_tokens": 1,
                               "cache_prompt": False}).encode()
            req = urllib.request.Request(f"{llama3.base}/completions", body,
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as reply:
                reply.read()

    busy = threading.Thread(target=other, daemon=True)
    busy.start()
    try:
        result = _run(llama3, output_tokens="4", concurrency=1, requests=16, seed=61,
                      scrape_metrics=True, warmup=1)
    finally:
        stop.set()
        busy.join(120)
    view = result.target_view
    assert view is not None and view.server_waiting_peak == 0, view.to_dict()
    assert view.split.n >= 10, view.lines()
    # whichever part leads the tail, its lever is one the run's facts support
    assert "no request waited for a slot" in view.lever("queue")
    verdict = str(result.verdict)
    assert "more slots" not in verdict and "prefix caching" not in verdict, verdict
    if "% prefill" in verdict:  # prefill leads: our short prompts batched with long ones
        assert "share their steps" in verdict, (verdict, view.to_dict())
