"""Counting a streamed reply's tokens on the client, with the server's own tokenizer
(``--tokenizer DIR``).

Why the client counts at all: an OpenAI-compatible stream sends text, and a chunk may carry
several tokens (speculative decoding, a server that coalesces its writes) or none (a role, a
piece of a multi-byte character). Counting one token per chunk — what most benchmarks do —
turns a gap between chunks into a gap between tokens. With the tokenizer, the whole reply is
tokenized once (with offsets) and each token is given to the chunk its first character came
in, so every token gets the stamp of the chunk that delivered it, and the inter-token gaps
are per token.

The directory is read as a Hugging Face tokenizer: its ``tokenizer.json`` with the
``tokenizers`` library (what ``transformers`` loads for a fast tokenizer); a directory saved
without one (a SentencePiece ``tokenizer.model``, a BPE's ``vocab.json`` and ``merges.txt``)
through ``transformers``, which converts it to the same fast tokenizer, when installed.
Re-tokenizing generated text can differ from the server's own count by a token where a
boundary merges differently; the run reports the client/server difference per request.
"""
from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from typing import Any

from latency.core.errors import ConfigError


class TokenCounter:
    """The tokens of texts, and of each chunk of a streamed reply."""

    def __init__(self, directory: str | Path) -> None:
        path = Path(directory).expanduser()
        file = path / "tokenizer.json" if path.is_dir() else path
        if file.is_file():
            self._tok: Any = _from_file(directory, file)
            self.source = str(file)
        elif path.is_dir() and any((path / f).is_file() for f in SLOW_FILES):
            self._tok = _from_transformers(directory, path)
            self.source = f"{path} (transformers)"
        else:
            raise ConfigError(f"--tokenizer {directory}: no tokenizer.json there, nor a "
                              f"tokenizer transformers loads ({', '.join(SLOW_FILES)}): give "
                              "the directory of a Hugging Face tokenizer, or its "
                              "tokenizer.json")

    def ids(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def text(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self.ids(text))

    def per_chunk(self, chunks: list[str]) -> list[int]:
        """How many tokens of the reply ``"".join(chunks)`` each chunk delivered: a token
        belongs to the chunk holding its first character (sums to the reply's count)."""
        text = "".join(chunks)
        if not text:
            return [0] * len(chunks)
        enc = self._tok.encode(text, add_special_tokens=False)
        ends, at = [], 0
        for c in chunks:
            at += len(c)
            ends.append(at)
        out = [0] * len(chunks)
        for start, _ in enc.offsets:
            out[min(bisect_right(ends, start), len(chunks) - 1)] += 1
        # a token the tokenizer placed in an empty chunk's position stays where it starts
        return out



#: the files of a tokenizer saved without its tokenizer.json (a "slow" one: SentencePiece's
#: model, or a BPE's vocabulary and merges), which transformers converts to a fast one
SLOW_FILES = ("tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
              "merges.txt")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"


def _from_file(directory: str | Path, file: Path) -> Any:
    """A ``tokenizers.Tokenizer`` from a tokenizer.json (ConfigError: one line)."""
    try:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(file))
    except Exception as exc:  # noqa: BLE001 - a file that does not load, in one line
        raise ConfigError(f"--tokenizer {directory}: {file.name} does not load "
                          f"({_first_line(exc)})") from None


def _from_transformers(directory: str | Path, path: Path) -> Any:
    """The fast tokenizer transformers makes of a directory without a tokenizer.json (from
    this disk only), as a ``tokenizers.Tokenizer`` — the one the offsets come from."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ConfigError(f"--tokenizer {directory}: no tokenizer.json there, and reading "
                          "its other tokenizer files needs transformers (pip install -r "
                          "requirements-hf.txt)") from None
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - a directory that does not load, in one line
        raise ConfigError(f"--tokenizer {directory}: transformers could not load it "
                          f"({_first_line(exc)})") from None
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise ConfigError(f"--tokenizer {directory}: transformers loaded only a slow "
                          f"tokenizer ({type(tok).__name__}), which gives no offsets: save "
                          "its tokenizer.json (tokenizer.save_pretrained with a fast one)")
    return backend
