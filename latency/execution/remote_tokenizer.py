"""Counting a reply's tokens with the server's own tokenizer, over HTTP (``--tokenizer
server``): for a server of yours whose tokenizer you do not have on the client.

Three servers answer a tokenize request, each in its own shape (their documentation's):

    vLLM       POST /tokenize {"model", "prompt", "add_special_tokens": false}
               → {"tokens": [ids], "count": n, "max_model_len": m};
               POST /detokenize {"model", "tokens"} → {"prompt": text}
    llama.cpp  POST /tokenize {"content", "add_special": false, "with_pieces": true}
               → {"tokens": [{"id", "piece"}]} (a piece is its text, or its bytes when it
               is not whole UTF-8); POST /detokenize {"tokens"} → {"content": text}
    TGI        POST /tokenize {"inputs"} → [{"id", "text", "start", "stop"}] (no detokenize)

``probe_tokenizer`` tries them in that order at the server's root (once, before the run: one
line and exit 2 when none answers). A reply's tokens are counted once, when its stream has
ended, off the client's loop (as a local tokenizer's are): one small request a reply added to
the server's load — a local ``--tokenizer DIR`` adds none. Where the server says which
characters each token covers (llama.cpp's pieces, TGI's offsets) every token is given to the
chunk its first character came in, as with a local tokenizer, so inter-token gaps are per
token; vLLM's says only the ids, so its count is the reply's alone (vLLM counts each chunk
itself: ``continuous_usage_stats``, which the run asks for first). Prompts are cut to
``--prompt-tokens`` where the server also detokenizes (vLLM, llama.cpp).
"""
from __future__ import annotations

import json
from bisect import bisect_right
from typing import Any
from urllib.parse import urlsplit

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.openai_probe import TargetInfo, _exchange, api_key, auth_headers
from latency.pipelines.token_counter import TokenCounter

#: ``--tokenizer`` naming the server's own tokenize endpoint
SERVER = "server"
SHAPES = ("vllm", "llamacpp", "tgi")
#: why --prompt-tokens cannot use a server that does not detokenize
NO_DETOKENIZE = ("--prompt-tokens cuts prompts at the served model's tokens: TGI's server has "
                 "no /detokenize (give --tokenizer DIR)")
#: the longest text sent to be tokenized (characters): a reply is bounded by its tokens
MAX_TEXT = 4 << 20
#: a token's text, when llama.cpp gives its bytes, is at most this long
MAX_PIECE = 256


class RemoteTokenCounter:
    """The served model's tokenizer behind the server's tokenize endpoint (module
    docstring); the same methods as ``pipelines.token_counter.TokenCounter``."""

    def __init__(self, root: str, model: str, shape: str, headers: dict[str, str]) -> None:
        if shape not in SHAPES:
            raise ValueError(f"unknown tokenize shape {shape!r}")
        self.root, self.model, self.shape, self.headers = root, model, shape, headers
        self.source = f"the server's /tokenize ({shape}'s)"

    # ---- the endpoint -------------------------------------------------------------------
    def _post(self, route: str, body: dict[str, Any]) -> Any:
        status, _, data, _ = _exchange(f"{self.root}{route}", "POST",
                                       {"Content-Type": "application/json", **self.headers},
                                       json.dumps(body).encode())
        if status != 200:
            raise ConfigError(f"the server's {route} answered HTTP {status}")
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise ConfigError(f"the server's {route} did not answer JSON") from None

    def tokens(self, text: str) -> tuple[list[int], list[int] | None]:
        """The ids of ``text`` and, where the server says it, the character each starts at."""
        if len(text) > MAX_TEXT:
            raise ConfigError(f"a text of {len(text):,} characters is too long to tokenize")
        if self.shape == "vllm":
            got = self._post("/tokenize", {"model": self.model, "prompt": text,
                                           "add_special_tokens": False})
            return _ids(got.get("tokens") if isinstance(got, dict) else None), None
        if self.shape == "llamacpp":
            got = self._post("/tokenize", {"content": text, "add_special": False,
                                           "with_pieces": True})
            return _pieces(got.get("tokens") if isinstance(got, dict) else None, text)
        got = self._post("/tokenize", {"inputs": text})
        return _offsets(got)

    # ---- TokenCounter's methods ---------------------------------------------------------
    def ids(self, text: str) -> list[int]:
        return self.tokens(text)[0]

    def count(self, text: str) -> int:
        return len(self.ids(text))

    @property
    def detokenizes(self) -> bool:
        """Whether the server turns tokens back into text (``--prompt-tokens`` needs it)."""
        return self.shape != "tgi"

    def text(self, ids: list[int]) -> str:
        if not self.detokenizes:
            raise ConfigError(NO_DETOKENIZE)
        if self.shape == "vllm":
            got = self._post("/detokenize", {"model": self.model, "tokens": list(ids)})
            key = "prompt"
        else:
            got = self._post("/detokenize", {"tokens": list(ids)})
            key = "content"
        value = got.get(key) if isinstance(got, dict) else None
        if not isinstance(value, str):
            raise ConfigError(f"the server's /detokenize answered without its {key!r}")
        return value

    def per_chunk(self, chunks: list[str]) -> list[int] | None:
        """How many tokens each chunk of the reply delivered (a token belongs to the chunk
        holding its first character); None where the server says only the ids (the reply's
        count is then ``count``)."""
        text = "".join(chunks)
        if not text:
            return [0] * len(chunks)
        ids, starts = self.tokens(text)
        if starts is None:
            return None
        ends, at = [], 0
        for c in chunks:
            at += len(c)
            ends.append(at)
        out = [0] * len(chunks)
        for start in starts:
            out[min(bisect_right(ends, start), len(chunks) - 1)] += 1
        return out



