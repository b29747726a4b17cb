"""Processes of this machine, as far as a run needs to know them."""
from __future__ import annotations

import ipaddress
import os
import socket
import sys
from urllib.parse import urlsplit


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


def local_server_pids(url: str) -> list[int]:
    """The processes listening on ``url``'s port when its host is this machine (a loopback
    address, or one of this machine's own): the server a run targets, whose CPU is the
    target's and not 'other processes'. Empty when the host is elsewhere or none is seen."""
    import psutil

    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port)}
    except OSError:
        return []
    own = {a.address for nic in psutil.net_if_addrs().values() for a in nic}
    if not any(ipaddress.ip_address(a.split("%")[0]).is_loopback or a in own
               for a in addresses):
        return []
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return []
    return sorted({c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.pid
                   and c.laddr and c.laddr.port == port and c.pid != os.getpid()})
