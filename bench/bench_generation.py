"""Generation: the scheduler's own cost, continuous vs static batching, and tiny-lm served
against a plain loop of the same model.

    python bench/bench_generation.py            # the figures in BENCHMARKS.md "Generation"
    python bench/bench_generation.py --quick    # a smoke run (CI): each part, small

Part 1 — the scheduler's own cost: synthetic-lm with every cost set to zero, so a step is
nothing but the scheduler (planning, bookkeeping, the calls' own Python, detokenizing, handing
tokens to the client); reported per step and per token at 1, 8 and 32 running sequences,
and as a share of tiny-lm's decode step at batch 1 (aim: ≤ 50 µs a step, ≤ 5 %).

Part 2 — continuous vs static batching at 16 clients: synthetic-lm with a decode step of 4 ms
+ 0.5 ms a sequence, prefill 0.05 ms a token, outputs uniform:16:128 (so a static batch waits
for its longest member); the two arms alternate (A B A B …) so a busy machine slows both alike.

Part 3 — tiny-lm served vs a plain loop: one client, the same prompts and output length; the
plain loop calls the pipeline's own prefill and decode back to back with greedy sampling and
no scheduler, no threads, no stamps — once bare, once with the tokenize and the incremental
detokenize a server must do too (the like-for-like one); aim: served tokens/s ≥ 0.9 of it.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from latency.core.config import RunConfig
from latency.execution.gen_engine import execute_generation

ZERO = {"prefill_ms": 0.0, "prefill_ms_per_token": 0.0, "step_ms": 0.0,
        "step_ms_per_seq": 0.0}
SHAPED = {"prefill_ms": 1.0, "prefill_ms_per_token": 0.05, "step_ms": 4.0,
          "step_ms_per_seq": 0.5}


def gen(**kw: object):
    cfg = RunConfig(**kw)  # type: ignore[arg-type]
    result = execute_generation(cfg, force=True)
    if result.status != "completed":
        raise SystemExit(f"run {result.status}: {result.failure}")
    return result


def own_cost(quick: bool) -> float:
    """Part 1; returns the own µs a step at batch 1."""
    print("part 1: the scheduler's own cost (synthetic-lm, every cost zero)")
    print(f"{'running':>8} {'steps':>8} {'own µs/step':>12} {'own µs/token':>13} "
          f"{'step µs':>9}")
    first = 0.0
    for n in (1, 8, 32):
        r = gen(model="synthetic-lm", model_args=ZERO, concurrency=n, max_running=n,
                requests=(2 if quick else 8) * n, prompt_tokens="16",
                output_tokens="32" if quick else "128", warmup=n)
        steps = r.steps[r.steps["t_start"] >= (r.timings.measure_start_ns or 0)]
        own = (steps["t_end"] - steps["t_start"] - steps["call_ns"]) / 1e3
        tokens = np.maximum(steps["decode_seqs"] + (steps["prefill_seqs"] > 0), 1)
        per_step = float(np.median(own))
        first = first or per_step
        print(f"{n:>8} {len(steps):>8,} {per_step:>12.1f} {float(np.median(own / tokens)):>13.1f} "
              f"{float(np.median((steps['t_end'] - steps['t_start']) / 1e3)):>9.1f}")
    return first


def tiny_lm_step_us(quick: bool) -> float | None:
    """tiny-lm's decode call at batch 1 (µs, median), or None without its weights."""
    try:
        r = gen(model="tiny-lm", concurrency=1, requests=2 if quick else 5,
                prompt_tokens="64", output_tokens="32" if quick else "64", warmup=1)
    except (SystemExit, ValueError) as exc:  # ConfigError: no tiny-lm here
        print(f"  tiny-lm: not measured ({exc})")
        return None
    steps = r.steps[(r.steps["decode_seqs"] == 1) & (r.steps["prefill_seqs"] == 0)]
    return float(np.median(steps["call_ns"])) / 1e3 if len(steps) else None


