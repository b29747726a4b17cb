"""Transports carry a request from the client to the server and the response back.

Only the in-process transport exists so far; the HTTP transport (real sockets on 127.0.0.1)
plugs in behind the same ``send`` call.
"""
from latency.transport.inprocess import InProcessTransport

__all__ = ["InProcessTransport"]
