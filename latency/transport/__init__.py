"""Transports carry a request from the client to the server and the response back.

- ``inprocess``: a thread hand-off inside the run process (network = the hand-off cost).
- ``http_client`` + ``http_server``: real HTTP on 127.0.0.1 (our server in its own process) or
  to a remote Open Inference Protocol endpoint; ``oip`` is the wire format, ``wan`` the
  emulated WAN, ``run`` what the engine calls for an HTTP run.

Imported lazily, so the command line can read transport settings without importing torch.
"""
from typing import Any

__all__ = ["InProcessTransport"]


def __getattr__(name: str) -> Any:
    if name == "InProcessTransport":
        from latency.transport.inprocess import InProcessTransport

        return InProcessTransport
    raise AttributeError(name)
