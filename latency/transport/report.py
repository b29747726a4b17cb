"""The transport part of a run's summary: what carried the requests, their sizes, how the
server's time was known, and the emulated WAN — labelled *emulated* wherever it shows.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.components import component_ns
from latency.stats import describe_ms

NO_BREAKDOWN = ("the target sent no Server-Timing header with queue/preprocess/forward/"
                "postprocess durations, so its time cannot be told apart from the network's: "
                "'network' is the whole client-observed time (client time only)")


def _bytes(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"mean": None, "p50": None, "max": None}
    return {"mean": float(values.mean()), "p50": float(np.median(values)),
            "max": float(values.max())}


def transport_summary(ok: np.ndarray, config: dict[str, Any]) -> dict[str, Any]:
    """The ``transport`` block of a summary, from the successful measured rows."""
    if config.get("transport", "in-process") != "http":
        return {"kind": "in-process",
                "note": "no socket: network is the thread hand-off inside the run process"}
    out: dict[str, Any] = {
        "kind": "http",
        "server": "remote target" if config.get("target") else "ours, own process, 127.0.0.1",
        "target": config.get("target"),
        "payload": "bodies file" if config.get("bodies") else config.get("payload", "json"),
        "request_bytes": _bytes(ok["req_bytes"]) if len(ok) else _bytes(np.zeros(0)),
        "response_bytes": _bytes(ok["resp_bytes"]) if len(ok) else _bytes(np.zeros(0)),
    }
    share = float(ok["decomposed"].mean()) if len(ok) else 1.0
    out["decomposed_share"] = share
    if share == 1.0:
        out["decomposition"] = "server-timing"
    else:
        out["decomposition"] = "client-only" if share == 0.0 else "partial"
        out["decomposition_note"] = NO_BREAKDOWN
    rtt, jitter = config.get("net_rtt_ms") or 0.0, config.get("net_jitter_ms") or 0.0
    bw = config.get("net_bandwidth_mbps")
    if rtt or jitter or bw is not None:
        emulated = (ok["emulated_us"].astype(np.int64) * 1000 if len(ok)
                    else np.zeros(0, dtype=np.int64))
        real = (component_ns(ok)["network"] - emulated) if len(ok) else emulated
        out["emulated_wan"] = {"emulated": True, "rtt_ms": rtt, "jitter_ms": jitter,
                               "bandwidth_mbps": bw,
                               "emulated_delay_ms": describe_ms(emulated, with_ci=False),
                               "network_without_emulation_ms": describe_ms(real,
                                                                           with_ci=False)}
    else:
        out["emulated_wan"] = None
    return out


def transport_warnings(t: dict[str, Any]) -> list[str]:
    """Warnings a reader must see next to the numbers."""
    if t.get("kind") == "http" and t.get("decomposition") != "server-timing":
        share = t.get("decomposed_share", 0.0)
        return [f"{1 - share:.0%} of requests without a server breakdown: {NO_BREAKDOWN}"]
    return []


def transport_lines(s: dict[str, Any]) -> list[str]:
    """Terminal lines describing the transport (CLI summary)."""
    t = s.get("transport")
    if not t or t.get("kind") != "http":
        return []
    where = f"target {t['target']}" if t.get("target") else "our server (own process, 127.0.0.1)"
    req, resp = t["request_bytes"], t["response_bytes"]
    size = (f"request {req['mean']:.0f} B, response {resp['mean']:.0f} B (mean)"
            if req["mean"] is not None else "no successful requests")
    lines = [f"transport: HTTP, Open Inference Protocol ({t['payload']} payload) to {where}; "
             f"{size}; server time from "
             + ("Server-Timing" if t["decomposition"] == "server-timing" else
                "nowhere (client time only)")]
    wan = t.get("emulated_wan")
    if wan:
        bw = f"{wan['bandwidth_mbps']:g} Mbit/s" if wan["bandwidth_mbps"] is not None else \
            "unlimited bandwidth"
        d, r = wan["emulated_delay_ms"], wan["network_without_emulation_ms"]
        lines.append(f"EMULATED WAN (added by the client, not a real network): RTT "
                     f"{wan['rtt_ms']:g} ms, jitter ≤ {wan['jitter_ms']:g} ms, {bw}; emulated "
                     f"delay p50 {_ms(d['p50'])} ms, real network p50 {_ms(r['p50'])} ms")
    return lines


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"
