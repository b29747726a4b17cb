"""The errors a user sees as one line (CLI: exit 2, no traceback; dashboard: an error box).

They live at the bottom so every stage can raise them without importing the stage that
reports them.
"""
from __future__ import annotations


class ConfigError(ValueError):
    """A setting that cannot run; the message is one line meant for the user."""


class PipelineError(ValueError):
    """A pipeline could not be found or built with the arguments given (unknown name, bad
    model-arg, dtype, device...)."""


def error_text(exc: BaseException) -> str:
    """'Type: first line' of an exception: how a failed stage, a failed run and a failed start
    name their error. A user's exception whose ``__str__`` itself raises is named by its type
    alone: naming an error must never fail, or whatever caught it (a server's worker, with its
    batch unanswered) would die of it."""
    name = type(exc).__name__
    try:
        text = str(exc).strip()
    except Exception:  # noqa: BLE001 - any failure of user code to describe itself
        return f"{name}: (its message could not be read)"
    return f"{name}: {text.splitlines()[0]}" if text else name
