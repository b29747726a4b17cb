"""Processes of this machine, as far as a run needs to know them."""
from __future__ import annotations

import os
import sys


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_now(code: int) -> None:
    """Flush what this process printed and end it at once (``os._exit``), without the
    interpreter's shutdown: in a process that ran torch, that shutdown tears down threads its
    native libraries started and printed "terminate called without an active exception"
    (``std::terminate`` in one of them). For a process's last step only (a run process once its
    result is sent, a server once it stopped): nothing after it runs, atexit handlers neither."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or replaced by None
            pass
    os._exit(code)
