"""What ``--inputs`` costs per request over generated inputs: nothing beyond reading them once.

The synthetic pipeline with no stage time (so every microsecond is the engine's), fed its own
generated inputs and the same inputs from a text file (``--inputs``), runs interleaved A B B A;
plus the one-off time to read 10,000 inputs from a text file, a JSON-lines file and a
directory of files.

    python bench/bench_inputs.py
    python bench/bench_inputs.py --quick    # a smoke run (CI): 2,000 requests a run, 1,000 inputs
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.pipelines.inputs import read_inputs

NOOP = {"preprocess_ms": 0, "forward_ms": 0, "postprocess_ms": 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2,000 requests a run and 1,000 inputs to read (< 1 min)")
    quick = ap.parse_args().quick
    tmp = Path(tempfile.mkdtemp())
    texts = [f"request-0-{i}" for i in range(64)]
    (tmp / "in.txt").write_text("\n".join(texts) + "\n")
    base = dict(model="synthetic", model_args=NOOP, concurrency=1,
                requests=2_000 if quick else 20_000, warmup=500)
    cfgs = {"generated": RunConfig(**base), "--inputs": RunConfig(**base,
                                                                   inputs=str(tmp / "in.txt"))}
    got: dict[str, list] = {k: [] for k in cfgs}
    for arm in ("generated", "--inputs", "--inputs", "generated"):
        got[arm].append(execute(cfgs[arm]).summary)
    for arm, runs in got.items():
        p50 = statistics.mean(s.latency_ms.p50 for s in runs) * 1000
        p99 = statistics.mean(s.latency_ms.p99 for s in runs) * 1000
        rps = statistics.mean(s.throughput_rps for s in runs)
        print(f"{arm:>10}: whole no-op round trip p50 {p50:.1f} µs, p99 {p99:.1f} µs, "
              f"{rps:,.0f} req/s")
    n = 1_000 if quick else 10_000
    (tmp / "big.txt").write_text("".join(f"text {i}\n" for i in range(n)))
    (tmp / "big.jsonl").write_text("".join(json.dumps({"text": f"t {i}"}) + "\n"
                                           for i in range(n)))
    d = tmp / "dir"
    d.mkdir()
    for i in range(n):
        (d / f"{i:05d}.bin").write_bytes(b"x" * 100)
    for label, path in (("text file", tmp / "big.txt"), ("JSON lines", tmp / "big.jsonl"),
                        ("directory", d)):
        t = time.perf_counter()
        items = read_inputs(str(path))
        print(f"reading {len(items):,} inputs once ({label}): "
              f"{(time.perf_counter() - t) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