def batching(quick: bool) -> None:
    print("\npart 2: continuous vs static batching, 16 clients, 16 slots (synthetic-lm, "
          "step 4 ms + 0.5 ms/seq, prefill 0.05 ms/token, outputs uniform:16:128)")
    rows: dict[str, list[tuple[float, float, float]]] = {"continuous": [], "static": []}
    pairs = 1 if quick else 3
    for _ in range(pairs):
        for mode in ("continuous", "static"):
            r = gen(model="synthetic-lm", model_args=SHAPED, concurrency=16, max_running=16,
                    batching=mode, requests=32 if quick else 160, prompt_tokens="128",
                    output_tokens="uniform:16:128", warmup=16, seed=1)
            s = r.summary
            rows[mode].append((s.output_tokens_per_s, s.ttft_ms.p99 or 0.0,
                               s.itl_ms.p50 or 0.0))
    print(f"{'batching':<11} {'tokens/s':>9} {'TTFT p99 ms':>12} {'ITL p50 ms':>11}")
    med = {m: [statistics.median(v[i] for v in vals) for i in range(3)]
           for m, vals in rows.items()}
    for mode, (tps, ttft, itl) in med.items():
        print(f"{mode:<11} {tps:>9.1f} {ttft:>12.1f} {itl:>11.2f}")
    print(f"continuous/static: throughput ×{med['continuous'][0] / med['static'][0]:.2f}, "
          f"TTFT p99 ×{med['continuous'][1] / med['static'][1]:.2f} "
          f"(median of {pairs} interleaved pair(s))")


def served_vs_loop(quick: bool) -> None:
    print("\npart 3: tiny-lm served (one client) vs a plain loop of its prefill + decode")
    try:
        from latency.host.devices import DTYPES, resolve_device
        from latency.pipelines.generative import DecodeInput, PrefillChunk
        from latency.pipelines.registry import build_pipeline

        p = build_pipeline("tiny-lm", resolve_device("cpu"), DTYPES["float32"], {})
    except Exception as exc:  # noqa: BLE001 - no weights yet: say so
        print(f"  not measured: {exc}")
        return
    import torch

    torch.set_num_threads(1)
    out_n = 32 if quick else 64
    prompts = p.sample_inputs(4, 0)

    def loop_once(text: str, words: bool) -> int:
        """One request by hand: (tokenize,) prefill, greedy decode (, detokenize each token)."""
        prompt = p.tokenize(text)[:64]
        kv = p.allocate(len(prompt) + out_n)
        detok = p.detokenizer() if words else None
        with torch.inference_mode():
            token = p.sample(p.prefill([PrefillChunk(kv, prompt, 0)]))[0]
            if detok is not None:
                detok.step(token)
            pos = len(prompt)
            for _ in range(out_n - 1):
                token = p.sample(p.decode([DecodeInput(kv, token, pos)]))[0]
                if detok is not None:
                    detok.step(token)
                pos += 1
        p.free(kv)
        return out_n

    texts = [p.detokenize(p.tokenize(t)[:64]) for t in prompts]
    rates: dict[str, list[float]] = {"bare": [], "text": [], "served": [], "http": []}
    for _ in range(1 if quick else 3):
        for kind, words in (("bare", False), ("text", True)):
            t = time.perf_counter()
            n = sum(loop_once(x, words) for x in texts)
            rates[kind].append(n / (time.perf_counter() - t))
        r = gen(model="tiny-lm", concurrency=1, requests=len(texts), warmup=1,
                prompt_tokens="64", output_tokens=str(out_n), threads=1)
        rows = r.rows[~r.rows["warmup"]]
        busy = float((rows["t_done"] - rows["t_sent"]).sum()) / 1e9
        rates["served"].append(float(rows["output_tokens"].sum()) / busy)
        r = gen(model="tiny-lm", concurrency=1, requests=len(texts), warmup=1,
                prompt_tokens="64", output_tokens=str(out_n), threads=1, transport="http")
        rows = r.rows[~r.rows["warmup"]]
        busy = float((rows["t_done"] - rows["t_sent"]).sum()) / 1e9
        rates["http"].append(float(rows["output_tokens"].sum()) / busy)
    bare, text, served, http = (statistics.median(rates[k])
                                for k in ("bare", "text", "served", "http"))
    print(f"  plain loop: {bare:,.1f} tokens/s (prefill + decode only), {text:,.1f} tokens/s "
          f"(with tokenize and detokenize, as a server must) · served {served:,.1f} tokens/s "
          f"(send to last token)")
    print(f"  served / loop with text {served / text:.2f} (aim ≥ 0.9) · served / bare loop "
          f"{served / bare:.2f}")
    print(f"  over HTTP (our server in its own process, our streaming client in this one): "
          f"{http:,.1f} tokens/s, {http / text:.2f} of the loop with text")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: each part, small")
    a = ap.parse_args()
    own = own_cost(a.quick)
    step = tiny_lm_step_us(a.quick)
    if step:
        print(f"  tiny-lm's decode call at batch 1: {step:,.0f} µs; the scheduler's own "
              f"{own:.1f} µs a step is {own / step:.1%} of it (aim ≤ 5 %)")
    batching(a.quick)
    served_vs_loop(a.quick)


if __name__ == "__main__":
    main()
