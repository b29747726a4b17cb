"""A generation from a real third-party OpenAI-compatible server: ``transformers serve`` on a
random-weight Llama with a BPE tokenizer and a chat template, built here (nothing is
downloaded), measured through the CLI as a user would."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_extra
from tests.health_check import wait_healthy
from tests.target_support import cli, free_port
from tests.tiny_llama import build_tiny_llama

REASON = "transformers serve is the third-party OpenAI-compatible server (requirements-hf.txt)"


# ---- transformers serve: a real third-party OpenAI-compatible server -------------------------
@pytest.fixture(scope="module")
def tserve(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """`transformers serve` on a random-weight 2-layer Llama with a BPE tokenizer and a chat
    template, built here (nothing is downloaded)."""
    transformers = require_extra("transformers", REASON)
    require_extra("fastapi", REASON)
    require_extra("uvicorn", REASON)
    out = build_tiny_llama(
        tmp_path_factory.mktemp("tserve-llama"), transformers,
        ["the weather today is sunny with a light breeze from the west",
         "a recipe for bread needs flour, water, salt and a little time",
         "once upon a time a cat lived in a cottage near the sea"] * 30,
        max_positions=1024,
        chat_template=("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                       "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"))
    port = free_port()
    # its console script's own entry, run by this interpreter (wherever pip put the script)
    log = (out / "serve.log").open("w")  # a file: a pipe nobody reads could fill and block it
    launch = [sys.executable, "-c", "import sys; from transformers.cli.transformers import "
              "main; sys.argv[0] = 'transformers'; sys.exit(main())"]
    proc = subprocess.Popen(
        [*launch, "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
         str(out)], stdout=subprocess.DEVNULL, stderr=log, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(f"{base}/health", proc, 120):
            log.flush()
            err = (out / "serve.log").read_text(errors="replace")
            pytest.fail(f"transformers serve did not start: {err[-1500:]}")
        yield f"{base}/v1", out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_transformers_serve_streams_are_measured_per_token_with_its_tokenizer(tserve, tmp_path):
    url, model = tserve
    out = tmp_path / "run.json"
    r = cli("--target", url, "--api", "chat", "--tokenizer", str(model), "--output-tokens", "6",
            "--requests", "8", "--min-requests", "5", "--concurrency", "2", "--warmup", "1",
            "--json", str(out),
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
            "--min-requests", "6", "--concurrency", "2", "--warmup", "1", "--no-save")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    assert "(completions)" in r.stdout
    assert "gaps: per chunk (tokens counted by chunks)" in r.stdout
