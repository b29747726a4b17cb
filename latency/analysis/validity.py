"""Whether a run's numbers can be trusted at all: VALID or INVALID, each check named.

As MLPerf LoadGen ends a run with VALID/INVALID and the checks behind it, a run here is valid
when it finished as planned, its warm-up completed, some requests succeeded, its error rate is
within the threshold you chose (``--max-error-rate``, default 1 %), it measured enough
(LoadGen's minimum-sample rule: ``--min-requests``, default 29, and ``--min-duration``), no
request was dropped
because the server was overloaded, and every request offered is accounted for (answered,
failed with its reason, dropped or cancelled — a request that silently vanished would hide
exactly the slowest ones). The CLI exits 1 for an invalid run, so a CI job can trust exit 0;
the dashboard and the JSON show the same checks.

One more check is about the machine rather than the run: ``quiet machine``. While a run
measures, ``latency.host.disturbance`` samples what else used its CPU (other processes, steal,
cgroup throttling, memory pressure); a busy machine inflates every stage time (a 3 ms
preprocess measured 4 ms beside a CPU hog). That check is *advisory*: a run on a busy machine
is still VALID — its requests were served and counted — but marked DISTURBED (the CLI's
``validity:`` line, ``validity.disturbed`` in the JSON) with a ``machine`` finding that says by
how much. With ``--require-quiet`` (``RunConfig.require_quiet``) the check is required, so a
disturbed run is INVALID and the CLI exits 1. Its limits were measured beside CPU hogs
(``bench/bench_disturbance.py``, BENCHMARKS.md "Disturbance").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from latency.analysis.findings import Finding
from latency.core import fmt
from latency.core.config import RunConfig

DEFAULT_MAX_ERROR_RATE = 0.01
#: LoadGen's minimum-sample rule, by default: the fewest successful requests whose slowest
#: one is a 95 % upper bound of the p90 (0.9^n ≤ 0.05 from n = 29). Below it no percentile
#: past the median is a measurement; ``--min-requests`` sets another minimum (0: none).
DEFAULT_MIN_REQUESTS = math.ceil(math.log(0.05) / math.log(0.9))


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    #: an advisory check marks the run (DISTURBED) without making it INVALID
    advisory: bool = False


@dataclass(frozen=True)
class Validity:
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def valid(self) -> bool:
        return all(c.passed for c in self.checks if not c.advisory)

    @property
    def failed(self) -> list[Check]:
        """The required checks that failed (what makes the run INVALID)."""
        return [c for c in self.checks if not c.passed and not c.advisory]

    @property
    def advisories(self) -> list[Check]:
        """The advisory checks that failed: the run stays VALID, and says this."""
        return [c for c in self.checks if not c.passed and c.advisory]

    @property
    def disturbed(self) -> bool:
        """The machine was busy while the run measured (``quiet machine`` failed, advisory or
        required by ``--require-quiet``)."""
        return any(c.name == QUIET_MACHINE and not c.passed for c in self.checks)

    def line(self) -> str:
        """'VALID (checks)', 'VALID but DISTURBED: other processes used … (checks)' or
        'INVALID: error rate 100.0% > 1.0%; no successful requests'."""
        notes = "; ".join(c.detail for c in self.advisories)
        if self.valid:
            passed = ", ".join(c.name for c in self.checks if c.passed)
            return (f"VALID but {notes} ({passed})" if notes else f"VALID ({passed})")
        return "INVALID: " + "; ".join(c.detail for c in self.failed) + (
            f"; {notes}" if notes else "")

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "disturbed": self.disturbed,
                "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail,
                            **({"advisory": True} if c.advisory else {})}
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


def enough_samples(summary: Any, config: RunConfig) -> Check:
    """LoadGen's minimum-sample rule: at least ``--min-requests`` successful measured
    requests (``DEFAULT_MIN_REQUESTS``) and at least ``--min-duration`` seconds measured."""
    least = DEFAULT_MIN_REQUESTS if config.min_requests is None else int(config.min_requests)
    seconds = float(config.min_duration_s or 0.0)
    n, span = int(summary.successful), float(summary.duration_s or 0.0)
    short = []
    if n < least:
        short.append(f"{n:,} successful requests < {least:,} (--min-requests): too few for a "
                     "percentile past the median; run longer")
    if span < seconds:
        short.append(f"measured {span:.1f} s < {seconds:g} s (--min-duration)")
    return Check("enough samples", not short, "; ".join(short) or f"{n:,} successful requests"
                 + (f" in {span:.1f} s" if seconds else ""))


def validity(summary: Any, config: RunConfig, status: str, timings: Any = None,
             environment: dict[str, Any] | None = None, failure: str | None = None
             ) -> Validity:
    """The checks of one run of either kind (``summary``: its Summary or GenSummary;
    ``config``: its RunConfig; ``timings``: its Timings, for what the generator offered,
    dropped and cancelled; ``environment``: its environment, for the machine while it
    measured; ``failure``: why it failed, when it did). One function for both kinds of
    request, so a generation is never VALID where the same one-shot run is INVALID."""
    limit = DEFAULT_MAX_ERROR_RATE if config.max_error_rate is None else \
        float(config.max_error_rate)
    planned_warmup = int(config.warmup or 0)
    dropped = int(getattr(summary, "dropped", 0) or 0)
    checks = (
        Check("finished as planned", status == "completed",
              f"the run {status} before its planned length"
              + (f": {failure}" if failure else "") if status != "completed"
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
        enough_samples(summary, config),
        accounting(summary, config, status, timings),
        quiet_machine(environment, required=bool(getattr(config, "require_quiet", False))),
    )
    return Validity(checks)


# ---- the machine: quiet, or disturbed ------------------------------------------------------
QUIET_MACHINE = "quiet machine"
#: other processes' mean CPU, as a share of the cores the run may use, above which a run is
#: DISTURBED: where the error of known stage times (synthetic 3/2/1 ms) first passed ±5 %
#: beside CPU hogs on 2 cores (bench/bench_disturbance.py; the figures: BENCHMARKS.md
#: "Disturbance"). A share, not cores: what delays
#: a woken thread is finding every core busy, and more cores leave more of them idle.
MAX_OTHER_SHARE = 0.2
#: CPU steal (the hypervisor running another VM on this one's cores), in cores
MAX_STEAL_CORES = 0.1
#: cgroup CPU throttling: throttled time as a share of the measured time (a quota that stops
#: this run's threads for whole periods: 1 % of the time is 1 ms in every 100 ms)
MAX_THROTTLED_SHARE = 0.01
#: memory pressure (PSI "some": a share of the time some task waited on memory reclaim)
MAX_MEMORY_PRESSURE_PCT = 10.0
#: below this much measured time the sampler's counters (in clock ticks) say nothing
MIN_SAMPLED_S = 0.2


def max_other_cores(cores: int | None) -> float:
    """The most CPU other processes may use (cores) while a run on ``cores`` cores measures
    and the machine is still quiet: ``MAX_OTHER_SHARE`` of them (0.4 of 2)."""
    return MAX_OTHER_SHARE * (cores if cores and cores > 0 else 1)


def disturbance_of(environment: dict[str, Any] | None) -> dict[str, Any] | None:
    """A result's machine samples (``environment["disturbance"]``), None when it has none (a
    run from before they were taken, or one that never measured)."""
    d = (environment or {}).get("disturbance")
    return d if isinstance(d, dict) and as_number(d.get("measured_s")) is not None else None


def as_number(value: Any) -> float | None:
    """A sample's figure as a float; None for anything not a number (absent, a bool)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def machine_reasons(d: dict[str, Any]) -> list[str]:
    """What disturbed the run, each as a phrase with its numbers; empty for a quiet machine
    (or too short a measurement to tell)."""
    span = as_number(d.get("measured_s")) or 0.0
    if span < MIN_SAMPLED_S:
        return []
    cores = int(as_number(d.get("cores")) or 0)
    of = f" of {cores}" if cores else ""
    out = []
    other = as_number(d.get("other_cores_mean"))
    if other is not None and other > max_other_cores(cores):
        peak = as_number(d.get("other_cores_max"))
        out.append(f"other processes used {_over(other, max_other_cores(cores))}{of} cores "
                   "on average during the measurement" + (f" (up to {peak:.1f} in one second)"
                                     if peak is not None and peak >= other + 0.1 else "")
                   + f" (quiet: ≤ {max_other_cores(cores):.2g})")
    steal = as_number(d.get("steal_cores_mean"))
    if steal is not None and steal > MAX_STEAL_CORES:
        out.append(f"the hypervisor took {steal:.2f}{of} cores (CPU steal) from this VM")
    throttled = as_number(d.get("throttled_s"))
    if throttled is not None and throttled > MAX_THROTTLED_SHARE * span:
        periods = int(as_number(d.get("throttled_periods")) or 0)
        out.append(f"the cgroup's CPU quota throttled this run in {periods:,} periods, "
                   f"{fmt.duration(throttled * 1e3)} in all ({throttled / span:.0%} of the "
                   "measurement)")
    memory = as_number(d.get("memory_pressure_pct"))
    if memory is not None and memory > MAX_MEMORY_PRESSURE_PCT:
        out.append(f"tasks waited on memory {memory:.0f}% of the time (memory pressure)")
    return out


