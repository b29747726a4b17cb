"""Counting with the server's own tokenizer (``--tokenizer server``): against our own server
in its own process (vLLM's /tokenize and /detokenize shapes: each reply counted, prompts cut
to --prompt-tokens), and llama.cpp's and TGI's documented answers — pieces and offsets that
give each token to the chunk it came in — replayed by a loopback server; an endpoint that
answers none of them is one line before the run."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd
import pytest

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.gen_engine import execute_generation
from latency.execution.openai_probe import TargetInfo
from latency.execution.remote_tokenizer import RemoteTokenCounter, probe_tokenizer, server_root
from latency.serve.http_server import ServerProcess
from tests.conftest import QuietHandler, loopback_server
from tests.target_support import cli


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    cfg = RunConfig(model="tiny-lm", max_running=4).checked()  # a real BPE tokenizer
    proc = ServerProcess(cfg).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_our_servers_tokenizer_counts_each_reply_and_cuts_the_prompts(ours, tmp_path):
    out = tmp_path / "run.json"
    r = cli("--target", f"{ours.url}/v1", "--api", "completions", "--tokenizer", "server",
            "--prompt-tokens", "40", "--min-requests", "10",
            "--output-tokens", "12", "--requests", "10", "--concurrency", "2", "--warmup", "1",
            "--json", str(out), "--csv", str(tmp_path / "run.csv"), "--no-save")
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["environment"]["target"]["tokenizer"] == "the server's /tokenize (vllm's)"
    # the CSV keeps both counts of each reply side by side
    frame = pd.read_csv(tmp_path / "run.csv")
    assert (frame["client_counted_tokens"] - frame["server_output_tokens"]).abs().max() <= 2
    reports = d["reports"]["columns"]
    rows = d["requests"]["columns"]
    measured = [i for i, w in enumerate(rows["warmup"]) if not w]
    # every reply counted by the server's tokenizer, beside the server's own usage count
    counted = [reports["counted_tokens"][i] for i in measured]
    told = [reports["output_tokens"][i] for i in measured]
    # (re-tokenized text can merge differently where the reply's tokens meet: by a token)
    assert all(abs(c - t) <= 2 for c, t in zip(counted, told, strict=True)), (counted, told)
    assert sum(c == t for c, t in zip(counted, told, strict=True)) >= len(told) // 2
    # the prompts were cut at the server's token boundaries (its usage says their length;
    # the completions API: a chat's template would add tokens of its own)
    prompts = [reports["prompt_tokens"][i] for i in measured]
    assert all(abs(p - 40) <= 2 for p in prompts), prompts


def test_our_server_answers_vllms_tokenize_shape(ours):
    counter = probe_tokenizer(f"{ours.url}/v1", "tiny-lm", {})
    assert counter.shape == "vllm" and counter.root == ours.url
    ids = counter.ids("the weather today is sunny")
    assert ids and counter.text(ids) == "the weather today is sunny"
    # vLLM says only the ids: a reply's count, not each chunk's
    assert counter.per_chunk(["the wea", "ther"]) is None
    assert counter.count("the weather") == len(counter.ids("the weather"))


# the documented answers, for the text "Hello world" streamed as "Hel" + "lo world"
LLAMACPP = {"tokens": [{"id": 15043, "piece": "Hello"}, {"id": 3186, "piece": " world"}]}
LLAMACPP_BYTES = {"tokens": [{"id": 1, "piece": "h"}, {"id": 2, "piece": [195]},
                             {"id": 3, "piece": [169]}, {"id": 4, "piece": " x"}]}
TGI = [{"id": 15043, "text": "Hello", "start": 0, "stop": 5},
       {"id": 3186, "text": " world", "start": 5, "stop": 11}]


def serving(answers: dict[str, object]):
    """A loopback server answering POST {path} with the JSON given (404 elsewhere)."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            if self.path not in answers:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = json.dumps(answers[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return loopback_server(Handler, path="/v1")


@pytest.mark.parametrize("answer,shape", [(LLAMACPP, "llamacpp"), (TGI, "tgi")])
def test_pieces_and_offsets_give_each_token_to_the_chunk_it_came_in(answer, shape):
    with serving({"/tokenize": answer}) as base:
        counter = probe_tokenizer(base, "m", {})
        assert counter.shape == shape  # vLLM's shape refused first (no list of ids)
        assert counter.per_chunk(["Hel", "lo world"]) == [1, 1]
        assert counter.per_chunk(["Hello", " world"]) == [1, 1]
        assert counter.per_chunk(["Hello world", ""]) == [2, 0]


def test_a_piece_given_as_bytes_starts_at_its_character():
    with serving({"/tokenize": LLAMACPP_BYTES}) as base:
        counter = RemoteTokenCounter(server_root(base), "m", "llamacpp", {})
        # "hé x": "é" is two bytes, given as two byte pieces; both start at character 1
        ids, starts = counter.tokens("hé x")
        assert ids == [1, 2, 3, 4] and starts == [0, 1, 1, 2]
        assert counter.per_chunk(["h", "é", " x"]) == [1, 2, 1]


def test_tgi_cannot_cut_prompts_and_says_so():
    with serving({"/tokenize": TGI}) as base:
        counter = RemoteTokenCounter(server_root(base), "m", "tgi", {})
        with pytest.raises(ConfigError, match="no /detokenize"):
            counter.text([1, 2])


def test_a_server_without_a_tokenize_endpoint_is_one_line_before_the_run():
    with serving({}) as base:
        with pytest.raises(ConfigError, match="answers in none of vLLM's, llama.cpp's or TGI"):
            probe_tokenizer(base, "m", {})
        # the run asks before it measures anything (the server probed as streaming already)
        info = TargetInfo(base=base, api="chat", url=f"{base}/chat/completions", model="m",
                          forces_length=True, usage=True, rtt_floor_ns=100_000)
        cfg = RunConfig(target=base, tokenizer="server", output_tokens="4", requests=2)
        with pytest.raises(ConfigError, match="--tokenizer server: .*none of vLLM's"):
            execute_generation(cfg, target=info, force=True)
