"""A generation from a server of yours (``run --target URL`` with a generation flag), against our
own server (whose account splits every request: exact sums, trace ids, no key written, scraped
metrics, compare by the split), and bad input that is one line and exit 2 before the run. A
real third-party server: tests/test_transformers_serve.py; other servers' stream shapes:
tests/test_llm_server_replays.py."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation
from latency.loadgen.sse_client import chunk_counts, fitted
from latency.serve.http_server import ServerProcess
from tests.cli_support import cli_here
from tests.target_support import SECRET, cli, free_port


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
            "--min-requests", "12",
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
    # each request's split is its own row: its parts sum to its send-anchored E2E, and each
    # says where it came from
    parts = frame[[f"split_{p}_ms" for p in ("network", "queue", "prefill", "decode",
                                            "other")]]
    e2e_sent = frame["t_done_ms"] - frame["t_sent_ms"]
    assert np.allclose(parts.sum(axis=1), e2e_sent, atol=2e-3)  # the CSV's 4 decimals
    assert (frame["split_provenance"] == "network measured, queue reported, prefill "
            "reported, decode reported, other derived").all()
    # the key was sent, and is written nowhere
    assert SECRET not in out.read_text() + csv.read_text() + r.stdout + r.stderr


# ---- bad input: one line, exit 2, before the run -------------------------------------------
@pytest.mark.parametrize("args,says", [
    (["--output-tokens", "4", "--max-running", "4"], "--max-running: our scheduler's"),
    (["--prompt-tokens", "64"], "--prompt-tokens with a --target"),
    (["--output-tokens", "4", "--tokenizer", "/no/such/dir"], "no tokenizer.json"),
    (["--output-tokens", "4", "--served-model", "no-such-model"], "404|HTTP 4"),
])
def test_bad_target_generation_input_is_one_line(ours, args, says):
    r = cli_here("run", "--target", f"{ours.url}/v1", "--no-save", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(says, r.stderr), r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_unreachable_target_and_target_flags_without_one_are_one_line():
    r = cli_here("run", "--target", f"http://127.0.0.1:{free_port()}/v1", "--output-tokens",
                 "4", "--no-save")
    assert r.returncode == 2 and "cannot reach it" in r.stderr, r.stderr
    r = cli_here("run", "--model", "synthetic-lm", "--api", "chat", "--no-save")
    assert r.returncode == 2 and "give its --target URL" in r.stderr, r.stderr


def test_a_tls_failure_is_one_line(ours):
    """https:// to a server that speaks plain HTTP: the handshake fails, one line, exit 2."""
    port = ours.url.rsplit(":", 1)[1]
    r = cli_here("run", "--target", f"https://127.0.0.1:{port}/v1", "--output-tokens", "4",
                 "--no-save")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "TLS" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_servers_count_is_kept_and_the_tokenizers_spread_over_the_chunks():
    assert fitted([1, 2, 1], 4) == [1, 2, 1]
    assert sum(fitted([1, 3, 2, 2], 6)) == 6 and fitted([1, 3, 2, 2], 6)[1] >= 2
    assert fitted([0, 0], 3) in ([2, 1], [1, 2])


def test_the_tokenizers_spread_never_takes_a_chunks_only_token():
    """A real llama.cpp reply: 64 chunks of one token each that a tokenizer, run over each
    chunk's text alone, counts as 66-75. The server's 64 keep one token a chunk: no chunk at
    zero (its stamp lost: the last token earlier than the last chunk came), none at two
    (a fake 0 ms gap)."""
    rng = __import__("random").Random(3)
    for _ in range(50):
        counts = [1] * 64
        for i in rng.sample(range(64), rng.randint(2, 11)):
            counts[i] += 1
        assert fitted(counts, 64) == [1] * 64
    # fewer tokens than chunks: the first and last chunk keep theirs, the stamps that make
    # TTFT and E2E
    out = fitted([3, 1, 1, 1, 3], 3)
    assert sum(out) == 3 and out[0] == 1 and out[-1] == 1
    # more tokens than chunks: every chunk one, the rest by the tokenizer's spread
    assert fitted([1, 4, 1], 5) == [1, 3, 1]


