"""The workshop course: lessons in order, each a live measured experiment with a question asked
before its answer is shown. This module says what each lesson runs and asks; the answers are
computed from the runs when they finish (``answer``) — never a scripted number.

The lessons on serving LLMs (7–10) are ``llm_course``'s, on the same model.

Each lesson is sized for a 5-minute slot of a workshop on a 2-core machine: a few runs of a
few seconds, queued back to back as one group (nobody else's run lands between them), so its
wall time is the sum of its runs plus their start-up (``estimated_s``, shown on the page and
checked by ``bench/bench_course.py``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from latency.analysis.littles_law import littles_law
from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.core.records import REQUEST_COMPONENTS
from latency.simulation.queueing import mm1_max_rate_for_percentile
from latency.workshop.curve_reading import monotone
from latency.workshop.lesson import Answer, Lesson, Step

#: the synthetic server of the queueing lessons: 4 ms exponential service, one replica
SERVICE_MS = 4.0
CAPACITY_RPS = 1000.0 / SERVICE_MS
LOADS = (0.3, 0.6, 0.8, 0.9)
STALL_MS = 400.0
BATCHES = (1, 2, 4, 8, 16)


def _synthetic(**kw: Any) -> RunConfig:
    args = {k: kw.pop(k) for k in list(kw) if k in ("preprocess_ms", "forward_ms",
                                                   "forward_per_item_ms", "postprocess_ms",
                                                   "dist", "stall_ms", "stall_after")}
    args.setdefault("preprocess_ms", 0.0)
    args.setdefault("postprocess_ms", 0.0)
    return RunConfig(model="synthetic", model_args=args, **kw)


def _lesson(key: str, title: str, question: str, runs: tuple[tuple[str, RunConfig], ...],
            answer_of: Any, **kw: Any) -> Lesson:
    """A Workshop lesson: one step, under the lesson's own key and title."""
    return Lesson(key, title, (Step(key, title, runs, question, answer_of, **kw),))


def where_the_time_goes(seconds: float = 4.0) -> Lesson:
    cfg = RunConfig(model="image-cnn", pre="naive", post="naive", concurrency=1,
                    duration_s=seconds, warmup=8)
    return _lesson("where", "1. Where the time goes",
                  "One request to a beginner's image server (naive preprocessing). Which "
                  "component takes the largest share of its time?",
                  (("one client", cfg),), _where, choices=REQUEST_COMPONENTS,
                  idea="Measure before you optimise: the model is often not where the time "
                       "goes. The two classic mistakes: optimising the model first, and "
                       "reading the mean instead of the tail.")


def queueing(seconds: float = 4.0) -> Lesson:
    runs = tuple((f"{load:.0%} load", _synthetic(forward_ms=SERVICE_MS, dist="exponential",
                                                 rate=load * CAPACITY_RPS, duration_s=seconds,
                                                 seed=1))
                 for load in LOADS)
    return _lesson("queueing", "2. Queueing: the hockey stick",
                  f"The server does one request in {SERVICE_MS:g} ms on average "
                  f"({CAPACITY_RPS:g} req/s). At 90 % of that load, how many times longer is "
                  "the median latency than at 30 %?", runs, _queueing, unit="× longer",
                  idea="Near saturation the queue explodes: latency is not proportional to "
                       "load. Little's law, L = λW, holds on the measured run: the requests "
                       "in the system equal the arrival rate times the time each spends.")


def coordinated_omission(seconds: float = 4.0) -> Lesson:
    stall = {"forward_ms": 2.0, "stall_ms": STALL_MS, "stall_after": 300}
    runs = (("closed loop, 1 client", _synthetic(**stall, concurrency=1, duration_s=seconds)),
            ("open loop, 200 req/s", _synthetic(**stall, rate=200.0, duration_s=seconds,
                                                arrival="constant")))
    return _lesson("co", "3. Coordinated omission",
                  f"The model freezes once for {STALL_MS:g} ms. Measured closed loop (one "
                  "client that waits for each answer) and open loop (requests at their "
                  "intended times): which p99 shows the stall?", runs, _co,
                  choices=("closed loop", "open loop", "both", "neither"),
                  idea="A closed-loop client stops sending while the server is stuck, so the "
                       "stall hits one request and hides below the p99. Real users keep "
                       "arriving: the open loop times each request from its intended send "
                       "time, and every request that arrived during the stall carries its "
                       "wait.")


