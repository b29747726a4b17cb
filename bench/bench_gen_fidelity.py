"""Fidelity of the generation simulator: does it predict our own server's TTFT and TPOT on
settings it was not fitted on?

A calibration run fits the server's costs (``simulation.gen_service``: the step cost model
over its steps, its spread, the tokenizer, detokenizing). Then held-out runs — other rates,
other prompt and output lengths, chunked prefill at other chunk sizes, fewer slots — are each
measured by the engine and simulated with calibration costs, replaying the held-out
run's own trace (its requests' arrival times and lengths: the load it was offered, an input,
as Vidur replays a trace; none of its times). The error is |simulated − measured| / measured of
TTFT and TPOT at p50 and p99, per held-out run, the simulated figure being the median of
``SEEDS`` simulations. The aim: every one within 10 %.

**``--bracket``: calibrations either side of each held-out run.** A shared VM's pace drifts
by tens of per cent over minutes with no other process and no steal to show for it
(BENCHMARKS.md: a decode call took 4.0 ms in the calibration and 2.3–3.1 ms in the held-out
runs minutes later). A simulator fitted at one pace and checked at another measures the
machine, not itself. With ``--bracket`` a calibration run is measured after each held-out run
too, and every held-out run is predicted from the two calibrations either side of it, pooled
into one fit (the costs at the machine's pace around that run — never from the held-out run's
own times), beside the prediction from the first calibration alone. Measured on 2026-12-06
it did worse, not better (BENCHMARKS.md): the pace changes within a minute, so a short
calibration can land wholly in a slow patch, and pooled with a fast one its level's spread
widens every simulated p99.

The calibration exercises every kind of call the held-out runs make — whole prompts, several
prompts in one call, a prompt's later chunk attending to its earlier ones (chunked prefill at
512 tokens, so prompts longer than that come in two chunks), steps holding a prefill and a
decode, and every batch size up to the 8 slots (its arrivals come in bursts: gamma, at the
same mean rate) — at chunk sizes and with arrivals none of the held-out runs uses (theirs are
Poisson). A held-out run is long enough for a
p99 (``HELD_OUT_REQUESTS``): a measured p99 is one draw of the machine too, so its 95 %
interval (order statistics) is printed beside it, and whether the prediction falls inside.

The simulator reproduces the calibration run's machine too — its drift and its spikes
(``gen_service``) — so a calibration measured while the machine was disturbed predicts a
disturbed server: the machine while each run measured is printed with it.

    python bench/bench_gen_fidelity.py                 # tiny-lm (real compute), ~20 minutes
    python bench/bench_gen_fidelity.py --bracket       # a calibration after each held-out run
    python bench/bench_gen_fidelity.py --model synthetic-lm
    python bench/bench_gen_fidelity.py --quick         # synthetic-lm, two short held-out runs
    python bench/bench_gen_fidelity.py --save runs/    # keep every measured run's JSON …
    python bench/bench_gen_fidelity.py --load runs/    # … and predict them again, measuring none
    python bench/bench_gen_fidelity.py --quick --target  # through our server, from outside
    python bench/bench_gen_fidelity.py --device cuda --rate 16   # the 10 % check on a GPU

One held-out run is measured twice, straight after itself (same seed, same trace:
``--no-repeat`` skips it): how far two measurements of the same thing fall apart on this
machine is the floor under any prediction's error — a 10 % aim cannot be checked on a machine
that repeats itself within 20 %. So each error is printed beside that figure's repeat
difference, and the claim is counted both ways: within 10 %, and within max(10 %, the repeat
difference of that figure). On synthetic-lm, whose costs are set, the calibration's fit is also
read back against them call by call (each within 5 %): the simulator checked where the truth is
known.

``--target`` makes every run against our own server in its own process as a server of yours
(``run --target``): no steps are recorded, so the calibration's costs are fitted from outside
(the gaps between tokens, the first tokens, the server's reports) — how close a simulation of
vLLM or llama.cpp from one of its runs can be, checked where the truth is ours to measure. The
held-out runs' scheduler (slots, chunking) is given to the simulation: whoever runs a server
knows it.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from latency.analysis.gen_result import GenResult  # noqa: E402
from latency.analysis.stats import quantile_ci  # noqa: E402
from latency.analysis.summary_text import machine_line  # noqa: E402
from latency.core.config import RunConfig  # noqa: E402
from latency.execution.gen_engine import execute_generation  # noqa: E402
from latency.simulation.gen_replay import fitted_service, gen_replay  # noqa: E402
from latency.simulation.gen_service import GenService  # noqa: E402
from latency.simulation.sweep_prediction import pooled  # noqa: E402

AIM = 0.10
#: simulations a held-out run is predicted by (their median: the simulator's prediction, not
#: one draw of its randomness — the measured run is one draw of the machine's)
SEEDS = 5
METRICS = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p99"))
#: requests of a calibration run and of each held-out one (a p99 of 600 is its 6 slowest);
#: with --bracket a held-out run is predicted from two calibrations pooled: 400 requests
CALIBRATION_REQUESTS = 200
HELD_OUT_REQUESTS = 600
#: the calibration's chunk size: prompts longer than this are prefilled in two chunks
CALIBRATION_CHUNK = 512
#: the calibration's arrivals come in bursts and lulls (gamma, this shape): at the same mean
#: rate its bursts fill all 8 slots and prefill several prompts at once, as the held-out
#: runs at a higher rate do — a Poisson calibration at rate 4 ran at most 5 sequences, and
#: the decode step's cost at 8 was an extrapolation (the 1.4× run's TPOT p50 came out 35 %
#: high)
CALIBRATION_BURSTINESS = 0.25
#: the held-out setting measured twice (same seed, same trace): the machine's repeatability
REPEATED = "1.4× the rate"
#: synthetic-lm's set costs (ms) for its runs: a 2-core machine's tiny-lm, roughly
SYNTHETIC = {"prefill_ms": 1.5, "prefill_ms_per_token": 0.06, "step_ms": 3.0,
             "step_ms_per_seq": 0.4}


@dataclass(frozen=True)
class Setting:
    name: str
    changes: dict


def settings(quick: bool, rate: float) -> tuple[dict, list[Setting]]:
    # the calibration covers the lengths and the running sequences the held-out runs reach
    # (a simulation beyond them extrapolates, and says so)
    calibration = dict(rate=rate, prompt_tokens="uniform:16:900", output_tokens="uniform:8:48",
                       max_running=8, chunked_prefill=CALIBRATION_CHUNK, arrival="gamma",
                       burstiness=CALIBRATION_BURSTINESS)
    whole = dict(chunked_prefill=None, arrival="poisson", burstiness=1.0)
    held_out = [
        Setting("half the rate", dict(rate=rate / 2, **whole)),
        Setting("1.4× the rate", dict(rate=rate * 1.4, **whole)),
        Setting("long prompts, short outputs", dict(prompt_tokens="uniform:500:900",
                                                    output_tokens="16", **whole)),
        Setting("short prompts, long outputs", dict(prompt_tokens="uniform:16:128",
                                                    output_tokens="uniform:64:96", **whole)),
        Setting("chunked prefill 128", dict(chunked_prefill=128, arrival="poisson",
                                            burstiness=1.0)),
        Setting("chunked 64, 1.2× the rate", dict(chunked_prefill=64, rate=rate * 1.2,
                                                  arrival="poisson", burstiness=1.0)),
        Setting("4 slots", dict(max_running=4, **whole)),
    ]
    return calibration, held_out[:2] if quick else held_out


def measure(base: RunConfig, changes: dict, name: str, save: Path | None,
            load: Path | None, outside: bool = False) -> GenResult:
    """The run of ``base`` with ``changes``: measured (and kept in ``save``), or read back
    from ``load`` where an earlier ``--save`` kept it; ``outside``: through our server in
    its own process, as a server of yours (``through_server``)."""
    file = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".json"
    if load is not None:
        return GenResult.from_dict(json.loads((load / file).read_text()))
    config = replace(base, **changes)
    result = through_server(config) if outside else execute_generation(config, force=True)
    if result.status != "completed":
        raise SystemExit(f"a run did not complete: {result.failure}")
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        (save / file).write_text(result.json_text(requests=True))
    return result


def through_server(config: RunConfig) -> GenResult:
    """The run ``config`` describes, made against our own server of its model and scheduler
    in its own process, as a ``--target``: seen from outside (no steps recorded; the
    server's /tokenize cuts the prompts, its /metrics is scraped), so its costs are fitted
    from outside (``simulation.gen_target_service``)."""
    from latency.serve.http_server import ServerProcess

    server = RunConfig(model=config.model, model_args=config.model_args,
                       **{f: getattr(config, f) for f in RunConfig.SCHEDULER_FIELDS})
    proc = ServerProcess(server.checked()).start()
    try:
        client = RunConfig(target=f"{proc.url}/v1", api="completions", tokenizer="server",
                           scrape_metrics=True, requests=config.requests, warmup=config.warmup,
                           seed=config.seed, rate=config.rate, arrival=config.arrival,
                           burstiness=config.burstiness, prompt_tokens=config.prompt_tokens,
                           output_tokens=config.output_tokens)
        return execute_generation(client, force=True)
    finally:
        proc.stop()


def measured_values(run: GenResult, metric: str) -> np.ndarray:
    """The run's measured successful requests' values of ``metric``, sorted."""
    f = run.requests_frame()
    f = f[(~f["warmup"]) & (f["status"] == "ok")]
    return np.sort(f[metric].dropna().to_numpy())


def lone_decode_ms(run: GenResult) -> float | None:
    """The median decode call of one sequence alone (a step decoding one sequence and
    prefilling nothing) — the same work in every run, so how long it took is the machine's
    pace while that run measured (None: the run had no such steps)."""
    s = run.steps
    lone = s[(s["t_end"] > s["t_start"]) & (s["prefill_tokens"] == 0)
             & (s["decode_seqs"] == 1)]
    return float(np.median(lone["call_ns"])) / 1e6 if len(lone) >= 20 else None


def _pace(run: GenResult, calib: GenResult) -> str:
    """'; a lone decode call 2.67 ms, 0.66× the calibration's' — read after the prediction,
    never by it: it says how much of an error is the machine's pace between the runs."""
    mine, theirs = lone_decode_ms(run), lone_decode_ms(calib)
    if mine is None or theirs is None:
        return ""
    return f"; a lone decode call {mine:.2f} ms, {mine / theirs:.2f}× the calibration's"


@dataclass
class Tally:
    """Errors of one way of predicting, over the held-out runs: each figure's error, kept by
    its metric so it can be read against that metric's repeat difference."""

    name: str
    errors: list[tuple[int, float]] = field(default_factory=list)
    inside: int = 0
    intervals: int = 0

    def add(self, metric: int, err: float) -> None:
        self.errors.append((metric, err))

    def line(self, repeat: list[float] | None) -> str:
        """'17 of 28 figures within 10 %; 24 of 28 within max(10 %, the same figure's repeat
        difference: …); worst error 32.0 %; …'"""
        within = sum(err <= AIM for _, err in self.errors)
        worst = max((err for _, err in self.errors), default=0.0)
        noise = ""
        if repeat is not None:
            fair = sum(err <= max(AIM, repeat[m]) for m, err in self.errors)
            diffs = ", ".join(f"{label(m)} {d:.0%}" for m, d in enumerate(repeat))
            noise = (f"; {fair} of {len(self.errors)} within max({AIM:.0%}, that figure's "
                     f"repeat difference: {diffs})")
        inside = (f"; {self.inside} of {self.intervals} p99 predictions inside the measured "
                  "p99's 95 % interval") if self.intervals else ""
        return (f"{self.name}: {within} of {len(self.errors)} figures within {AIM:.0%}"
                f"{noise}; worst error {worst:.1%}{inside}")


def label(metric: int) -> str:
    """'TTFT p50', … for METRICS' index."""
    name, stat = METRICS[metric]
    return f"{name.split('_')[0].upper()} {stat}"


def repeat_cells(one: GenResult, two: GenResult) -> tuple[list[str], list[float]]:
    """The same run measured twice: each metric first → second (difference), and the
    differences — the floor under any prediction's error on this machine."""
    cells, diffs = [], []
    for metric, stat in METRICS:
        x = getattr(getattr(one.summary, metric), stat)
        y = getattr(getattr(two.summary, metric), stat)
        diffs.append(abs(y - x) / x)
        cells.append(f"{x:7.1f}→{y:6.1f} ({diffs[-1]:4.0%})")
    return cells, diffs


#: where synthetic-lm's set costs are read back from a calibration's fit: a prefill call of
#: one prompt of this many tokens, a decode call of this many sequences (each holding
#: KNOWN_CONTEXT tokens)
KNOWN_PREFILLS = (64, 256, 512)
KNOWN_DECODES = (1, 4, 8)
KNOWN_CONTEXT = 300
#: how close the fit must read back the costs that grow with the work (per prompt token, per
#: sequence)
KNOWN_AIM = 0.05


def known_costs(service: GenService, args: dict) -> tuple[list[str], int, int]:
    """synthetic-lm's costs as set (``args``) against the calibration's fit of them — the
    simulator checked where the truth is known: (lines, within KNOWN_AIM, of). The costs that
    grow with the work (a prompt token's, a sequence's) must come back within 5 %; a call's
    fixed part comes back with the call's own work around the time it holds (building its
    inputs, sampling: a few tenths of a millisecond), printed in ms — real cost, not error."""
    from sample_models.synthetic_lm import SyntheticLMPipeline

    lm = SyntheticLMPipeline(**args)
    calls = service.calls
    within, lines = 0, []
    for what, set_ms, fit_ms in (
            ("a prompt token", lm.prefill_ms_per_token, calls.per_prefill_token_ms),
            ("a decoding sequence", lm.step_ms_per_seq, calls.per_sequence_ms)):
        diff = fit_ms / set_ms - 1 if set_ms else float("nan")
        within += abs(diff) <= KNOWN_AIM
        lines.append(f"  {what:<22} set {set_ms:.4f} ms, fitted {fit_ms:.4f} ms ({diff:+.1%})")
    pairs = [(f"prefill {n} tokens", lm.prefill_time_ms(n),
              calls.prefill_call_ms(n, 1, n * (n + 1) / 2)) for n in KNOWN_PREFILLS]
    pairs += [(f"decode {k} sequence{'s' * (k > 1)}", lm.step_time_ms(k, k * KNOWN_CONTEXT),
               calls.decode_call_ms(k, k * KNOWN_CONTEXT)) for k in KNOWN_DECODES]
    for what, set_ms, fit_ms in pairs:
        lines.append(f"  {what:<22} set {set_ms:7.3f} ms, fitted {fit_ms:7.3f} ms "
                     f"({fit_ms - set_ms:+.2f} ms: the call's own work)")
    return lines, within, 2


def predict(run: GenResult, service: GenService, known: dict, tally: Tally
            ) -> tuple[list[str], list[str]]:
    """The cells of one held-out run's row — measured → simulated (error) for each metric,
    the simulation the median of ``SEEDS`` replays of its trace with ``service`` — and the
    simulation's warnings."""
    sims = [gen_replay(run, service=service, arrival="recorded", seed=seed, **known).run()
            for seed in range(SEEDS)]
    cells = []
    for metric, stat in METRICS:
        measured = getattr(getattr(run.summary, metric), stat)
        predicted = statistics.median(getattr(getattr(sim.summary, metric), stat)
                                      for sim in sims)
        err = abs(predicted - measured) / measured
        tally.add(len(cells), err)
        cell = f"{measured:7.1f}→{predicted:6.1f} ({err:4.0%})"
        if stat == "p99":
            ci = quantile_ci(measured_values(run, metric), 0.99)
            if ci is not None:
                hit = ci[0] <= predicted <= ci[1]
                tally.inside += hit
                tally.intervals += 1
                cell += "" if hit else "!"
        cells.append(cell)
    return cells, list(sims[0].warnings)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="synthetic-lm, two held-out runs")
    ap.add_argument("--model", default=None, help="tiny-lm (default) or synthetic-lm")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests of every run, calibrations and held-out runs alike")
    ap.add_argument("--calibration-requests", type=int, default=None,
                    help=f"requests of a calibration run (default {CALIBRATION_REQUESTS}; "
                         "300 until 2026-12-05)")
    ap.add_argument("--rate", type=float, default=None, help="the calibration run's rate")
    ap.add_argument("--save", type=Path, default=None, help="keep each measured run's JSON here")
    ap.add_argument("--load", type=Path, default=None,
                    help="read the runs an earlier --save kept instead of measuring")
    ap.add_argument("--no-repeat", dest="repeat", action="store_false",
                    help="skip measuring one held-out run a second time (the machine's "
                         "repeatability: the floor under any prediction's error)")
    ap.add_argument("--bracket", action="store_true",
                    help="a calibration run after each held-out run too, and each held-out "
                         "run predicted from the two either side, pooled, beside the "
                         "prediction from the first alone")
    ap.add_argument("--target", action="store_true",
                    help="every run through our server in its own process, as a server of "
                         "yours: the costs fitted from outside")
    ap.add_argument("--device", default="cpu",
                    help="where the model runs (cuda on a GPU machine: the 10 %% check on a "
                         "dedicated machine; raise --rate with it, a GPU's steps are shorter)")
    a = ap.parse_args(argv)
    model = a.model or ("synthetic-lm" if a.quick else "tiny-lm")
    requests = a.calibration_requests or a.requests or (60 if a.quick
                                                          else CALIBRATION_REQUESTS)
    held = a.requests or (60 if a.quick else HELD_OUT_REQUESTS)
    rate = a.rate or (10.0 if model == "synthetic-lm" else 4.0)
    base = RunConfig(model=model, requests=requests, warmup=8, seed=1, device=a.device,
                     model_args=SYNTHETIC if model == "synthetic-lm" else {})
    calibration, held_out = settings(a.quick, rate)
    t0 = time.perf_counter()

    def calibrate(k: int) -> GenResult:
        # each calibration its own trace (seed): the pooled fit sees two draws of the load
        name = "calibration" if k == 0 else f"calibration {k}"
        return measure(replace(base, seed=base.seed + k), calibration, name, a.save, a.load,
                       a.target)

    calibs = [calibrate(0)]
    first = fitted_service(calibs[0])
    print(f"calibration: {model}, {requests} requests a run, {calibration}; held-out runs: "
          f"{held} requests each; "
          + ("a calibration before each held-out run and after it, the two pooled"
             if a.bracket else "one calibration, before them all"))
    print(f"  the first calibration's fit: {first.describe()}")
    if model == "synthetic-lm":  # its costs are set: the fit must read them back
        lines, within, of = known_costs(first, base.model_args)
        print(f"  synthetic-lm's set costs read back by the fit (the costs that grow with "
              f"the work: {within} of {of} within {KNOWN_AIM:.0%}):\n" + "\n".join(lines))
    print(f"  {machine_line(calibs[0].environment) or 'machine: not sampled'}"
          + (f"; a lone decode call {p:.2f} ms" if (p := lone_decode_ms(calibs[0])) else "")
          + "\n")
    ways = {"bracketed": Tally("the calibrations either side, pooled"),
            "first": Tally("the first calibration alone")} if a.bracket else \
        {"first": Tally("the calibration")}
    rows: dict[str, list[str]] = {k: [] for k in ways}
    machines: list[str] = []
    measured_runs: dict[str, GenResult] = {}
    repeat: list[float] | None = None
    repeat_row = ""
    for i, s in enumerate(held_out, start=1):
        setting = {**calibration, **s.changes}
        run = measure(replace(base, requests=held), setting, s.name, a.save, a.load, a.target)
        measured_runs[s.name] = run
        # a server of yours: its scheduler is known to whoever set it up, not to the run
        known = {"max_running": setting["max_running"],
                 "chunked_prefill": setting.get("chunked_prefill") or 0} if a.target else {}
        services = {"first": first}
        if a.bracket:
            calibs.append(calibrate(i))
            services["bracketed"] = fitted_service(pooled(calibs[-2:]))
        for k in ways:
            cells, warnings = predict(run, services[k], known, ways[k])
            rows[k].append(f"{s.name:<30}" + "".join(f"{c:>21}" for c in cells) + "".join(
                f"\n{'':<30}warning: {w}" for w in warnings))
        near = calibs[-2:] if a.bracket else calibs[:1]
        paces = [(len(calibs) - len(near) + j, lone_decode_ms(c)) for j, c in enumerate(near)]
        machines.append(f"  {s.name}: {machine_line(run.environment) or 'not sampled'}"
                        + _pace(run, calibs[0]) + ("".join(
                            f"; calibration {k}'s {p:.2f} ms" for k, p in paces if p)
                            if a.bracket else ""))
        if a.repeat and s.name == REPEATED:
            # the machine's own floor, in this invocation: the same run (setting, seed,
            # trace) measured again straight after — how far two measurements of one thing
            # fall apart here bounds how close any prediction can be checked to come
            two = measure(replace(base, requests=held), setting, s.name + " again", a.save,
                          a.load, a.target)
            cells, repeat = repeat_cells(run, two)
            repeat_row = (f"{'the same run again':<30}" + "".join(f"{c:>21}" for c in cells)
                          + "   (measured twice: first → second)")
            machines.append(f"  {s.name} again: "
                            f"{machine_line(two.environment) or 'not sampled'}"
                            + _pace(two, calibs[0]))
    head = f"{'held-out setting':<30}" + "".join(f"{label(m):>21}" for m in range(len(METRICS)))
    sub = f"{'':<30}" + "".join(f"{'run → sim (err)':>21}" for _ in METRICS)
    for k, tally in ways.items():
        print(f"predicted from {tally.name} ('!': outside the measured p99's 95 % interval; "
              "the last row: the machine's repeat difference, beside each error):\n"
              f"{head}\n{sub}\n" + "\n".join(rows[k])
              + (f"\n{repeat_row}" if repeat_row else "") + "\n")
    print("the machine while each held-out run measured (a lone decode call: the machine's "
          "pace, read after the predictions, never by them):\n" + "\n".join(machines) + "\n")
    for tally in ways.values():
        print(tally.line(repeat))
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
