"""The Optimisation Lab's lesson "a much faster model, about the same latency" (no figures in
here): the Workshop's practice question.

The preset is a real pipeline written the way a beginner would write it: image-cnn with the
naive preprocessing (pixel loops in Python), batching on, eight clients keeping the server
saturated. Step one quantises the model (``int8``): the forward pass gets much faster, the
requests barely do, because the forward pass was a small share of the time and the queue in
front of the slow preprocessing does not care. Step two applies the levers that do help.
Everything the lesson shows is measured when it runs; this module says what to run, what to
ask, and how the answer is read from the runs.
"""
from __future__ import annotations

from collections.abc import Sequence

from latency.analysis.ab import ABResult, merge
from latency.analysis.result import RunResult
from latency.core import fmt
from latency.core.config import RunConfig
from latency.execution.ab import ABPlan, variant_config
from latency.workshop.interval import MIN_PAIRS, ChangeInterval, change_interval
from latency.workshop.lesson import Answer, Lesson, Step

#: the saturated beginner's server: naive pre/postprocessing on one worker thread, batches
#: of up to 8 (40 ms to fill: preprocessed requests trickle in, and int8 pays off from batches
#: of two up), eight clients always waiting.
LESSON_SETTINGS = dict(model="image-cnn", pre="naive", post="naive", batch_size=8,
                       max_batch_delay_ms=40.0, replicas=1, threads=1, preprocess_workers=1,
                       concurrency=8, warmup=8)
#: each step's A/B: blocks of this many measured seconds, this many pairs (read when the
#: lesson is made, so a test may shorten them). Step 1's change is small — the forward pass is
#: ~2 % of the mean, so Amdahl allows ~1 % — and on a shared machine whole blocks scatter (a
#: neighbour's job slows one block two- or threefold), so it takes four pairs of 3 s for its
#: p50 change to stop swinging by tens of percent between tries; its interval (the page shows
#: it) may still hold both signs. Step 2's change (~−95 %) is plain from three short pairs
#: (three: the fewest with an interval, latency.workshop.interval.MIN_PAIRS).
#: Measured: docs/optimisation.md, "How sure the lesson is".
BLOCK_S = 3.0
PAIRS = 4
HELP_BLOCK_S = 2.0
HELP_PAIRS = 3
#: step 1's question: what to look at next, once int8 barely moved the latency
CHOICES = ("Quantise harder: the model must still be the bottleneck",
           "Where the rest of the time goes: the component bars",
           "Buy a GPU")
#: below this share of the baseline's mean, the forward pass cannot be what to fix next
#: (Amdahl: a faster model moves the total by at most its share)
SMALL_SHARE = 0.5


def lesson_baseline(duration_s: float | None = None) -> RunConfig:
    return RunConfig(duration_s=BLOCK_S if duration_s is None else duration_s,
                     **LESSON_SETTINGS)  # type: ignore[arg-type]


def quantise_plan(duration_s: float | None = None, pairs: int | None = None) -> ABPlan:
    """Step 1: the same server with an int8 model."""
    base = lesson_baseline(duration_s)
    return ABPlan(base, variant_config(base, optimize=["int8"]), PAIRS if pairs is None else pairs)


def helping_plan(duration_s: float | None = None, pairs: int | None = None) -> ABPlan:
    """Step 2: keep int8 and fix what the bars point at — vectorised pre/postprocessing and
    more preprocess workers."""
    base = lesson_baseline(HELP_BLOCK_S if duration_s is None else duration_s)
    return ABPlan(base, variant_config(base, optimize=["int8"], pre="fast", post="fast",
                                       preprocess_workers=4),
                  HELP_PAIRS if pairs is None else pairs)


def measured(ab: ABResult, interval: ChangeInterval | None) -> str:
    """What an A/B of the lesson measured, in one sentence from its runs: the model's own
    speed-up (timed alone) and the end-to-end p50 change with its interval, saying plainly
    when the interval cannot tell the sign."""
    h = ab.headline
    model = (f"the model alone {fmt.change(h.forward_alone_change)}"
             if h.forward_alone_change is not None
             else f"the forward pass {fmt.change(h.forward_mean_change)}")
    if interval is None:
        end = (f"end-to-end p50 {fmt.change(h.p50_change)} (no interval: fewer than "
               f"{MIN_PAIRS} complete pairs)")
    else:
        end = interval.text()
    return f"{model}; {end}"