def batching(seconds: float = 3.0) -> Lesson:
    runs = tuple((f"batch ≤ {b}", _synthetic(forward_ms=4.0, forward_per_item_ms=0.5,
                                             batch_size=b, max_batch_delay_ms=2.0,
                                             concurrency=16, duration_s=seconds))
                 for b in BATCHES)
    return _lesson("batching", "4. Batching",
                  "A forward pass costs 4 ms + 0.5 ms per extra request in the batch; 16 "
                  "clients keep the server busy. How many times more requests per second does "
                  "batch ≤ 8 serve than batch 1?", runs, _batching, unit="× the throughput",
                  idea="Batching shares one forward pass among requests: throughput rises "
                       "until the batch is rarely full; past the knee a bigger batch only "
                       "adds waiting.")


#: 5. application targets: the SLO (on the p99 of the end-to-end latency) each sets and why
TARGETS: tuple[tuple[str, float, str], ...] = (
    ("conversational reply", 1000.0, "a person waits for the answer to a message: under 1 s "
                                     "end to end feels immediate"),
    ("search autocomplete", 100.0, "suggestions must keep up with typing: ~100 ms"),
    ("payment fraud check", 50.0, "inside the card payment's own budget: ~50 ms at p99"),
    ("content moderation", 5000.0, "in the background, before the post is shown widely: "
                                   "seconds are fine"),
)
#: the lesson's server: 6 ms exponential service, one replica — slow enough that the strict
#: targets bind inside the measured loads (M/M/1: p99 = ln(100)·6 ms / (1 − ρ))
TARGET_SERVICE_MS = 6.0
TARGET_CAPACITY_RPS = 1000.0 / TARGET_SERVICE_MS
TARGET_LOADS = (0.3, 0.45, 0.6, 0.75, 0.9)
#: the target the question asks about
ASKED_TARGET = "payment fraud check"


def targets(seconds: float = 15.0) -> Lesson:
    """Runs long enough for a p99 near saturation: a 4 s run at 80 % load measured 89 ms where
    16 s measured 159 ms (the queue of a short run has not grown to its steady state), and
    for the p99's confidence interval at the lower loads (≥ 1,000 independent requests)."""
    runs = tuple((f"{load:.0%} load", _synthetic(forward_ms=TARGET_SERVICE_MS,
                                                 dist="exponential",
                                                 rate=load * TARGET_CAPACITY_RPS,
                                                 duration_s=seconds, seed=2))
                 for load in TARGET_LOADS)
    slo = dict((name, ms) for name, ms, _ in TARGETS)[ASKED_TARGET]
    return _lesson("targets", "5. Targets are application-specific",
                  f"One server ({TARGET_SERVICE_MS:g} ms a request on average, at most "
                  f"{TARGET_CAPACITY_RPS:.0f} req/s), four applications, each with its own p99 "
                  f"target. What share of the server's capacity can the {ASKED_TARGET} "
                  f"(p99 ≤ {slo:g} ms) use?", runs, _targets, unit="% of capacity",
                  idea="There is no one good latency: the application sets the target, and "
                       "the target — not the hardware — sets how much of the server you can "
                       "sell. The same machine takes a fraction of its capacity for a strict "
                       "p99 and nearly all of it for a lenient one; the capacity question is "
                       "always asked at a target.")


#: the practice question — the quantisation paradox, the Optimisation Lab's lesson — is
#: lesson 6: the Workshop page shows it after this one
PRACTICE_AFTER = "targets"


def course() -> list[Lesson]:
    """The measured lessons in order: 1–5 on one-shot requests, 7–10 on serving LLMs
    (``llm_course``; lesson 6, the practice question, is the Optimisation Lab's)."""
    from latency.workshop.llm_course import llm_lessons

    return [where_the_time_goes(), queueing(), coordinated_omission(), batching(), targets(),
            *llm_lessons()]


def lesson(key: str) -> Lesson:
    for item in course():
        if item.key == key:
            return item
    raise KeyError(key)


# ---- answers, from the finished runs ------------------------------------------------------
Results = Sequence[RunResult]


def answer(item: Lesson | Step, results: Results) -> Answer:
    """A Workshop lesson's answer from its finished runs (in the lesson's order)."""
    step = item.steps[0] if isinstance(item, Lesson) else item
    return step.answer(results)


def _rows(labels: Sequence[str], results: Results) -> list[dict[str, Any]]:
    return [{"run": label, **_row(r)} for label, r in zip(labels, results)]


