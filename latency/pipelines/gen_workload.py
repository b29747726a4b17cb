"""The prompts and output lengths a generation run sends, made before it measures anything.

``--prompts FILE``: your prompts as they are (a JSON string or an object with ``"prompt"`` a
line of a ``.jsonl`` file, or a line of a text file); their lengths are whatever the tokenizer
makes of them. ``--prompt-tokens SPEC``: prompts of drawn lengths, cut from the pipeline's own
sample text at token boundaries (the tokenizer's, before the run), then sent as text — so the
run's tokenizer really tokenizes them, and a length can differ by a token or two where a cut
re-tokenizes differently (each request records the length it had). Output lengths are drawn
from ``--output-tokens`` (default 64). All draws come from the run's seed.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.core.config import RunConfig
from latency.core.errors import ConfigError, PipelineError, error_text
from latency.core.lengths import LengthSpec
from latency.pipelines.generative import GenerativePipeline
from latency.pipelines.inputs import read_inputs
from latency.pipelines.target_text import TargetText

#: what prompts are drawn from and cut with: a generative pipeline, or a target's text side
TextSource = GenerativePipeline | TargetText

#: the most distinct work items a run makes; a longer run cycles through them
MAX_WORK = 4096


def prompt_texts(value: Any) -> str:
    """One ``--prompts`` line as prompt text: a string, or an object's ``"prompt"``."""
    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
        return value["prompt"]
    if isinstance(value, str):
        return value
    raise ConfigError("--prompts: each line must be a prompt: a JSON string or an object "
                      f"with a \"prompt\" string (got {type(value).__name__})")


def build_work(pipeline: TextSource, config: RunConfig, count: int,
               prompts: list[str] | None = None) -> list[tuple[object, int]]:
    """``min(count, MAX_WORK)`` (prompt text, tokens to generate) pairs (see the docstring);
    ``prompts``: texts given directly (the Python API's ``prompts=[...]``)."""
    n = max(1, min(count, MAX_WORK))
    rng = np.random.default_rng(config.seed)
    outputs = config.output_tokens.draw(rng, n)
    if prompts:
        prompts = list(prompts)
    elif config.prompts:
        prompts = [prompt_texts(v) for v in read_inputs(config.prompts, config.input_order,
                                                        config.seed, "--prompts")]
    else:
        base = pipeline.sample_inputs(min(n, 256), config.seed)
        prompts = [str(p) for p in base]
        if config.prompt_tokens is not None:
            prompts = _cut(pipeline, prompts, config.prompt_tokens, rng, n)
    return [(prompts[i % len(prompts)], int(outputs[i])) for i in range(n)]


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
