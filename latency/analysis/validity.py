"""Whether a run's numbers can be trusted at all: VALID or INVALID, each check named.

As MLPerf LoadGen ends a run with VALID/INVALID and the checks behind it, a run here is valid
when it finished as planned, its warm-up completed, some requests succeeded, its error rate is
within the threshold you chose (``--max-error-rate``, default 1 %), no request was dropped
because the server was overloaded, and every request offered is accounted for (answered,
failed with its reason, dropped or cancelled — a request that silently vanished would hide
exactly the slowest ones). The CLI exits 1 for an invalid run, so a CI job can trust exit 0;
the dashboard and the JSON show the same checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from latency.core import fmt
from latency.core.config import RunConfig

DEFAULT_MAX_ERROR_RATE = 0.01


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Validity:
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def valid(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def line(self) -> str:
        """'VALID' or 'INVALID: error rate 100.0% > 1.0%; no successful requests'."""
        if self.valid:
            return "VALID (" + ", ".join(c.name for c in self.checks) + ")"
        return "INVALID: " + "; ".join(c.detail for c in self.failed)

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid,
                "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail}
                           for c in self.checks]}

    def __repr__(self) -> str:
        return f"Validity({self.line()})"


def offered_count(config: RunConfig, timings: Any) -> int | None:
    """How many measured requests the run offered: the open loop's count of requests due,
    a closed loop's ``--requests``; None when not known (a closed loop of a duration)."""
    offered = getattr(timings, "offered_requests", None)
    if offered:
        return int(offered)
    if config.rate is None and config.requests and not config.duration_s:
        return int(config.requests)
    return None


def accounting(summary: Any, config: RunConfig, status: str, timings: Any) -> Check:
    """Every offered request is accounted for: offered = answered + failed + dropped
    (+ cancelled by a stop). A safety net under the load generator, which records every
    request it sends; checked on completed runs (a run that did not finish already fails
    "finished as planned", and its offered count is not its plan)."""
    name = "every request accounted for"
    offered = offered_count(config, timings)
    if status != "completed" or offered is None:
        return Check(name, True, "not checked: " + ("the run " + status if status != "completed"
                                                    else "no count of requests offered"))
    answered, failed = int(summary.successful), int(summary.errors)
    dropped = int(getattr(timings, "dropped_overload", None) or getattr(summary, "dropped", 0)
                  or 0)
    cancelled = int(getattr(timings, "cancelled_requests", None) or 0)
    counted = answered + failed + dropped + cancelled
    parts = (f"{answered:,} answered + {failed:,} failed + {dropped:,} dropped"
             + (f" + {cancelled:,} cancelled" if cancelled else ""))
    if counted == offered:
        return Check(name, True, f"{offered:,} offered = {parts}")
    gap = offered - counted
    what = (f"{gap:,} of {offered:,} offered requests are missing" if gap > 0
            else f"{-gap:,} more requests counted than the {offered:,} offered")
    return Check(name, False, f"{what} ({parts}): not every request is accounted for")


def validity(summary: Any, config: RunConfig, status: str, timings: Any = None) -> Validity:
    """The checks of one run (``summary``: its Summary; ``config``: its RunConfig;
    ``timings``: its Timings, for what the generator offered, dropped and cancelled)."""
    limit = DEFAULT_MAX_ERROR_RATE if config.max_error_rate is None else \
        float(config.max_error_rate)
    planned_warmup = int(config.warmup or 0)
    dropped = int(getattr(summary, "dropped", 0) or 0)
    checks = (
        Check("finished as planned", status == "completed",
              f"the run {status} before its planned length" if status != "completed"
              else "completed"),
        Check("warm-up finished", summary.warmup_requests >= planned_warmup,
              f"warm-up: {summary.warmup_requests} of {planned_warmup} requests"),
        Check("requests succeeded", summary.successful > 0,
              "no successful requests" if summary.successful == 0
              else f"{summary.successful} successful"),
        Check(f"error rate ≤ {limit:.1%}", summary.error_rate <= limit,
              f"error rate {summary.error_rate:.1%} > {limit:.1%} (--max-error-rate)"
              if summary.error_rate > limit else f"error rate {summary.error_rate:.1%}"),
        Check("nothing dropped by overload", dropped == 0,
              f"{dropped:,} requests dropped: the server was overloaded "
              f"(offered {fmt.rate(summary.offered_rps)} req/s)" if dropped
              else "no request dropped"),
        accounting(summary, config, status, timings),
    )
    return Validity(checks)