def test_the_command_lines_run_process_scrapes_the_servers_metrics(ours, tmp_path):
    """Through the CLI, whose run process is where the scraper starts its own process (a
    daemonic run process may not start a multiprocessing child: the scrape must not need
    one), and the cost of scraping is said."""
    out = tmp_path / "run.json"
    r = cli("--target", f"{ours.url}/v1", "--output-tokens", "8", "--duration", "3",
            "--rate", "10", "--min-requests", "0", "--scrape-metrics", "--json", str(out),
            "--no-save")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    series = json.loads(out.read_text())["environment"]["server_metrics"]
    assert series["failures"] == 0 and len(series["t_ns"]) >= 3, series
    assert series["scraper_cpu_s"] > 0
    assert "server metrics (" in r.stdout


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


def test_target_runs_compare_by_their_server_split(ours, tmp_path, monkeypatch):
    files, results = [], []
    for clients in (1, 3):
        cfg = RunConfig(target=f"{ours.url}/v1", output_tokens="8", requests=10,
                        concurrency=clients, warmup=1)
        result = execute_generation(cfg, force=True)
        results.append(result)
        files.append(tmp_path / f"c{clients}.json")
        files[-1].write_text(result.json_text())
    r = subprocess.run([sys.executable, "-m", "latency", "compare", *map(str, files)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "concurrency: 1 → 3" in r.stdout
    for part in ("network", "queue", "prefill", "decode", "other"):
        assert f"split: {part} (mean)" in r.stdout
    assert "tokenize (mean)" not in r.stdout  # the client's own components are not shown
    # the same on Compare Runs' generation mode: TTFT's parts are each run's split (mean and
    # around p99), the diff's rows the split's
    from streamlit.testing.v1 import AppTest

    from latency.storage.store import RunStore

    monkeypatch.setenv("LATENCY_LAB_DB", str(tmp_path / "runs.sqlite"))
    store = RunStore(tmp_path / "runs.sqlite")
    for result in results:
        store.save(result)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"),
                           default_timeout=60)
    at.query_params["cmp_kind"] = "generations (LLM)"
    at.run()
    at.switch_page("views/compare_runs.py").run()
    assert not at.exception
    parts = json.loads(at.get("plotly_chart")[2].proto.spec)
    views = [r.target_view.ttft_parts_ms() for r in results]
    for name in ("network", "queue", "prefill"):
        bar = next(t for t in parts["data"] if t["name"] == name)
        assert bar["y"] == pytest.approx([views[0]["mean"][name], views[1]["mean"][name],
                                          views[0]["p99"][name], views[1]["p99"][name]])
    assert any("a server of yours" in c.value for c in at.caption)
    figures = set(at.dataframe[1].value["figure"])
    assert "split: queue (mean)" in figures and "tokenize (mean)" not in figures
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
    r = cli_here("run", "--target", f"{ours.url}/v1", "--output-tokens", "4", "--model",
                 "tiny-lm", "--no-save")
    assert r.returncode == 2 and "--served-model tiny-lm" in r.stderr, r.stderr
    r = cli_here("run", "--target", f"{ours.url}/v1", "--output-tokens", "4",
                 "--target-protocol", "http", "--no-save")
    assert r.returncode == 2 and "--target-protocol is for one-shot" in r.stderr, r.stderr


def test_a_non_streamed_replys_account_puts_its_decode_in_decode(ours):
    """A chat reply asked without streaming: the server decoded its 12 tokens one step at a
    time, and its account says so (decode ≈ 11 steps), not "decode 0.0 ms, delivery 208 ms"
    (every token counted as delivered when the whole reply was written); the parts still add
    up to the server's time."""
    import urllib.request

    body = json.dumps({"model": "synthetic-lm", "max_tokens": 12, "stream": False,
                       "messages": [{"role": "user", "content": "tell me a story"}]}).encode()
    ask = urllib.request.Request(f"{ours.url}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(ask, timeout=60) as reply:
        account = json.loads(reply.read())["latency_lab"]
    assert account["tokens"] == 12
    assert account["decode_ms"] + account["stall_ms"] >= 11 * 1.0, account  # step_ms 1.0
    assert account["delivery_ms"] < account["decode_ms"], account
    parts = sum(account[k] for k in ("queue_ms", "tokenize_ms", "prefill_ms",
                                     "prefill_stall_ms", "decode_ms", "stall_ms",
                                     "detokenize_ms", "delivery_ms"))
    assert parts == pytest.approx(account["server_ms"], abs=0.01), account