def _where(step: Step, labels: Sequence[str], results: Results) -> Answer:
    s = results[0].summary
    means = {c: s.components_ms[c].mean or 0.0 for c in REQUEST_COMPONENTS}
    top = max(means, key=means.__getitem__)
    total = s.latency_ms.mean or 1.0
    return Answer(top, f"{top}: {means[top] / total:.0%} of the mean "
                       f"{s.latency_ms.mean:.1f} ms; the forward pass "
                       f"{means['forward'] / total:.0%}.", _rows(labels, results))


def _queueing(step: Step, labels: Sequence[str], results: Results) -> Answer:
    rows = _rows(labels, results)
    ratio = rows[-1]["p50_ms"] / rows[0]["p50_ms"] if rows[0]["p50_ms"] else float("nan")
    law = littles_law(results[2].measured())
    checks = [repr(law)] if law is not None else []
    return Answer(ratio, f"the median is {ratio:.1f}× longer at 90 % load than at 30 % "
                         f"({rows[0]['p50_ms']:.1f} → {rows[-1]['p50_ms']:.1f} ms).",
                  rows, checks)


def _co(step: Step, labels: Sequence[str], results: Results) -> Answer:
    rows = _rows(labels, results)
    closed, open_ = rows[0]["p99_ms"], rows[1]["p99_ms"]
    shows = [label for label, p99 in (("closed loop", closed), ("open loop", open_))
             if p99 >= STALL_MS / 2]
    value = shows[0] if len(shows) == 1 else ("both" if shows else "neither")
    return Answer(value, f"closed-loop p99 {closed:.1f} ms, open-loop p99 {open_:.1f} ms: "
                         f"the open loop's is {open_ - closed:.0f} ms longer (the stall: "
                         f"{STALL_MS:g} ms).", rows)


def _batching(step: Step, labels: Sequence[str], results: Results) -> Answer:
    rows = _rows(labels, results)
    thr = [r["throughput_rps"] for r in rows]
    ratio = thr[BATCHES.index(8)] / thr[0] if thr[0] else float("nan")
    k = knee(thr)
    return Answer(ratio, f"batch ≤ 8 serves {ratio:.1f}× the requests of batch 1; the "
                         f"knee is at batch ≤ {BATCHES[k]} (the smallest within 10 % of "
                         "the best throughput).", rows)


def _targets(step: Step, labels: Sequence[str], results: Results) -> Answer:
    rows = _rows(labels, results)
    for row, load in zip(rows, TARGET_LOADS):
        row["load"] = load
    means = [m for r in results if (m := r.summary.components_ms["forward"].mean)]
    service_ms = float(np.mean(means)) if means else None  # None: no theory to set beside
    details = [capacity_at_target(rows, name, slo, service_ms) for name, slo, _ in TARGETS]
    asked = next(d for d in details if d["application"] == ASKED_TARGET)
    counts = [r["requests"] for r in rows]
    crossed = asked["measured"][:1].isdigit()
    checks = [] if asked["range_pct"] or not crossed else [
        f"Each p99 comes from one run of {min(counts):,}–{max(counts):,} requests, without "
        "a p99 confidence interval for the runs around the crossing: read these "
        "capacities to within several points."]
    return Answer(asked["load_pct"],
                  f"the {ASKED_TARGET} (p99 ≤ {asked['slo_ms']:g} ms) can use "
                  f"{asked['measured']} of the capacity, read off the measured p99 curve"
                  + (f"; M/M/1 theory with the measured {service_ms:.2f} ms service says "
                     f"{asked['theory']}." if service_ms else "."), rows, checks, details)


