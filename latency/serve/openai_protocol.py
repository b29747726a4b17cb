"""What an OpenAI-compatible request asks for, checked: ``/v1/completions`` and
``/v1/chat/completions`` bodies in, a ``CompletionAsk`` out — or an ``OpenAIError`` (400 with
the reason in OpenAI's error shape) before anything is queued.

What is read (everything else, e.g. ``temperature``, ``top_p``, ``seed``, is accepted and
ignored: the pipeline samples as it does in process, greedy by default):

- ``model``: the served model's name, or absent; another name is refused.
- completions: ``prompt``, a string, a list of token ids, or a list of one string.
- chat: ``messages``, a list of ``{"role", "content"}`` (content a string or a list of
  ``{"type": "text", "text"}`` parts), turned into one prompt by ``chat_prompt``.
- ``max_tokens`` (chat: ``max_completion_tokens`` first): 1 to the model's context − 1;
  absent: ``DEFAULT_MAX_TOKENS``. A prompt that with it exceeds the context or the KV budget is
  refused by the generation server's tokenizer check, also with 400.
- ``stream`` (default false), ``stream_options.include_usage``, ``ignore_eos`` (vLLM's
  extension: true never stops at the end-of-sequence token, false stops there; absent: the
  server's setting, ``--stop-on-eos``, default off — exactly ``max_tokens`` tokens), ``n`` (1).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: tokens a request generates when it names no ``max_tokens`` (the completions API's
#: default; a profiler wants bounded requests, so chat has the same)
DEFAULT_MAX_TOKENS = 16
#: how a chat's messages become one prompt (documented in docs/generation.md)
CHAT_LINE = "{role}: {content}\n"
CHAT_END = "assistant:"


class OpenAIError(Exception):
    """A refused request: its status, message and OpenAI error ``type``/``code``/``param``."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param

    def body(self) -> bytes:
        return error_json(self.message, self.type, self.code, self.param)


def error_json(message: str, type_: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> bytes:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return json.dumps({"error": {"message": message, "type": type_, "param": param,
                                 "code": code}}).encode()


@dataclass(frozen=True)
class CompletionAsk:
    """One checked request."""

    chat: bool
    #: the prompt's text, or its token ids
    prompt: str | list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    #: None: the server's setting
    ignore_eos: bool | None


def chat_prompt(messages: list[dict[str, str]]) -> str:
    """The messages as one prompt: a ``role: content`` line each, then ``assistant:`` (a
    plain template, the same for every model: the profile is of serving, not of chat
    formatting)."""
    return "".join(CHAT_LINE.format(role=m["role"], content=m["content"])
                   for m in messages) + CHAT_END


def parse_ask(body: bytes, model: str, max_context: int, chat: bool) -> CompletionAsk:
    """The request ``body`` asks for, or ``OpenAIError`` (400) saying what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise OpenAIError(400, f"the body is not JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise OpenAIError(400, "the body must be a JSON object")
    name = data.get("model")
    if name is not None and name != model:
        raise OpenAIError(400, f"unknown model {name!r}: this server serves {model!r}",
                          code="model_not_found", param="model")
    prompt = _messages(data) if chat else _prompt(data)
    limit = max_context - 1
    key = "max_completion_tokens" if chat and data.get("max_completion_tokens") is not None \
        else "max_tokens"
    max_tokens = data.get(key)
    if max_tokens is None:
        max_tokens = min(DEFAULT_MAX_TOKENS, limit)
    if not _is_int(max_tokens) or not 1 <= max_tokens <= limit:
        raise OpenAIError(400, f"{key} must be a whole number from 1 to {limit} (the model's "
                          f"context of {max_context} less one prompt token; got "
                          f"{max_tokens!r})", param=key)
    stream = _flag(data, "stream", False)
    options = data.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise OpenAIError(400, "stream_options is only allowed with stream: true",
                              param="stream_options")
        if not isinstance(options, dict):
            raise OpenAIError(400, "stream_options must be an object", param="stream_options")
        include_usage = _flag(options, "include_usage", False)
    ignore = data.get("ignore_eos")
    if ignore is not None and not isinstance(ignore, bool):
        raise OpenAIError(400, f"ignore_eos must be true or false (got {ignore!r})",
                          param="ignore_eos")
    n = data.get("n", 1)
    if n is not None and n != 1:
        raise OpenAIError(400, f"n must be 1: one choice a request (got {n!r})", param="n")
    return CompletionAsk(chat, prompt, int(max_tokens), stream, include_usage, ignore)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _flag(data: dict[str, Any], key: str, default: bool) -> bool:
    v = data.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise OpenAIError(400, f"{key} must be true or false (got {v!r})", param=key)
    return v


def _prompt(data: dict[str, Any]) -> str | list[int]:
    p = data.get("prompt")
    if p is None:
        raise OpenAIError(400, "prompt is required", param="prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
        p = p[0]
    if isinstance(p, str):
        if not p.strip():
            raise OpenAIError(400, "the prompt is empty", param="prompt")
        return p
    if isinstance(p, list) and p and all(_is_int(i) and i >= 0 for i in p):
        return [int(i) for i in p]
    raise OpenAIError(400, "prompt must be a non-empty string or a list of token ids (one "
                      "prompt a request)", param="prompt")


def _messages(data: dict[str, Any]) -> str:
    msgs = data.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise OpenAIError(400, "messages is required: a non-empty list of {role, content}",
                          param="messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise OpenAIError(400, f"messages[{i}] must be an object with a role",
                              param="messages")
        content = m.get("content")
        if isinstance(content, list):  # content parts: only text is understood
            texts = [str(part["text"]) for part in content if isinstance(part, dict)
                     and part.get("type") == "text" and isinstance(part.get("text"), str)]
            if len(texts) != len(content):
                raise OpenAIError(400, f"messages[{i}].content: only text parts are served",
                                  param="messages")
            content = "".join(texts)
        if not isinstance(content, str):
            raise OpenAIError(400, f"messages[{i}].content must be a string",
                              param="messages")
        out.append({"role": m["role"], "content": content})
    return chat_prompt(out)