def _over(value: float, limit: float) -> str:
    """``value``, over ``limit``, in as few decimals (one to three) as show it over: 1.3, but
    0.43 beside a limit of 0.4 ('0.4 … (quiet: ≤ 0.4)' read as within it)."""
    for places in (1, 2):
        text = f"{value:.{places}f}"
        if float(text) > limit:
            return text
    return f"{value:.3f}"


def _preempted(d: dict[str, Any]) -> str:
    n = as_number(d.get("involuntary_switches"))
    if n is None:
        return ""
    return f"this run's threads were preempted {int(n):,} time{'' if int(n) == 1 else 's'}"


def machine_finding(environment: dict[str, Any] | None) -> Finding | None:
    """The ``machine`` finding of a disturbed run: 'machine: other processes used 1.3 of 2
    cores on average during the measurement; this run's threads were preempted 4,100 times;
    expect times inflated …'; None on a quiet machine."""
    d = disturbance_of(environment)
    reasons = machine_reasons(d) if d is not None else []
    if d is None or not reasons:
        return None
    parts = [*reasons, _preempted(d)]
    return Finding("machine: " + "; ".join(p for p in parts if p) + "; expect times inflated "
                   "and not comparable with a quiet run's (by how much on this project's "
                   "machine: BENCHMARKS.md \"Disturbance\")", "machine")


