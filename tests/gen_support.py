"""What the generation tests share: the gaps of a result and the checks that its figures add
up exactly (per request, per TTFT and per gap), in process and over HTTP alike."""
from __future__ import annotations

from typing import Any

import numpy as np

from latency.core.gen_records import (
    GAP_COMPONENTS,
    GEN_COMPONENTS,
    TTFT_COMPONENTS,
    component_ns,
    token_gaps,
    ttft_parts,
)


def gaps(result: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every gap between consecutive tokens of the result's requests, and its parts."""
    return token_gaps(result.tokens)


def assert_adds_up(result: Any, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Each request's components sum to its E2E, TTFT's parts to its TTFT and each gap's
    parts to the gap, to the nanosecond; no part is negative; each request's tokens are as
    many as it received, delivered in order. Returns the requests' components."""
    comps = component_ns(rows)
    assert np.array_equal(sum(comps[c] for c in GEN_COMPONENTS), comps["e2e"])
    first = ttft_parts(rows)
    assert np.array_equal(sum(first[c] for c in TTFT_COMPONENTS), comps["ttft"])
    total, parts = gaps(result)
    assert np.array_equal(sum(parts[c] for c in GAP_COMPONENTS), total)
    for c in GEN_COMPONENTS:
        assert (comps[c] >= 0).all(), c
    t = result.tokens
    for i in np.flatnonzero(~result.rows["warmup"])[:10]:
        mine = t[t["request"] == i]
        assert len(mine) == result.rows["output_tokens"][i]
        assert (np.diff(mine["t_delivered"]) >= 0).all()
    return comps