def server_root(base: str) -> str:
    """The server's root from its API base (``http://host:8000/v1`` → ``http://host:8000``):
    where vLLM, llama.cpp and TGI serve their tokenize endpoints."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return f"{parts.scheme}://{parts.netloc}{path}"


TextCounter = TokenCounter | RemoteTokenCounter


def target_counter(config: RunConfig, target: TargetInfo) -> TextCounter | None:
    """The counter ``--tokenizer`` asks for in a run against ``target``: the server's
    (``server``, probed now: one line when it has none), a local directory's, or none. Made
    before the run, so what cannot count — or cut — is one line then: with
    ``--prompt-tokens``, prompts will be cut at the counter's tokens, so a server that cannot
    detokenize is refused now, not when the run builds its prompts."""
    if config.tokenizer is None:
        return None
    if config.tokenizer != SERVER:
        return TokenCounter(config.tokenizer)
    counter = probe_tokenizer(target.base, target.model,
                              auth_headers(api_key(config.api_key_env)))
    if config.prompt_tokens and not counter.detokenizes:
        raise ConfigError(NO_DETOKENIZE)
    return counter


def probe_tokenizer(base: str, model: str, headers: dict[str, str]) -> RemoteTokenCounter:
    """The server's tokenize endpoint, in the first shape it answers (vLLM's, llama.cpp's,
    TGI's); ConfigError, one line, when none does."""
    root = server_root(base)
    tried = []
    for shape in SHAPES:
        counter = RemoteTokenCounter(root, model, shape, headers)
        try:
            ids, starts = counter.tokens("Hello world")
        except ConfigError as exc:
            tried.append(f"{shape}: {exc}")
            continue
        if ids and (starts is None or len(starts) == len(ids)):
            return counter
        tried.append(f"{shape}: no tokens in its answer")
    raise ConfigError(f"--tokenizer server: {root}/tokenize answers in none of vLLM's, "
                      f"llama.cpp's or TGI's shapes ({tried[0] if tried else 'no answer'}): "
                      "give the served model's --tokenizer DIR")


def _ids(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                              for i in value):
        raise ConfigError("the server's /tokenize answered without a list of token ids")
    return list(value)


def _pieces(value: Any, text: str) -> tuple[list[int], list[int] | None]:
    """llama.cpp's ``[{"id", "piece"}]``: the ids, and where each piece starts in ``text``
    (its pieces laid end to end; a piece given as bytes is a part of a character, whose
    start is that character's). A tokenizer that adds a leading space to the text (a
    SentencePiece model's) shifts the pieces by that space: a token at a chunk's edge may be
    given to its neighbour, the count stays exact."""
    if not isinstance(value, list):
        raise ConfigError("the server's /tokenize answered without its tokens")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value), None  # a llama.cpp that does not give pieces
    ids, starts = [], []
    # each byte's character in ``text`` (the pieces laid end to end cover its bytes)
    char_of = [i for i, ch in enumerate(text) for _ in range(len(ch.encode()))]
    at = 0  # in bytes
    for v in value:
        if not isinstance(v, dict) or not isinstance(v.get("id"), int):
            raise ConfigError("the server's /tokenize answered a token without its id")
        piece = v.get("piece")
        if isinstance(piece, str):
            raw = piece.encode()
        elif isinstance(piece, list) and len(piece) <= MAX_PIECE and all(
                isinstance(b, int) and 0 <= b < 256 for b in piece):
            raw = bytes(piece)
        else:
            raise ConfigError("the server's /tokenize answered a piece that is neither text "
                              "nor bytes")
        ids.append(int(v["id"]))
        starts.append(char_of[at] if at < len(char_of) else len(text))
        at += len(raw)
    return ids, starts


def _offsets(value: Any) -> tuple[list[int], list[int] | None]:
    """TGI's ``[{"id", "text", "start", "stop"}]``: ids and their start characters."""
    if not isinstance(value, list):
        raise ConfigError("the server's /tokenize answered without a list of tokens")
    ids, starts = [], []
    for v in value:
        if not isinstance(v, dict) or not isinstance(v.get("id"), int) \
                or not isinstance(v.get("start"), int):
            raise ConfigError("the server's /tokenize answered a token without its id and "
                              "start")
        ids.append(int(v["id"]))
        starts.append(int(v["start"]))
    return ids, starts
