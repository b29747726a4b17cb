"""Waiting for a server a test started: one loop for every test that starts one."""
from __future__ import annotations

import subprocess
import time
import urllib.request


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float) -> bool:
    """Poll ``url`` until it answers 200 (True), or until ``proc`` has ended or ``timeout_s``
    has passed (False: the caller says why, with the server's own output)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.3)
