"""The course's four lessons on serving LLMs (7–10), measured live on synthetic-lm: a
generation server whose prefill and decode steps hold set times, so each lesson's effect is the
scheduler's and not a model's luck — and the numbers a room sees are the ones its runs measured.

7. *Time to first token explodes under load*: TTFT's parts (at p99) as the rate rises — the
   queue for a slot grows, the prefill does not.
8. *The stutter*: a long prompt arrives while short ones stream; prefilled whole it freezes
   their streams for its whole prefill, chunked it costs each of their gaps one chunk
   (Sarathi-Serve) — and its own first token comes later.
9. *Static vs continuous batching*: the same closed-loop load both ways (Orca).
10. *Goodput, not throughput*: the highest rate at which 90 % of the requests meet a chat
    product's TTFT and TPOT targets, read off measured runs and predicted by the simulator
    fitted on the lightest of them, side by side; then the practice question — "a 40 % faster
    decode step, and TTFT p99 did not move: why?" — measured.

The loads are shares of the server's capacity as its costs say it (``capacity_rps``: the
simulated saturation of the parametric server, no scheduler's own work): the real server, with
its own work, saturates a little below, which the lesson's highest load shows.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from latency.core.config import RunConfig
from latency.core.gen_records import TTFT_COMPONENTS, token_gaps
from latency.workshop.curve_reading import monotone
from latency.workshop.lesson import Answer, Lesson, Step

#: the lessons' server (ms): a prefill call of 1 + 0.05 per prompt token, a decode step of 4 +
#: 0.2 per sequence in it — a step shared by the batch costs nearly what one sequence alone
#: does, as on a GPU, where decoding is bound by reading the weights
SERVER_ARGS: dict[str, float] = {"prefill_ms": 1.0, "prefill_ms_per_token": 0.05,
                                 "step_ms": 4.0, "step_ms_per_seq": 0.2}
SLOTS = 8
PROMPT_TOKENS, OUTPUT_TOKENS = 64, 32
#: 7. the loads, as shares of the capacity
TTFT_LOADS = (0.3, 0.6, 0.8, 0.95)
#: TTFT's parts a guess may name: (choice, the part's key)
TTFT_CHOICES: tuple[tuple[str, str], ...] = (
    ("the queue for a slot", "queue"), ("tokenizing", "tokenize"),
    ("the prompt's prefill", "prefill"), ("others' steps, once admitted", "prefill_stall"),
    ("the hand-off", "network"))
#: 8. the stutter: three short prompts, then a long one, arriving evenly (``STUTTER_RATE``):
#: a stream (60 tokens, ~0.3 s) lasts longer than three arrivals' gaps, so each long prompt
#: arrives while the three before it decode — by construction, not by the threads' luck —
#: and with a slot for everyone nobody queues for one
STUTTER_PROMPTS = Path(__file__).with_name("prompts") / "stutter.jsonl"
STUTTER_SHORT, STUTTER_LONG = 8, 1500
STUTTER_RATE, STUTTER_OUTPUT, STUTTER_REQUESTS = 10.0, 60, 32
CHUNK = 128
STUTTER_CHOICES = ("smoother streams, a later first token for the long prompt",
                   "smoother streams and an earlier first token",
                   "no difference", "choppier streams")
#: a change of the others' longest gap that counts as one (a share)
STUTTER_CHANGE = 0.3
#: 9. static vs continuous: closed loop, output lengths that differ (a static batch waits for
#: its longest)
BATCH_CLIENTS, BATCH_OUTPUT = 16, "uniform:8:96"
#: 10. a chat product's targets on this server (a first token in a blink; a stream as fast as
#: a reader): TTFT and TPOT, met by ``ATTAINMENT`` of the requests
CHAT_TTFT_MS, CHAT_TPOT_MS = 150.0, 14.0
ATTAINMENT = 0.9
GOODPUT_LOADS = (0.4, 0.6, 0.8, 0.95)
#: the practice question: decode 40 % faster, long prompts (a RAG product: prefill-heavy)
FASTER = 0.4
PRACTICE_PROMPT, PRACTICE_OUTPUT, PRACTICE_LOAD = 1024, 32, 0.5
PRACTICE_CHOICES = ("TTFT is the queue and the prefill: no decode step is in it",
                    "the speed-up was lost in the measurement's noise",
                    "the server was saturated",
                    "it did move: decode steps are in TTFT here")
#: TTFT p99 "did not move": changed by less than this share
UNMOVED = 0.10
#: ... or by less than this share of TPOT's change: decode steps inside TTFT would move it as
#: TPOT moved, while a faster step also shortens the queue for a slot a little (and a p99 of a
#: few dozen requests scatters by ~10 % between two runs on a busy machine)
LIKE_DECODE = 0.5


def _gen(model_args: dict[str, float] | None = None, **kw: Any) -> RunConfig:
    kw.setdefault("max_running", SLOTS)
    kw.setdefault("prompt_tokens", str(PROMPT_TOKENS))
    kw.setdefault("output_tokens", str(OUTPUT_TOKENS))
    kw.setdefault("warmup", 8)
    return RunConfig(model="synthetic-lm", model_args={**SERVER_ARGS, **(model_args or {})},
                     **kw)


@lru_cache(maxsize=8)
def capacity_rps(prompt_tokens: int = PROMPT_TOKENS, output_tokens: int = OUTPUT_TOKENS,
                 args: tuple[tuple[str, float], ...] = tuple(SERVER_ARGS.items())) -> float:
    """Requests per second the lessons' server completes when it is never idle, as its set
    costs say (the parametric server simulated saturated: no scheduler's own work)."""
    from latency.simulation.gen_capacity import saturation_rps
    from latency.simulation.gen_parametric import ParametricCosts, parametric_setup

    costs = ParametricCosts(max_context=4096, **dict(args))
    setup = parametric_setup(costs, prompt_tokens=str(prompt_tokens),
                             output_tokens=str(output_tokens), rate=1.0, requests=400,
                             max_running=SLOTS)
    return round(saturation_rps(setup), 1)


def ttft_under_load(seconds: float = 6.0) -> Lesson:
    cap = capacity_rps()
    runs = tuple((f"{load * cap:.1f} req/s", _gen(rate=round(load * cap, 2),
                                                  duration_s=seconds, seed=1))
                 for load in TTFT_LOADS)
    step = Step("ttft", "7. Time to first token explodes under load", runs,
                f"A chat server with {SLOTS} slots (sequences it generates at once) serves "
                f"{PROMPT_TOKENS}-token prompts and {OUTPUT_TOKENS}-token answers; its steps' "
                f"costs allow ~{cap:g} requests/s. From 30 % to 95 % of that load, which "
                "part of the time to first token (at p99) grows the most?", _ttft,
                choices=tuple(c for c, _ in TTFT_CHOICES),
                idea="A request's first token waits for a slot: every slot is busy "
                     "generating someone else's answer, and the slots free up only as fast as "
                     "the decode steps finish those answers. The model's own work for the "
                     "first token — the prefill — is the same at every load; the queue for a "
                     "slot is what explodes, as in any queue near saturation.")
    return Lesson("ttft", step.title, (step,))


def stutter(requests: int = STUTTER_REQUESTS) -> Lesson:
    common: dict[str, Any] = dict(prompts=str(STUTTER_PROMPTS), prompt_tokens=None,
                  output_tokens=str(STUTTER_OUTPUT), rate=STUTTER_RATE, arrival="constant",
                  requests=requests, warmup=0, max_step_tokens=2048)
    runs = (("whole prefill", _gen(**common)),
            (f"chunked prefill ({CHUNK})", _gen(chunked_prefill=CHUNK, **common)))
    step = Step("stutter", "8. The stutter", runs,
                f"Three short prompts stream their answers; a {STUTTER_LONG:,}-token prompt "
                "arrives. Prefilled whole, a step that prefills decodes nothing. Prefilled in "
                f"chunks of {CHUNK} tokens beside the others' decodes, what changes?", _stutter,
                choices=STUTTER_CHOICES,
                idea="Prefill-first scheduling stops every stream for the length of a long "
                     "prompt's prefill: each of them sees one gap as long as that whole "
                     "prefill — the stutter. Chunked prefill (Sarathi-Serve) splits the "
                     "prompt over several steps and decodes the others in each, so no gap is "
                     "longer than one chunk; the long prompt itself pays, its first token a "
                     "few steps later.")
    return Lesson("stutter", step.title, (step,))


def static_vs_continuous(seconds: float = 6.0) -> Lesson:
    common: dict[str, Any] = dict(concurrency=BATCH_CLIENTS, output_tokens=BATCH_OUTPUT,
                                  duration_s=seconds, seed=2)
    runs = (("static batching", _gen(batching="static", **common)),
            ("continuous batching", _gen(batching="continuous", **common)))
    step = Step("static", "9. Static vs continuous batching", runs,
                f"{BATCH_CLIENTS} clients ask for answers of 8 to 96 tokens; the server runs "
                f"{SLOTS} at once. Batched statically (a new batch when the whole last one "
                "has finished) or continuously (a sequence joins or leaves at every step), "
                "how many times the tokens per second does continuous batching serve?",
                _static, unit="× the tokens/s",
                idea="A static batch runs as long as its longest answer: the slots of the "
                     "short ones sit empty while it finishes, and a new request waits for the "
                     "whole batch. Iteration-level scheduling (Orca; every server since) "
                     "fills a slot the step after it frees: more tokens per second, and a "
                     "first token without waiting for a stranger's long answer.")
    return Lesson("static", step.title, (step,))


def goodput(seconds: float = 8.0) -> Lesson:
    cap = capacity_rps()
    slo: dict[str, Any] = dict(slo_ttft_ms=CHAT_TTFT_MS, slo_tpot_ms=CHAT_TPOT_MS)
    runs = tuple((f"{load * cap:.1f} req/s", _gen(rate=round(load * cap, 2),
                                                  duration_s=seconds, seed=3, **slo))
                 for load in GOODPUT_LOADS)
    measure = Step("goodput", "Goodput, not throughput", runs,
                   f"A chat product needs its first token within {CHAT_TTFT_MS:g} ms and then "
                   f"a token every {CHAT_TPOT_MS:g} ms or faster, for {ATTAINMENT:.0%} of its "
                   f"requests. The server's steps' costs allow ~{cap:g} requests/s. What is "
                   "the highest rate (requests/s) that meets both targets?", _goodput,
                   unit="requests/s",
                   intro="Four loads, measured; the simulator, fitted on the lightest run "
                         "alone, predicts the whole curve beside them.",
                   idea="Throughput counts every answer; goodput (DistServe) counts the "
                        "answers that met their targets. Past the knee the server is busy "
                        "serving requests too late to count: throughput still climbs while "
                        "goodput falls. The capacity to plan with is the highest rate that "
                        "meets the targets — and a simulator fitted on one light run can "
                        "find it without the heavy ones.")
    pcap = capacity_rps(PRACTICE_PROMPT, PRACTICE_OUTPUT)
    practice: dict[str, Any] = dict(prompt_tokens=str(PRACTICE_PROMPT),
                                    output_tokens=str(PRACTICE_OUTPUT),
                                    rate=round(PRACTICE_LOAD * pcap, 2), duration_s=seconds,
                                    seed=4)
    faster = {k: SERVER_ARGS[k] * (1 - FASTER) for k in ("step_ms", "step_ms_per_seq")}
    why = Step("decode40", "A 40 % faster decode step",
               (("as it is", _gen(**practice)),
                (f"decode {FASTER:.0%} faster", _gen(model_args=faster, **practice))),
               f"A RAG product sends {PRACTICE_PROMPT:,}-token prompts at half the rate its "
               f"costs allow. An engineer makes the decode step {FASTER:.0%} faster: TPOT falls, "
               "but TTFT p99 barely moves. Why?", _decode40, choices=PRACTICE_CHOICES,
               intro="The practice question: the same load, the decode step as it is and "
                     f"{FASTER:.0%} faster.",
               idea="Know which part of the time a lever touches before you pull it: TTFT is "
                    "the wait for a slot and the prompt's prefill, and a faster decode step "
                    "is in neither — it shortens every later gap (TPOT) and frees slots "
                    "sooner, which matters only when requests queue for slots. For TTFT, "
                    "make the prefill faster (or chunk it, or cache the prompt).")
    return Lesson("goodput", "10. Goodput, not throughput", (measure, why),
                  summary="The highest rate meeting a chat product's targets, measured and "
                          "simulated; then the practice question for LLMs.")


def llm_lessons() -> list[Lesson]:
    """Lessons 7–10, in order."""
    return [ttft_under_load(), stutter(), static_vs_continuous(), goodput()]


# ---- answers, from the finished runs ------------------------------------------------------
def _ttft_row(label: str, r: Any) -> dict[str, Any]:
    """A run's load, TTFT and TPOT, and TTFT's parts at its p99 (scaled to it)."""
    s = r.summary
    parts = dict(s.ttft_p99_parts_ms)
    return {"run": label, "requests": s.requests, "offered_rps": s.offered_rps or 0.0,
            "throughput_rps": s.throughput_rps, "ttft_p50_ms": s.ttft_ms.p50 or 0.0,
            "ttft_p99_ms": s.ttft_ms.p99 or 0.0, "tpot_p50_ms": s.tpot_ms.p50 or 0.0,
            # the prefill's own cost, read off every request (the p99's few say little of it)
            "prefill_p50_ms": float(s.components_ms["prefill"].p50 or 0.0)
            if "prefill" in s.components_ms else 0.0,
            "parts": {k: float(parts.get(k, 0.0)) for k in TTFT_COMPONENTS}}


def _ttft(step: Step, labels: Sequence[str], results: Sequence[Any]) -> Answer:
    rows = [_ttft_row(label, r) for label, r in zip(labels, results)]
    low, high = rows[0]["parts"], rows[-1]["parts"]
    grew = {key: high[key] - low[key] for _, key in TTFT_CHOICES}
    top = max(grew, key=grew.__getitem__)
    value = next(c for c, key in TTFT_CHOICES if key == top)
    q = rows[0]["parts"]["queue"], rows[-1]["parts"]["queue"]
    p = rows[0]["prefill_p50_ms"], rows[-1]["prefill_p50_ms"]
    text = (f"{value}: TTFT p99 went from {rows[0]['ttft_p99_ms']:.1f} to "
            f"{rows[-1]['ttft_p99_ms']:.1f} ms, and of it the queue for a slot from "
            f"{q[0]:.1f} to {q[1]:.1f} ms while the prefill (its median over every request) "
            f"stayed {p[0]:.1f} → {p[1]:.1f} ms.")
    checks = []
    for row in rows:
        total = sum(row["parts"].values())
        if abs(total - row["ttft_p99_ms"]) > 0.02 * row["ttft_p99_ms"] + 0.05:
            checks.append(f"{row['run']}: its parts sum to {total:.1f} ms, its TTFT p99 is "
                          f"{row['ttft_p99_ms']:.1f} ms")
    last = rows[-1]
    if last["offered_rps"] and last["throughput_rps"] < 0.95 * last["offered_rps"]:
        checks.append(f"At {last['run']} the server served {last['throughput_rps']:.1f} of "
                      f"the {last['offered_rps']:.1f} requests/s offered: past its real "
                      "capacity (its own scheduling work is not in the costs), the queue grew "
                      "through the whole run.")
    return Answer(value, text, rows, checks)


def _stream_figures(r: Any) -> dict[str, Any]:
    """The short prompts' gaps (ms; their longest and p99) and the long prompts' TTFT."""
    rows, tokens = r.rows, r.tokens
    ok = np.flatnonzero((rows["status"] == 0) & ~rows["warmup"])
    long_ = ok[rows["prompt_tokens"][ok] >= STUTTER_LONG // 2]
    short = ok[rows["prompt_tokens"][ok] < STUTTER_LONG // 2]
    t = tokens[np.isin(tokens["request"], short)]
    gaps, _ = token_gaps(t)
    same = t["request"][1:] == t["request"][:-1]
    at = (t["t_delivered"][1:][same] - int(rows["t_intended"][ok].min())) / 1e9
    ttft = (rows["t_first_deliv"] - rows["t_intended"])[long_] / 1e6
    g = gaps / 1e6
    freezes = _freezes_ms(rows[long_], t)
    return {"freeze_ms": float(np.median(freezes)) if len(freezes) else 0.0,
            "freezes": int(len(freezes)),
            "gap_max_ms": float(g.max()) if len(g) else 0.0,
            "gap_p99_ms": float(np.percentile(g, 99)) if len(g) else 0.0,
            "gap_p50_ms": float(np.median(g)) if len(g) else 0.0,
            "long_ttft_ms": float(ttft.mean()) if len(ttft) else 0.0,
            "long_prompts": int(len(long_)), "gaps_ms": g.tolist(), "gaps_at_s": at.tolist()}


def _freezes_ms(long_rows: np.ndarray, short_tokens: np.ndarray) -> np.ndarray:
    """The stutter, one value per (long prompt, short stream) pair: the longest gap of the
    short stream that overlaps the long prompt's prefill (its admission to its first token),
    in ms. Their median is what a stream typically froze while a long prompt was prefilled:
    one hiccup changes one pair, never the answer (the longest gap of the run did)."""
    req, at = short_tokens["request"], short_tokens["t_delivered"]
    same = req[1:] == req[:-1]
    start, end, who = at[:-1][same], at[1:][same], req[1:][same]
    out = []
    for a, f in zip(long_rows["t_admitted"].tolist(), long_rows["t_first"].tolist()):
        over = (start < f) & (end > a)
        for r in np.unique(who[over]).tolist():
            out.append(float((end - start)[over & (who == r)].max()) / 1e6)
    return np.asarray(out)


def _stutter(step: Step, labels: Sequence[str], results: Sequence[Any]) -> Answer:
    rows = [{"run": label, "requests": r.summary.requests, **_stream_figures(r)}
            for label, r in zip(labels, results)]
    whole, chunked = rows
    change = chunked["freeze_ms"] / whole["freeze_ms"] - 1 if whole["freeze_ms"] else 0.0
    later = chunked["long_ttft_ms"] > whole["long_ttft_ms"]
    if change <= -STUTTER_CHANGE:
        value = STUTTER_CHOICES[0] if later else STUTTER_CHOICES[1]
    else:
        value = STUTTER_CHOICES[3] if change >= STUTTER_CHANGE else STUTTER_CHOICES[2]
    text = (f"{value}: while a {STUTTER_LONG:,}-token prompt was prefilled, a short prompt's "
            f"stream typically froze for {whole['freeze_ms']:.1f} ms whole (the whole "
            f"prefill) and {chunked['freeze_ms']:.1f} ms chunked (the median of "
            f"{whole['freezes']} and {chunked['freezes']} streams' longest gap in a long "
            f"prefill), their median gap staying {whole['gap_p50_ms']:.1f} → "
            f"{chunked['gap_p50_ms']:.1f} ms; the long prompt's first token came after "
            f"{whole['long_ttft_ms']:.1f} ms whole and {chunked['long_ttft_ms']:.1f} ms "
            "chunked.")
    return Answer(value, text, rows)


def _static(step: Step, labels: Sequence[str], results: Sequence[Any]) -> Answer:
    rows = [{"run": label, "requests": r.summary.requests,
             "tokens_per_s": r.summary.output_tokens_per_s,
             "throughput_rps": r.summary.throughput_rps,
             "ttft_p50_ms": r.summary.ttft_ms.p50 or 0.0,
             "ttft_p99_ms": r.summary.ttft_ms.p99 or 0.0,
             "running_mean": float(r.summary.scheduler.get("mean_running", 0.0))}
            for label, r in zip(labels, results)]
    static, cont = rows
    ratio = cont["tokens_per_s"] / static["tokens_per_s"] if static["tokens_per_s"] else \
        float("nan")
    text = (f"continuous batching served {ratio:.2f}× the tokens per second "
            f"({static['tokens_per_s']:.0f} → {cont['tokens_per_s']:.0f}), its slots "
            f"{cont['running_mean']:.1f} of {SLOTS} busy on average against "
            f"{static['running_mean']:.1f}; the median first token came after "
            f"{static['ttft_p50_ms']:.0f} ms static and {cont['ttft_p50_ms']:.0f} ms "
            "continuous.")
    return Answer(ratio, text, rows)


def _goodput(step: Step, labels: Sequence[str], results: Sequence[Any]) -> Answer:
    rows = [{"run": label, "requests": r.summary.requests,
             "offered_rps": r.summary.offered_rps or 0.0,
             "throughput_rps": r.summary.throughput_rps,
             "goodput_rps": r.summary.goodput_rps or 0.0,
             "met_share": r.summary.slo_met_share or 0.0,
             "ttft_p99_ms": r.summary.ttft_ms.p99 or 0.0,
             "tpot_p99_ms": r.summary.tpot_ms.p99 or 0.0}
            for label, r in zip(labels, results)]
    measured, text = highest_rate_meeting([r["offered_rps"] for r in rows],
                                          [r["met_share"] for r in rows], ATTAINMENT)
    curve, best = simulated_goodput(results[0])
    details = [{"rate": p.rate, "throughput_rps": p.throughput_rps,
                "goodput_rps": p.goodput_rps or 0.0, "met_share": p.met_share or 0.0}
               for p in curve.points]
    sim = best.rate
    for row in rows:  # the two answers, for the chart's markers
        row["best_measured_rps"], row["best_simulated_rps"] = measured, sim
    said = (f"the simulator, fitted on the {labels[0]} run alone, predicts "
            + (f"{sim:.1f} requests/s" if sim is not None else "none")
            + (f" ({sim / measured - 1:+.0%} from the measured)" if sim and measured else ""))
    value = measured if measured is not None else float("nan")
    targets = f"TTFT ≤ {CHAT_TTFT_MS:g} ms and TPOT ≤ {CHAT_TPOT_MS:g} ms"
    return Answer(value, f"{text} with {ATTAINMENT:.0%} of the requests meeting {targets}; "
                         f"{said}. Throughput at the highest load: "
                         f"{rows[-1]['throughput_rps']:.1f}/s, goodput "
                         f"{rows[-1]['goodput_rps']:.1f}/s.", rows, [], details)


def highest_rate_meeting(rates: Sequence[float], shares: Sequence[float],
                         attainment: float) -> tuple[float | None, str]:
    """The highest rate whose share of requests meeting the targets is ``attainment`` or
    more, read off the measured points (made non-increasing: a share cannot rise with the
    load, so a rise is noise), linear between the last that meets it and the first that
    misses it. None (and why) when the lowest already misses it."""
    falling = [-v for v in monotone([-s for s in shares])]
    miss = next((i for i, s in enumerate(falling) if s < attainment), None)
    if miss is None:
        return rates[-1], f"at least {rates[-1]:.1f} requests/s (every load measured meets it)"
    if miss == 0:
        return None, f"less than {rates[0]:.1f} requests/s (the lightest load misses it)"
    r0, r1, s0, s1 = rates[miss - 1], rates[miss], falling[miss - 1], falling[miss]
    rate = r0 + (r1 - r0) * (s0 - attainment) / (s0 - s1) if s0 != s1 else r0
    return rate, (f"{rate:.1f} requests/s (read between the last load measured that meets it "
                  "and the first that misses it)")


def simulated_goodput(run: Any) -> tuple[Any, Any]:
    """The goodput curve and the highest rate meeting the chat targets, simulated from one
    measured run (its costs fitted, its lengths resampled)."""
    from latency.simulation.gen_capacity import best_rate, gen_sweep
    from latency.simulation.gen_replay import gen_replay

    setup = gen_replay(run, rate=run.config.rate, requests=400, seed=0,
                       slo_ttft_ms=CHAT_TTFT_MS, slo_tpot_ms=CHAT_TPOT_MS)
    best, curve = best_rate(setup, gen_sweep(setup), ATTAINMENT, bisections=4)
    return curve, best


def _decode40(step: Step, labels: Sequence[str], results: Sequence[Any]) -> Answer:
    rows = [_ttft_row(label, r) for label, r in zip(labels, results)]
    base, fast = rows
    ttft = fast["ttft_p99_ms"] / base["ttft_p99_ms"] - 1 if base["ttft_p99_ms"] else 0.0
    tpot = fast["tpot_p50_ms"] / base["tpot_p50_ms"] - 1 if base["tpot_p50_ms"] else 0.0
    p = base["parts"]
    saturated = base["offered_rps"] and base["throughput_rps"] < 0.9 * base["offered_rps"]
    if saturated:
        value = PRACTICE_CHOICES[2]
    elif abs(ttft) >= UNMOVED and abs(ttft) >= LIKE_DECODE * abs(tpot):
        value = PRACTICE_CHOICES[3]
    elif abs(tpot) < UNMOVED:
        value = PRACTICE_CHOICES[1]
    else:
        value = PRACTICE_CHOICES[0]
    text = (f"{value}: TPOT p50 {base['tpot_p50_ms']:.2f} → {fast['tpot_p50_ms']:.2f} ms "
            f"({tpot:+.0%}), TTFT p99 {base['ttft_p99_ms']:.1f} → {fast['ttft_p99_ms']:.1f} ms "
            f"({ttft:+.0%}). TTFT's p99 was {p['prefill']:.1f} ms of prefill call, "
            f"{p['queue']:.1f} ms of queue (for a slot, and for the step running when it "
            f"came) and {p['prefill_stall']:.1f} ms of others' steps once admitted."
            + _what_moved(base, fast, ttft))
    return Answer(value, text, rows)


def _what_moved(base: dict[str, Any], fast: dict[str, Any], ttft: float) -> str:
    """Where TTFT p99's own change came from, when it changed at all: its parts that moved
    most (a faster decode step shortens the waits for the steps running when a request comes
    and once it is admitted; the prefill is its own)."""
    if abs(ttft) < 0.02:
        return ""
    moved = sorted(TTFT_COMPONENTS, key=lambda k: -abs(fast["parts"][k] - base["parts"][k]))
    said = [f"{k.replace('_', ' ')} {base['parts'][k]:.1f} → {fast['parts'][k]:.1f} ms"
            for k in moved[:2] if abs(fast["parts"][k] - base["parts"][k]) >= 0.05]
    if not said:
        return ""
    why = ("" if moved[0] == "prefill" else
           ": the waits for the decode steps running when a request came or was admitted, "
           "which are shorter — not its prefill")
    return f" TTFT p99's own {ttft:+.0%} is mostly its " + " and ".join(said) + why + "."


__all__ = ["capacity_rps", "goodput", "highest_rate_meeting", "llm_lessons",
           "simulated_goodput", "static_vs_continuous", "stutter", "ttft_under_load"]
