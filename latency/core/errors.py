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
