"""Checks of the transport settings of a RunConfig, and the ``--bodies`` file reader.

Kept apart from ``latency.config`` so the transport's rules live next to the transport; the
messages are one line each, naming the flag, as every ConfigError is.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from latency.transport.oip import PAYLOADS
from latency.transport.wan import MAX_BANDWIDTH_MBPS, MAX_RTT_MS, WanProfile

TRANSPORTS = ("in-process", "http")
MAX_BODIES = 1_000_000


def wan_of(c: Any) -> WanProfile:
    """The config's emulated link."""
    return WanProfile(float(c.net_rtt_ms or 0.0), float(c.net_jitter_ms or 0.0),
                      None if c.net_bandwidth_mbps is None else float(c.net_bandwidth_mbps))


def check_transport(c: Any) -> None:
    """Raise ConfigError (one line) for transport settings that cannot run; fills defaults
    (``--target`` implies ``--transport http``)."""
    from latency.config import ConfigError

    if c.target is not None:
        c.transport = "http"  # a target is always reached over HTTP
        parts = urlsplit(str(c.target))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--target must be an http:// or https:// URL, got {c.target!r}")
        try:
            parts.port
        except ValueError:
            raise ConfigError(f"--target has a bad port: {c.target!r}") from None
    if c.transport not in TRANSPORTS:
        raise ConfigError(f"--transport must be one of: {', '.join(TRANSPORTS)}")
    if c.payload not in PAYLOADS:
        raise ConfigError(f"--payload must be one of: {', '.join(PAYLOADS)}")
    for flag, value, top in (("net-rtt-ms", c.net_rtt_ms, MAX_RTT_MS),
                             ("net-jitter-ms", c.net_jitter_ms, MAX_RTT_MS)):
        if not isinstance(value, (int, float)) or not 0 <= value <= top:
            raise ConfigError(f"--{flag} must be between 0 and {top:g} ms (got {value!r})")
    bw = c.net_bandwidth_mbps
    if bw is not None and (not isinstance(bw, (int, float)) or not 0 < bw <= MAX_BANDWIDTH_MBPS):
        raise ConfigError(f"--net-bandwidth-mbps must be > 0 and <= {MAX_BANDWIDTH_MBPS:g} "
                          f"(got {bw!r})")
    if wan_of(c).active and c.transport != "http":
        raise ConfigError("the emulated WAN (--net-*) delays HTTP messages: add "
                          "--transport http")
    if not isinstance(c.max_body_mb, (int, float)) or not 0 < c.max_body_mb <= 4096:
        raise ConfigError(f"--max-body-mb must be > 0 and <= 4096 (got {c.max_body_mb!r})")
    if c.bodies is not None:
        if c.transport != "http":
            raise ConfigError("--bodies are HTTP request bodies: add --transport http or "
                              "--target URL")
        load_bodies(c.bodies)  # fails here, before anything runs


def load_bodies(path: str) -> list[bytes]:
    """The request bodies of a JSON-lines file: one JSON document (an OIP infer request) a
    line, blank lines skipped. ConfigError names the first bad line."""
    from latency.config import ConfigError

    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read --bodies {path}: {exc.strerror}") from None
    bodies = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--bodies {path} line {i} is not JSON: {exc}") from None
        bodies.append(line.strip())
        if len(bodies) > MAX_BODIES:
            raise ConfigError(f"--bodies {path} has more than {MAX_BODIES} lines")
    if not bodies:
        raise ConfigError(f"--bodies {path} holds no request bodies")
    return bodies
