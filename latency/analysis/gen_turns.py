"""A run of chat sessions (``--turns N``), read by turn: which turn each request was, and its
TTFT and prompt by turn.

Turn k's prompt carries the whole conversation before it, so a server that keeps what it
computed (a prefix cache, a slot holding the session: llama.cpp's ``cache_prompt``, vLLM's
automatic prefix caching) prefills only the new message, and TTFT stays flat as the prompt
grows; one that keeps nothing prefills it all, and TTFT climbs with the turn. The turn is not
stored: a client's k-th request of a phase is turn ``k mod N + 1`` (the driver's rule,
``latency.loadgen.gen_driver``), read back from the rows by client and intended send time.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.core import fmt
from latency.core.gen_records import STATUS_OK, component_ns
from latency.core.gen_reports import MISSING


def turn_of(rows: np.ndarray, turns: int) -> np.ndarray:
    """Each request's turn in its session (1 … ``turns``); 1 for all without sessions."""
    out = np.ones(len(rows), dtype=np.int32)
    if turns <= 1 or not len(rows):
        return out
    for warmup in (True, False):  # each phase's sessions start afresh
        in_phase = rows["warmup"] == warmup
        for client in np.unique(rows["client"][in_phase]):
            idx = np.flatnonzero(in_phase & (rows["client"] == client))
            idx = idx[np.argsort(rows["t_intended"][idx], kind="stable")]
            out[idx] = np.arange(len(idx)) % turns + 1
    return out


def turn_lines(rows: np.ndarray, reports: Any, turns: int) -> list[str]:
    """'TTFT by turn …' and, where the server said how many prompt tokens it read from its
    cache, the share cached by turn: a line each, over successful measured requests."""
    turn = turn_of(rows, turns)
    ok = (~rows["warmup"]) & (rows["status"] == STATUS_OK)
    if turns <= 1 or not ok.any():
        return []
    ttft_ms = component_ns(rows[ok])["ttft"] / 1e6
    prompt = rows["prompt_tokens"][ok]
    cached = None  # the server's count (MISSING, below 0, where it said none)
    if reports is not None and len(reports) == len(rows):
        cached = reports["cached_tokens"][ok]
    parts, shares = [], []
    for k in range(1, turns + 1):
        at = turn[ok] == k
        if not at.any():
            continue
        p50, p99 = np.percentile(ttft_ms[at], [50, 99])
        parts.append(f"{k}: p50 {fmt.ms(p50)} p99 {fmt.ms(p99)} ms, prompt "
                     f"{float(prompt[at].mean()):,.0f} tokens (n={int(at.sum())})")
        if cached is not None and (cached[at] > MISSING).any():
            seen = at & (cached > MISSING)
            share = float(cached[seen].sum()) / max(float(prompt[seen].sum()), 1.0)
            shares.append(f"{k}: {fmt.share(share)}")
    lines = [f"TTFT by turn (chat sessions of {turns} turns, each turn the conversation so "
             "far and a new message): " + " · ".join(parts)]
    if shares:
        lines.append("prompt tokens read from the server's cache, by turn: "
                     + " · ".join(shares))
    return lines


__all__ = ["turn_lines", "turn_of"]