def capacity_at_target(rows: Sequence[dict[str, Any]], name: str, slo_ms: float,
                       service_ms: float | None = TARGET_SERVICE_MS) -> dict[str, Any]:
    """The highest load whose measured p99 meets ``slo_ms``, read off the measured curve
    (made non-decreasing, ``monotone``): linear between the last load that meets it and the
    first that misses it; "less than"/"at least" when the lowest load already misses it or
    the highest still meets it. Where the bracketing runs have p99 intervals (``p99_lo_ms``,
    ``p99_hi_ms``), the same reading of the interval's ends gives the capacity's range.
    Beside it, the M/M/1 closed form with the measured service time (p99 = ln 100 / (μ − λ),
    so λ = μ − ln 100 / SLO)."""
    loads = [float(r["load"]) for r in rows]
    curve = monotone([float(r["p99_ms"]) for r in rows])
    miss = next((i for i, v in enumerate(curve) if v > slo_ms), None)
    low = high = None
    if miss is None:
        pct, text = 100 * loads[-1], f"at least {loads[-1]:.0%} (every load measured)"
    elif miss == 0:
        pct, text = None, f"less than {loads[0]:.0%} (the lowest load measured misses it)"
    else:  # a crossing between two measured loads
        l0, l1 = loads[miss - 1], loads[miss]
        pct = 100 * _between(l0, l1, curve[miss - 1], curve[miss], slo_ms)
        text = f"{pct / 100:.0%}"
        bracket = rows[miss - 1], rows[miss]
        if all(r.get("p99_lo_ms") is not None and r.get("p99_hi_ms") is not None
               for r in bracket):
            # the upper p99 ends cross first (less capacity), the lower ends last; each
            # clamped to the bracket, where the measured curve says the crossing is
            low = 100 * _between(l0, l1, float(bracket[0]["p99_hi_ms"]),
                                 float(bracket[1]["p99_hi_ms"]), slo_ms)
            high = 100 * _between(l0, l1, float(bracket[0]["p99_lo_ms"]),
                                  float(bracket[1]["p99_lo_ms"]), slo_ms)
            text += f" ({low:.0f}–{high:.0f}% from the p99s' 95 % intervals)"
    theory = "—"  # no measured service time to put into the closed form
    if service_ms:
        # req/s at which an M/M/1 queue of the measured service meets p99 ≤ the SLO
        rate = 1000.0 * mm1_max_rate_for_percentile(service_ms, slo_ms, 0.99)
        # as a share of the nominal capacity the loads are measured against
        theory = (f"{rate / TARGET_CAPACITY_RPS:.0%}" if rate > 0
                  else "none (the service alone misses it)")
    return {"application": name, "slo_ms": slo_ms, "load_pct": pct, "measured": text,
            "theory": theory, "range_pct": (low, high) if low is not None else None}


def _between(l0: float, l1: float, y0: float, y1: float, slo_ms: float) -> float:
    """The load in [l0, l1] where the line through (l0, y0), (l1, y1) reaches ``slo_ms``."""
    if y1 == y0:
        return l0 if y0 > slo_ms else l1
    return min(max(l0 + (l1 - l0) * (slo_ms - y0) / (y1 - y0), l0), l1)


def knee(throughputs: Sequence[float], within: float = 0.10) -> int:
    """Index of the smallest setting whose throughput is within ``within`` of the best."""
    best = max(throughputs)
    return next(i for i, t in enumerate(throughputs) if t >= (1 - within) * best)


def _row(r: RunResult) -> dict[str, Any]:
    s = r.summary
    return {"status": r.status, "requests": s.requests, "throughput_rps": s.throughput_rps,
            "p50_ms": s.latency_ms.p50 or 0.0, "p99_ms": s.latency_ms.p99 or 0.0,
            "mean_ms": s.latency_ms.mean or 0.0,
            "batch_mean": s.batch_size_mean or 1.0,
            "p99_lo_ms": s.latency_ms.p99_ci95[0] if s.latency_ms.p99_ci95 else None,
            "p99_hi_ms": s.latency_ms.p99_ci95[1] if s.latency_ms.p99_ci95 else None}


def guess_histogram(guesses: Sequence[Any], item: Lesson | Step
                    ) -> tuple[list[str], list[int]]:
    """The room's guesses as (labels, counts): one bar per choice, or numeric guesses in bins."""
    item = item.steps[0] if isinstance(item, Lesson) else item
    if item.choices is not None:
        return list(item.choices), [sum(1 for g in guesses if g == c) for c in item.choices]
    values = np.array([float(g) for g in guesses if isinstance(g, (int, float))])
    if not len(values):
        return [], []
    edges = np.unique(np.quantile(values, np.linspace(0, 1, min(8, len(values)) + 1)))
    if len(edges) < 2:
        return [f"{values[0]:g}"], [len(values)]
    counts, edges = np.histogram(values, bins=edges)
    return [f"{a:.3g}–{b:.3g}" for a, b in zip(edges[:-1], edges[1:])], counts.tolist()


__all__ = ["PRACTICE_AFTER", "TARGETS", "answer", "capacity_at_target", "course",
           "guess_histogram", "knee", "lesson", "monotone", "targets"]
