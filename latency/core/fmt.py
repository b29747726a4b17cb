"""Every number this tool shows, formatted in one place.

The same p99 must read the same in the terminal, on the dashboard, in a chart's label and in a
headline; before this module nine formatters rounded it nine ways. The rules:

- a latency in ms: about three significant figures (``ms``) — enough to compare, few enough to
  read at a glance — never scientific notation above 0.01 ms;
- a latency with its unit: ms below a second, s above (``duration``);
- a relative change: signed, with a real minus sign, one decimal below 10 % (``change``);
- a share of a whole: whole percent (``share``).
"""
from __future__ import annotations

import math

DASH = "—"
MINUS = "−"


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def ms(v: float | None) -> str:
    """A latency in ms as a short string, about three significant figures (no unit)."""
    if not _finite(v):
        return DASH
    assert v is not None
    a = abs(v)
    if a >= 10_000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2g}"


def signed_ms(v: float | None) -> str:
    """A difference of latencies in ms: ``ms`` with a sign (``+1.23``, ``−0.456``)."""
    if not _finite(v):
        return DASH
    assert v is not None
    return ("+" if v >= 0 else MINUS) + ms(abs(v))


def duration(v_ms: float | None) -> str:
    """A latency with its unit, switching to seconds from 1 s up (for headline numbers)."""
    if not _finite(v_ms):
        return DASH
    assert v_ms is not None
    return f"{ms(v_ms / 1000)} s" if abs(v_ms) >= 1000 else f"{ms(v_ms)} ms"


def round_ms(v: float | None) -> float | None:
    """A latency rounded for a table cell: three significant figures but never fewer than one
    decimal (a 1234.5 ms max stays 1234.5, a 0.01234 ms network time stays 0.0123)."""
    if v is None:
        return None
    v = float(v)
    if not math.isfinite(v) or v == 0:
        return v
    digits = max(1, 2 - int(math.floor(math.log10(abs(v)))))
    return round(v, digits)


def change(fraction: float | None) -> str:
    """A relative change: ``−12%``, ``+3.4%`` (one decimal below 10 %, so a small change
    does not print as ``−0%``)."""
    if not _finite(fraction):
        return DASH
    assert fraction is not None
    digits = 1 if abs(fraction) < 0.095 else 0
    return f"{MINUS if fraction < 0 else '+'}{abs(fraction) * 100:.{digits}f}%"


def share(fraction: float | None) -> str:
    """A share of a whole: ``42%``."""
    return DASH if not _finite(fraction) else f"{fraction:.0%}"


def tick(v: float) -> str:
    """An axis tick as people write it: 50, 2000, 100,000; 0.5 and 12.5 unchanged."""
    if float(v).is_integer():
        return f"{v:,.0f}" if abs(v) >= 10_000 else f"{v:.0f}"
    return f"{v:g}"


def rate(v: float | None) -> str:
    """Requests per second: one decimal."""
    return DASH if not _finite(v) else f"{v:.1f}"


def setting(v: object) -> str:
    """A setting's value as a person reads it, never a Python repr: ``None`` → "not set",
    ``[]`` → "none", ``['int8', 'compile']`` → "int8, compile", ``True`` → "on", ``2.0`` → "2"."""
    if v is None:
        return "not set"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(setting(x) for x in v) or "none"
    if isinstance(v, dict):
        return ", ".join(f"{k}={setting(x)}" for k, x in v.items()) or "none"
    return str(v)


#: the most characters of a server's text a line shows (its error message, a model's name)
SERVER_TEXT_CHARS = 300


def server_text(text: object, limit: int = SERVER_TEXT_CHARS) -> str:
    """Text a server sent, fit for one line of a terminal, a log or the history: every control
    character (an escape sequence's ESC, a newline that would forge a line of ours) shown as
    its escape, and cut to ``limit`` characters with how many more there were."""
    s = str(text)
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                  for ch in s[:limit])
    return out + (f"… ({len(s) - limit:,} more characters)" if len(s) > limit else "")
