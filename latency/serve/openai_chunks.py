"""The bytes of an OpenAI-compatible reply: server-sent events of a stream, or one JSON body.

A stream (``Content-Type: text/event-stream``), one ``data: {json}\\n\\n`` event each:

- chat only, first: ``delta: {"role": "assistant"}`` and no content (as OpenAI sends it) —
  no token, sent as soon as the prompt is accepted;
- one event for each write of tokens: ``text`` (chat: ``delta.content``), the text of one or
  more tokens (several when the client or the writer fell behind and they piled up; a token
  whose text is still incomplete — half a UTF-8 character — rides with the next), the last with
  its ``finish_reason`` (``length``: ``max_tokens`` reached; ``stop``: end of sequence);
- the last: no choices, ``usage`` when ``stream_options.include_usage`` asked for it, and
  the server's account (``gen_account``) under ``latency_lab``;
- ``data: [DONE]``.

A failure once the stream has started is an event ``{"error": {...}}`` before ``[DONE]``.
The constant part of every event of a request (id, object, created, model) is encoded once.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from latency.serve.gen_account import ACCOUNT_KEY

DONE = b"data: [DONE]\n\n"
STREAM_TYPE = "text/event-stream"
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _event(payload: str) -> bytes:
    return b"data: " + payload.encode() + b"\n\n"


class Encoder:
    """The events (or the body) of one request's reply."""

    def __init__(self, model: str, chat: bool) -> None:
        self.chat = chat
        rid = ("chatcmpl-" if chat else "cmpl-") + os.urandom(12).hex()
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": model}
        self._head = _dumps(head)[:-1]  # without its closing brace: choices follow
        self._id, self._created, self._model = rid, head["created"], model

    def role(self) -> bytes:
        """Chat's first event: the assistant's role, no content."""
        return _event(self._head + ',"choices":[{"index":0,"delta":{"role":"assistant"},'
                      '"logprobs":null,"finish_reason":null}]}')

    def tokens(self, text: str, finish: str | None) -> bytes:
        """An event carrying ``text`` (one or more tokens'); ``finish`` on the last."""
        end = "null" if finish is None else f'"{finish}"'
        if self.chat:
            return _event(f'{self._head},"choices":[{{"index":0,"delta":{{"content":'
                          f'{_dumps(text)}}},"logprobs":null,"finish_reason":{end}}}]}}')
        return _event(f'{self._head},"choices":[{{"index":0,"text":{_dumps(text)},'
                      f'"logprobs":null,"finish_reason":{end}}}]}}')

    def final(self, usage: dict[str, int] | None, account: dict[str, Any]) -> bytes:
        """The last event before ``[DONE]``: usage (if asked for) and the account."""
        extra = {"usage": usage} if usage is not None else {}
        return _event(self._head + ',"choices":[],' + _dumps({**extra,
                                                              ACCOUNT_KEY: account})[1:])

    @staticmethod
    def error(message: str, type_: str = "server_error", code: int = 500) -> bytes:
        """A failure in the middle of a stream."""
        return _event(_dumps({"error": {"message": message, "type": type_, "param": None,
                                        "code": code}}))

    def body(self, text: str, finish: str, usage: dict[str, int],
             account: dict[str, Any]) -> bytes:
        """A non-streamed reply: the whole text, usage and the account in one JSON body."""
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant",
                                                              "content": text},
                                      "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return _dumps({"id": self._id,
                       "object": "chat.completion" if self.chat else "text_completion",
                       "created": self._created, "model": self._model, "choices": [choice],
                       "usage": usage, ACCOUNT_KEY: account}).encode()


def usage_of(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
