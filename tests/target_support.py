"""What the tests of a generation from a --target share: the CLI, a free port."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

#: an API key that must never be written anywhere
SECRET = "sk-never-stored-0123456789"


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "latency", "run", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
