"""The prompts and output lengths a generation run sends, made before it measures anything.

``--prompts FILE``: your prompts as they are (a JSON string or an object with ``"prompt"`` a
line of a ``.jsonl`` file or an element of a ``.json`` array, or a line of a text file); their
lengths are whatever the tokenizer makes of them. A conversation is taken as the peers'
datasets give them — ShareGPT's ``{"conversations": [{"from": "human", "value": …}, {"from":
"gpt", …}]}`` or OpenAI's ``{"messages": [{"role": "user", "content": …}, …]}``: its first user
turn is the prompt, and with ``--reply-lengths`` the reply after it sets how many tokens the
request generates (vLLM's ShareGPT benchmark does the same); one without a user turn is
left out. ``--prompt-tokens SPEC``: prompts of drawn lengths, cut from the pipeline's own
sample text at token boundaries (the tokenizer's, before the run), then sent as text — so the
run's tokenizer really tokenizes them, and a length can differ by a token or two where a cut
re-tokenizes differently (each request records the length it had). Output lengths are drawn
from ``--output-tokens`` (default 64). All draws come from the run's seed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from latency.core.config import RunConfig
from latency.core.errors import ConfigError, PipelineError, error_text
from latency.core.lengths import LengthSpec, shared_prefix_of
from latency.pipelines.generative import GenerativePipeline
from latency.pipelines.inputs import read_inputs
from latency.pipelines.target_text import TargetText

#: what prompts are drawn from and cut with: a generative pipeline, or a target's text side
TextSource = GenerativePipeline | TargetText

#: the most distinct work items a run makes; a longer run cycles through them
MAX_WORK = 4096


NO_REPLIES = ("--reply-lengths: no conversation in --prompts has a reply after its first "
              "user turn")
#: who speaks in a conversation, by the names ShareGPT's ("from") and OpenAI's ("role") use
USER_ROLES = ("human", "user")
REPLY_ROLES = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


def prompt_texts(value: Any) -> tuple[str, str | None] | None:
    """One ``--prompts`` item as (prompt text, the reply after it or None): a string, an
    object's ``"prompt"``, or a conversation's first user turn and its reply (None: a
    conversation with no user turn, left out)."""
    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
        return value["prompt"], None
    if isinstance(value, str):
        return value, None
    turns = value.get("conversations", value.get("messages")) \
        if isinstance(value, dict) else None
    if isinstance(turns, list):
        spoken = [(str(t.get("from", t.get("role", ""))).lower(),
                   t.get("value", t.get("content"))) for t in turns if isinstance(t, dict)]
        for i, (who, text) in enumerate(spoken):
            if who in USER_ROLES and isinstance(text, str) and text.strip():
                after = spoken[i + 1] if i + 1 < len(spoken) else None
                reply = after[1] if after and after[0] in REPLY_ROLES \
                    and isinstance(after[1], str) else None
                return text, reply
        return None
    raise ConfigError("--prompts: each item must be a prompt: a JSON string, an object with "
                      "a \"prompt\" string, or a conversation (\"conversations\" or "
                      f"\"messages\") (got {type(value).__name__})")


def conversations_of(where: str, order: str = "in-order", seed: int = 0
                     ) -> tuple[list[str], list[str | None]]:
    """The prompts of a ``--prompts`` file and the reply after each (None where it has
    none); ConfigError (one line) for an item that is no prompt, or a file without one."""
    return _conversations(read_inputs(where, order, seed, "--prompts"), where)


def _conversations(items: list[Any], where: str) -> tuple[list[str], list[str | None]]:
    turns = [t for t in (prompt_texts(v) for v in items) if t is not None]
    if not turns:
        raise ConfigError(f"--prompts {where}: no conversation in it has a user turn")
    return [p for p, _ in turns], [r for _, r in turns]


def prompts_check(reply_lengths: bool, where: str) -> Callable[[list[Any]], None]:
    """What ``check_inputs`` checks of a ``--prompts`` file's items on the parse it makes:
    each a prompt or a conversation, one at least with a user turn, and — for
    ``--reply-lengths`` — one with a reply (named apart: a check is remembered by name)."""
    def prompts(items: list[Any]) -> None:
        _conversations(items, where)

    def prompts_with_replies(items: list[Any]) -> None:
        if not any(_conversations(items, where)[1]):
            raise ConfigError(NO_REPLIES)
    return prompts_with_replies if reply_lengths else prompts


def build_work(pipeline: TextSource, config: RunConfig, count: int,
               prompts: list[str] | None = None) -> list[tuple[object, int]]:
    """``min(count, MAX_WORK)`` (prompt text, tokens to generate) pairs (see the docstring);
    ``prompts``: texts given directly (the Python API's ``prompts=[...]``)."""
    n = max(1, min(count, MAX_WORK))
    rng = np.random.default_rng(config.seed)
    outputs = [int(k) for k in config.output_tokens.draw(rng, n)]
    replies: list[str | None] = []
    if prompts:
        prompts = list(prompts)
    elif config.prompts:
        prompts, replies = conversations_of(config.prompts, config.input_order, config.seed)
    else:
        base = pipeline.sample_inputs(min(n, 256), config.seed)
        prompts = [str(p) for p in base]
        if config.prompt_tokens is not None:
            prompts = _cut(pipeline, prompts, config.prompt_tokens, rng, n)
    if config.reply_lengths:
        outputs = _reply_lengths(pipeline, replies, outputs, n)
    if config.shared_prefix:
        heads, tokens = shared_prefix_of(config.shared_prefix)
        prefixes = _cut(pipeline, [str(p) for p in pipeline.sample_inputs(256, config.seed + 1)],
                        LengthSpec("fixed", tokens), rng, heads)
        prompts = [f"{prefixes[i % heads]}\n\n{prompts[i % len(prompts)]}" for i in range(n)]
    return [(prompts[i % len(prompts)], outputs[i]) for i in range(n)]


def _reply_lengths(pipeline: TextSource, replies: list[str | None], drawn: list[int],
                   n: int) -> list[int]:
    """Each request's output length: its conversation's reply in tokens (the drawn length
    where a conversation has no reply)."""
    if not any(replies):
        raise ConfigError(NO_REPLIES)
    out = []
    for i in range(n):
        reply = replies[i % len(replies)]
        try:
            k = len(pipeline.tokenize(reply)) if reply else drawn[i]
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's tokenizer, in one line
            raise PipelineError(f"tokenize raised {error_text(exc)}") from exc
        out.append(max(1, k))
    return out


def _cut(pipeline: TextSource, texts: list[str], spec: LengthSpec,
         rng: np.random.Generator, n: int) -> list[str]:
    """``n`` prompts of drawn token lengths, windows of the sample texts' tokens."""
    try:
        ids: list[int] = []
        for text in texts:
            ids += list(pipeline.tokenize(text))
            if len(ids) >= 4 * spec.high:
                break
    except Exception as exc:  # noqa: BLE001 - the user's tokenizer, in one line
        raise PipelineError(f"tokenize raised {error_text(exc)}") from exc
    if not ids:
        raise PipelineError("the sample prompts have no tokens")
    while len(ids) < spec.high:
        ids += ids
    lengths = spec.draw(rng, n)
    starts = rng.integers(0, max(len(ids) - int(lengths.max()), 0) + 1, size=n)
    return [pipeline.detokenize(ids[s:s + k])
            for s, k in zip(starts.tolist(), lengths.tolist(), strict=True)]