def quiet_machine(environment: dict[str, Any] | None, required: bool = False) -> Check:
    """Whether the machine was quiet while the run measured (the limits above). Advisory —
    a disturbed run stays VALID, marked DISTURBED — unless ``required`` (``--require-quiet``),
    when a disturbed run is INVALID. LoadGen-style: the detail says what to do."""
    d = disturbance_of(environment)
    if d is None:
        return Check(QUIET_MACHINE, True, "not checked: no samples of the machine",
                     advisory=not required)
    span = float(d["measured_s"])
    if span < MIN_SAMPLED_S:
        return Check(QUIET_MACHINE, True, f"not checked: measured for {span:.2f} s only",
                     advisory=not required)
    reasons = machine_reasons(d)
    if reasons:
        fix = ("stop other work on this machine (or keep it off this run's cores: taskset, "
               "cgroups) and run again")
        mark = ("DISTURBED (--require-quiet): " if required else "DISTURBED: ")
        return Check(QUIET_MACHINE, False, mark + "; ".join(reasons) + f"; {fix}"
                     + ("" if required else "; --require-quiet makes such a run INVALID"),
                     advisory=not required)
    other = as_number(d.get("other_cores_mean")) or 0.0
    cores = int(as_number(d.get("cores")) or 0)
    return Check(QUIET_MACHINE, True, f"other processes {other:.2f} of {cores} cores "
                 f"(≤ {max_other_cores(cores):.2g})", advisory=not required)
