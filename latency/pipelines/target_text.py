"""The prompts a generation from a --target sends when you give no ``--prompts``: the sample
corpus's held-out prompts (readable text: weather reports, recipes, stories, letters), whole,
or cut to ``--prompt-tokens`` at the served model's token boundaries (``--tokenizer``).

Why an object with a pipeline's text methods: ``gen_workload.build_work`` draws prompts from a
pipeline's ``sample_inputs`` and cuts them with its ``tokenize``/``detokenize``; a server of
yours has no pipeline here, so this stands in for its text side — its tokenizer, if you gave
it — and the same code makes the workload.
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

from latency.core.errors import ConfigError

#: where the sample prompts come from (by name, as the registry loads the samples)
CORPUS = "sample_models.lm_corpus"


class TextTokenizer(Protocol):
    """A served model's tokenizer: a local one (``TokenCounter``) or the server's own
    (``execution.remote_tokenizer``)."""

    def ids(self, text: str) -> list[int]: ...

    def text(self, ids: list[int]) -> str: ...


class TargetText:
    """The text side of a served model we do not hold: sample prompts, and (with a
    tokenizer) tokenize/detokenize to cut them to drawn lengths."""

    def __init__(self, counter: TextTokenizer | None) -> None:
        self.counter = counter

    def sample_inputs(self, n: int, seed: int) -> list[str]:
        try:
            corpus = importlib.import_module(CORPUS)
        except ImportError as exc:  # an install without the samples
            raise ConfigError(f"no sample prompts ({CORPUS} does not import: {exc}): give "
                              "--prompts FILE") from None
        return list(corpus.prompts(n, seed))

    def tokenize(self, text: str) -> list[int]:
        if self.counter is None:
            raise ConfigError("counting the served model's tokens (--prompt-tokens, "
                              "--shared-prefix, --reply-lengths) needs its --tokenizer DIR "
                              "or --tokenizer server")
        return self.counter.ids(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        assert self.counter is not None
        return self.counter.text(list(ids))
