"""Service-level objectives of a generation run: the time to first token and the time per
output token a request must meet to count towards goodput.

The presets are MLPerf Inference's server-scenario limits (``loadgen/mlperf.conf``), which
MLPerf checks at the 99th percentile of a run; goodput (DistServe) counts the requests per
second that meet both limits each. A run given a preset reports both: the p99s against the
limits, and the goodput.
"""
from __future__ import annotations

from dataclasses import dataclass

from latency.core.errors import ConfigError


@dataclass(frozen=True)
class Slo:
    """Both limits, in ms (``None``: that one is not set)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    #: the preset's name, when it came from one
    name: str | None = None

    @property
    def set(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None

    def __str__(self) -> str:
        parts = [f"TTFT ≤ {self.ttft_ms:g} ms" if self.ttft_ms is not None else "",
                 f"TPOT ≤ {self.tpot_ms:g} ms" if self.tpot_ms is not None else ""]
        text = " and ".join(p for p in parts if p)
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


def slo_of(preset: str | None, ttft_ms: float | None, tpot_ms: float | None) -> Slo:
    """The objectives a run's flags set: a preset, with either limit overridden by its own
    flag. ConfigError (one line) for an unknown preset or a limit out of range."""
    name = None
    if preset is not None:
        key = str(preset).strip().lower().replace("llama3_1", "llama3.1")
        if key not in PRESETS:
            raise ConfigError(f"--slo must be one of: {', '.join(PRESETS)} (got {preset!r})")
        name = key
        base_ttft, base_tpot = PRESETS[key]
        ttft_ms = base_ttft if ttft_ms is None else ttft_ms
        tpot_ms = base_tpot if tpot_ms is None else tpot_ms
    for flag, value in (("--slo-ttft-ms", ttft_ms), ("--slo-tpot-ms", tpot_ms)):
        if value is not None and not (isinstance(value, (int, float))
                                      and 0 < value <= MAX_SLO_MS):
            raise ConfigError(f"{flag} must be > 0 and <= {MAX_SLO_MS:g} ms (got {value!r})")
    return Slo(None if ttft_ms is None else float(ttft_ms),
               None if tpot_ms is None else float(tpot_ms), name)