def what_to_look_at(step: Step, labels: Sequence[str], results: Sequence[RunResult]) -> Answer:
    """Step 1's answer from its blocks: where the baseline's time went, and so whether the
    model (its share of the mean) or the rest is what to look at next."""
    blocks = [(arm, r) for arm, r in zip(labels, results) if r.status != "failed"]
    ab = merge({"pairs": sum(1 for arm in labels if arm == "A")}, blocks)
    comps = ab.a.components_ms
    top = sorted(comps, key=lambda c: -(comps[c].mean or 0.0))[:2]
    share = sum(comps[c].mean or 0.0 for c in top) / (ab.a.latency_ms.mean or 1.0)
    forward = ab.headline.forward_share or 0.0
    value = CHOICES[1] if forward < SMALL_SHARE else CHOICES[0]
    return Answer(value, f"Measured: {measured(ab, change_interval(blocks))}. In A, "
                         f"**{top[0]}** and **{top[1]}** took {share:.0%} of the mean; the "
                         f"forward pass {forward:.0%}. Making the forward pass faster can only "
                         f"move the total by its share (Amdahl's law): here by about "
                         f"{fmt.change(ab.headline.amdahl_mean_change)}.")


def practice() -> Lesson:
    """The lesson, its steps' presets made now (from ``BLOCK_S`` and ``PAIRS``)."""
    return Lesson(
        "practice", "a much faster model, the same latency", (
            Step.ab("quantise", "int8", quantise_plan(),
                    question="What do you look at next?", answer_of=what_to_look_at,
                    choices=CHOICES,
                    intro="A = the beginner's server, B = the same with an **int8** model. "
                          "Watch the headline when the blocks finish.",
                    idea="Measure before you optimise: the bars say where the time goes."),
            Step.ab("help", "the levers that help", helping_plan(),
                    intro="B keeps int8 and fixes what the bars showed: vectorised "
                          "pre/postprocessing and more preprocess workers."),
        ),
        summary="A beginner's image server: naive preprocessing (pixel loops, a PNG round "
                "trip), eight clients keeping it saturated. We quantise the model to int8 and "
                "measure what the users get.")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure a step of the lesson a few times in this process, as the Lab runs it, and
    print each try's figures: ``python -m latency.workshop.practice --tries 3``."""
    import argparse
    import time

    from latency.execution.ab import run_ab

    p = argparse.ArgumentParser(description=main.__doc__.splitlines()[0] if main.__doc__
                                else None)
    p.add_argument("--step", choices=("quantise", "help"), default="quantise")
    p.add_argument("--tries", type=int, default=3)
    p.add_argument("--block-s", type=float, default=None, help="default: the lesson's")
    p.add_argument("--pairs", type=int, default=None, help="default: the lesson's")
    a = p.parse_args(argv)
    make = quantise_plan if a.step == "quantise" else helping_plan
    for t in range(a.tries):
        plan = make(a.block_s, a.pairs)
        blocks: list[tuple[str, RunResult]] = []

        def keep(i: int, n: int, arm: str, r: RunResult,
                 blocks: list[tuple[str, RunResult]] = blocks) -> None:
            blocks.append((arm, r))

        start = time.perf_counter()
        ab = run_ab(plan, on_block=keep)
        wall = time.perf_counter() - start
        print(f"try {t + 1}: {plan.pairs} pairs of {plan.baseline.duration_s:g} s, "
              f"{wall:.0f} s; requests A {ab.a.requests}, B {ab.b.requests}; p50 "
              f"{fmt.duration(ab.a.latency_ms.p50)} → {fmt.duration(ab.b.latency_ms.p50)}; "
              f"p99 {fmt.change(ab.headline.p99_change)}; "
              f"{measured(ab, change_interval(blocks))}", flush=True)
    return 0


__all__ = ["CHOICES", "LESSON_SETTINGS", "helping_plan", "lesson_baseline", "main",
           "measured", "practice", "quantise_plan", "what_to_look_at"]


if __name__ == "__main__":
    raise SystemExit(main())
