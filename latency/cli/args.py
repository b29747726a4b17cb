"""What every sub-command shares: the parser that turns bad input into one line, the number
type, and the exit codes."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

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


def stop_on_signals(cancel: Any, what: str = "in-flight requests finish") -> dict[str, int]:
    """Ctrl-C (SIGINT) and SIGTERM — what a CI runner, systemd or a container stop sends —
    both stop the run: ``cancel`` is set, what was measured is kept (``stopped``), saved and
    written. A second signal aborts at once. Returns a dict that holds the signal received
    (``{"signal": n}``) so the command can exit ``128 + n``."""
    got: dict[str, int] = {}

    def handler(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        got["signal"] = signum
        name = signal.Signals(signum).name
        print(f"\n{name}: stopping — letting {what} (again to abort at once)",
              file=sys.stderr)
        cancel.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return got
