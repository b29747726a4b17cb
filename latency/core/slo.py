"""Service-level objectives of a generation run: the time to first token, the time per
output token and the whole request's time (E2E) a request must meet to count towards goodput.

The presets are MLPerf Inference's server-scenario limits (``loadgen/mlperf.conf``), TTFT and
TPOT, which MLPerf checks at the 99th percentile of a run; goodput (DistServe) counts the
requests per second that meet every limit set. A run given objectives reports both: the p99s
against the limits, and the goodput.
"""
from __future__ import annotations

from dataclasses import dataclass

from latency.core.errors import ConfigError


@dataclass(frozen=True)
class Slo:
    """The limits a request must meet to count for goodput, in ms (``None``: that one is
    not set): time to first token, time per output token, and the whole request (E2E: what
    a caller waiting for the full answer feels, vLLM's ``--goodput e2el``)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    #: the preset's name, when it came from one
    name: str | None = None
    e2e_ms: float | None = None

    @property
    def set(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2e_ms))

    def __str__(self) -> str:
        parts = [f"{what} ≤ {v:g} ms" for what, v in (
            ("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms), ("E2E", self.e2e_ms))
            if v is not None]
        text = (", ".join(parts[:-1]) + " and " + parts[-1]) if len(parts) > 1 else \
            "".join(parts)
        return f"{text} ({self.name})" if self.name else text


#: MLPerf Inference server-scenario limits: name → (TTFT ms, TPOT ms), checked at p99
PRESETS: dict[str, tuple[float, float]] = {
    "llama2-70b": (2000.0, 200.0),
    "llama2-70b-interactive": (450.0, 40.0),
    "mixtral-8x7b": (2000.0, 200.0),
    "llama3.1-8b": (2000.0, 100.0),
    "llama3.1-8b-interactive": (500.0, 30.0),
    "llama3.1-405b": (6000.0, 175.0),
    "llama3.1-405b-interactive": (4500.0, 80.0),
    "deepseek-r1": (2000.0, 80.0),
    "deepseek-r1-interactive": (1500.0, 15.0),
}
#: the longest limit accepted (ms): an hour
MAX_SLO_MS = 3_600_000.0


def slo_of(preset: str | None, ttft_ms: float | None, tpot_ms: float | None,
           e2e_ms: float | None = None) -> Slo:
    """The objectives a run's flags set: a preset, with either limit overridden by its own
    flag, and an E2E limit beside (no preset has one). ConfigError (one line) for an unknown
    preset or a limit out of range."""
    name = None
    if preset is not None:
        key = str(preset).strip().lower().replace("llama3_1", "llama3.1")
        if key not in PRESETS:
            raise ConfigError(f"--slo must be one of: {', '.join(PRESETS)} (got {preset!r})")
        name = key
        base_ttft, base_tpot = PRESETS[key]
        ttft_ms = base_ttft if ttft_ms is None else ttft_ms
        tpot_ms = base_tpot if tpot_ms is None else tpot_ms
    for flag, value in (("--slo-ttft-ms", ttft_ms), ("--slo-tpot-ms", tpot_ms),
                        ("--slo-e2e-ms", e2e_ms)):
        if value is not None and not (isinstance(value, (int, float))
                                      and 0 < value <= MAX_SLO_MS):
            raise ConfigError(f"{flag} must be > 0 and <= {MAX_SLO_MS:g} ms (got {value!r})")
    return Slo(None if ttft_ms is None else float(ttft_ms),
               None if tpot_ms is None else float(tpot_ms), name,
               None if e2e_ms is None else float(e2e_ms))
