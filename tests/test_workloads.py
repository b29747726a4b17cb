"""Workloads people bring: conversations from a local file (ShareGPT's and OpenAI's shapes),
each request as long as its conversation's reply (``--reply-lengths``), and prompts that
share prefixes (``--shared-prefix N:TOKENS``) — through the command line, with the lengths
each request had read back from its own record.

(The prefix cache these show is tested against a real llama.cpp server in
tests/test_llama_server.py.)"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from latency.analysis.gen_result import GenResult
from tests.cli_support import cli_here

#: a ShareGPT file as the dataset ships it (a JSON array), with what real ones hold too: a
#: conversation the assistant opens, one with no turns at all, and an OpenAI-shaped one
SHAREGPT = [
    {"id": "a", "conversations": [
        {"from": "human", "value": "tell me about the weather in spring and the rain"},
        {"from": "gpt", "value": "spring brings rain and wind and warm days with flowers in "
                                 "the fields and birds"},
        {"from": "human", "value": "and summer"}, {"from": "gpt", "value": "hot"}]},
    {"id": "b", "conversations": [
        {"from": "gpt", "value": "hello"},
        {"from": "human", "value": "write a short letter to my friend"},
        {"from": "gpt", "value": "dear friend I hope you are well"}]},
    {"id": "c", "conversations": []},
    {"messages": [{"role": "system", "content": "be brief"},
                  {"role": "user", "content": "a recipe for bread please"},
                  {"role": "assistant", "content": "flour water salt yeast knead rest bake"}]},
]
#: (prompt words, reply words) of the three usable conversations, in order: synthetic-lm's
#: tokenizer makes a token of each word
EXPECTED = [(10, 15), (7, 7), (5, 7)]


def _run(tmp_path, *args: str) -> GenResult:
    out = tmp_path / "run.json"
    r = cli_here("run", "--model", "synthetic-lm", "--concurrency", "2", "--warmup", "0",
                 "--no-save", "--quiet", "--json", str(out), "--force", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return GenResult.from_dict(json.loads(out.read_text()))


def test_sharegpt_conversations_send_their_first_user_turn_and_reply_lengths(tmp_path):
    data = tmp_path / "sharegpt.json"
    data.write_text(json.dumps(SHAREGPT))
    result = _run(tmp_path, "--prompts", str(data), "--reply-lengths", "--requests", "30")
    rows = result.rows
    got = list(zip(rows["prompt_tokens"].tolist(), rows["output_tokens"].tolist()))
    # the three conversations in turn: ten requests each (the rows are in the order the
    # requests ended, which two clients interleave)
    assert Counter(got) == {pair: 10 for pair in EXPECTED}, got
    assert "outputs as long as the conversations' replies" in repr(result)
    # without --reply-lengths, the drawn lengths
    drawn = _run(tmp_path, "--prompts", str(data), "--output-tokens", "4", "--requests", "30")
    assert set(drawn.rows["output_tokens"].tolist()) == {4}


def test_openai_messages_one_a_line_are_conversations_too(tmp_path):
    data = tmp_path / "chats.jsonl"
    data.write_text("\n".join(json.dumps(c) for c in SHAREGPT if "messages" in c) + "\n")
    result = _run(tmp_path, "--prompts", str(data), "--reply-lengths", "--requests", "30")
    assert set(zip(result.rows["prompt_tokens"].tolist(),
                   result.rows["output_tokens"].tolist())) == {EXPECTED[2]}


def test_shared_prefixes_come_before_each_prompt_in_turn(tmp_path):
    """--shared-prefix 3:40 before 20-token prompts: every prompt is 60 tokens; request i
    starts with prefix i mod 3, so requests three apart share their first 40 tokens and
    neighbours do not."""
    from latency.core.config import RunConfig
    from latency.pipelines.gen_workload import build_work
    from latency.pipelines.registry import source

    result = _run(tmp_path, "--prompt-tokens", "20", "--shared-prefix", "3:40",
                  "--requests", "30")
    assert set(result.rows["prompt_tokens"].tolist()) == {60}
    assert "after 3 shared prefixes of 40 tokens" in repr(result)
    # the work itself: which prompts share which prefix
    import torch

    pipe = source("synthetic-lm").build(torch.device("cpu"), torch.float32, {})
    work = build_work(pipe, RunConfig(model="synthetic-lm", prompt_tokens="20",
                                      shared_prefix="3:40"), 9)
    heads = [pipe.tokenize(str(p))[:40] for p, _ in work]
    assert heads[0] == heads[3] == heads[6] and heads[1] == heads[4]
    assert heads[0] != heads[1] != heads[2]


@pytest.mark.parametrize("content, args, says", [
    ("[1, 2]", (), "each item must be a prompt"),
    ('{"a": 1}', (), "a .json file must hold an array"),
    ('[{"conversations": [{"from": "gpt", "value": "hi"}]}]', (), "no conversation in it"),
    ('["just a prompt"]', ("--reply-lengths",), "no conversation in --prompts has a reply"),
    ('["x"]', ("--shared-prefix", "3"), "--shared-prefix must be N:TOKENS"),
    ('["x"]', ("--shared-prefix", "0:10"), "--shared-prefix must be N:TOKENS"),
    ('["x"]', ("--shared-prefix", "99999:10"), "N must be from 1 to 4,096"),
])
def test_bad_workloads_are_one_line_before_anything_runs(tmp_path, content, args, says):
    data = tmp_path / "prompts.json"
    data.write_text(content)
    r = cli_here("run", "--model", "synthetic-lm", "--prompts", str(data), "--requests", "3",
                 "--no-save", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_reply_lengths_need_a_prompts_file(tmp_path):
    r = cli_here("run", "--model", "synthetic-lm", "--reply-lengths", "--requests", "3",
                 "--no-save")
    assert r.returncode == 2 and "--reply-lengths takes each conversation's reply" in r.stderr


def test_a_shared_prefix_counts_towards_the_context(tmp_path):
    r = cli_here("run", "--model", "synthetic-lm", "--prompt-tokens", "100",
                 "--shared-prefix", "1:4000", "--requests", "3", "--no-save")
    assert r.returncode == 2 and "after --shared-prefix 1:4000" in r.stderr, r.stderr


def test_chat_sessions_carry_the_conversation_so_far_turn_by_turn(tmp_path):
    """--turns 3: each client's turn k sends every earlier message and the reply it got, then
    a new 40-token message — on synthetic-lm (a token a word) turn k's prompt is exactly
    40 + (k − 1)·(16 + 40) tokens; its TTFT grows with it (no prefix cache here)."""
    result = _run(tmp_path, "--prompt-tokens", "40", "--output-tokens", "16", "--turns", "3",
                  "--requests", "36")
    frame = result.requests_frame()
    measured = frame[~frame["warmup"]]
    by_turn = measured.groupby("turn")["prompt_tokens"].agg(["min", "max", "count"])
    assert list(by_turn.index) == [1, 2, 3]
    assert list(by_turn["min"]) == list(by_turn["max"]) == [40, 96, 152], by_turn
    assert list(by_turn["count"]) == [12, 12, 12]
    text = repr(result)
    assert "chat sessions of 3 turns, each new message prompts 40 tokens" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("TTFT by turn"))
    assert "1: p50" in line and "prompt 152 tokens (n=12)" in line, line


@pytest.mark.parametrize("args, says", [
    (("--turns", "2", "--rate", "5"), "--turns needs a closed loop"),
    (("--turns", "2", "--shared-prefix", "1:10"), "--turns and --shared-prefix: choose one"),
    (("--turns", "0"), "--turns must be"),
    (("--turns", "64", "--prompt-tokens", "100"), "over --turns 64"),
])
def test_bad_sessions_are_one_line(args, says):
    r = cli_here("run", "--model", "synthetic-lm", "--requests", "3", "--no-save", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
