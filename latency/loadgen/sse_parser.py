"""Server-sent events, parsed as their bytes arrive: ``feed(bytes)`` returns the ``data`` of
every event completed by them (WHATWG's event-stream format, the part a streaming API uses).

An event is lines up to a blank line; its ``data:`` lines (one space after the colon dropped)
are joined with newlines; comments (``:``), ``event:``, ``id:`` and ``retry:`` lines are read
past, and an event without data is none. Lines may end with ``\\n``, ``\\r\\n`` or ``\\r``.

Bounded: an event (or the part of one still waiting for its blank line) longer than
``max_event`` bytes raises ``SseError`` — a stream that never ends an event cannot grow the
client without limit. Each feed scans only the bytes it added (plus one), so an event that
arrives in many small pieces costs its length, not its length squared.
"""
from __future__ import annotations

#: the largest event read (the account of a request of thousands of tokens is ~100 kB)
MAX_EVENT_BYTES = 4 * 1024 * 1024


class SseError(ValueError):
    """The stream broke the format's limits."""


class SseParser:
    def __init__(self, max_event: int = MAX_EVENT_BYTES) -> None:
        self.max_event = max_event
        self._buf = bytearray()
        self._scanned = 0  # bytes of ``_buf`` known to hold no blank line
        self._cr = False  # the last byte fed was a lone \r (half of a \r\n, maybe)

    def feed(self, data: bytes) -> list[bytes]:
        if self._cr and data.startswith(b"\n"):
            data = data[1:]  # the \n of a \r\n split across two reads
        self._cr = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        buf += data
        events: list[bytes] = []
        start = 0
        while True:
            end = buf.find(b"\n\n", max(self._scanned - 1, start))
            if end < 0:
                break
            payload = _data_of(bytes(buf[start:end]))
            if payload is not None:
                events.append(payload)
            start = end + 2
            self._scanned = start
        if start:
            del buf[:start]
        self._scanned = len(buf)
        if len(buf) > self.max_event:
            raise SseError(f"an event is longer than {self.max_event} bytes")
        return events

    @property
    def pending(self) -> int:
        """Bytes of an event not yet complete."""
        return len(self._buf)


def _data_of(block: bytes) -> bytes | None:
    if block.startswith(b"data: ") and b"\n" not in block:  # the usual event: one data line
        return block[6:]
    data = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif line == b"data":
            data.append(b"")
    return b"\n".join(data) if data else None
