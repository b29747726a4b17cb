"""What every sub-command shares: the parser that turns bad input into one line, the number
type, and the exit codes."""
from __future__ import annotations

import argparse

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Raised instead of argparse's exit, so every bad input looks the same: one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def number(text: str) -> float:
    """argparse type: any float, with a one-line error (ranges are checked with the config)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


FORMATTER = argparse.ArgumentDefaultsHelpFormatter
#: ends a help text whose default says nothing ("None"): an empty format field, which also
#: stops ArgumentDefaultsHelpFormatter from appending "(default: None)".
NO_DEFAULT = "%(default).0s"
