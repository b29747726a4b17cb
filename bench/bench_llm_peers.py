"""Against a real llama.cpp server: ours beside a raw client, NVIDIA AIPerf and GuideLLM — do
the client figures agree, does the per-request join hold, and what does each client cost?

One ``llama-server`` (tests/llama_cpp.py: built once per machine; a random-weight Llama of 4
layers under Llama 2's vocabulary, 2 slots, 1 thread), streamed chat completions of ~64
prompt tokens and 64 forced output tokens (``ignore_eos``), 40 requests after 2 warm-up, at
1 and at 4 clients (4 clients on 2 slots: half of them wait for a slot). The tools take turns,
round after round, so a busy moment of this shared machine falls on each:

- **ours**: ``python -m latency run --target … --tokenizer DIR --json`` (the CLI as a user
  runs it), its figures read from the JSON: TTFT from send p50, ITL as each request's mean
  gap (p50 over requests), output tokens/s, the split's coverage and its queue;
- **raw**: a plain client written here (asyncio streams, a fresh connection a request, each
  content event stamped as its line is read): the same figures, and TTFT − llama.cpp's
  ``prompt_ms`` for each request — what the split's network + queue must come to;
- **AIPerf** and **GuideLLM** (``bench/llm_peers.py``; each where installed — neither is a
  requirement of this project: ``pip install aiperf guidellm`` in a venv of their own), with
  the same tokenizer (an HF tokenizer made from the server's own vocabulary, offline).
  Install them in a venv of their own and name it: ``python -m venv ~/peers &&
  ~/peers/bin/pip install aiperf guidellm``, then ``LATENCY_LAB_PEERS_VENV=~/peers`` —
  installed into this project's venv they change packages its tests rely on.

Each tool's CPU is its process tree's user + system time over its runs. The client's own
figures agree when their ratios to raw are near 1 within the run-to-run spread (printed).

    python bench/bench_llm_peers.py            # ~8 min with both peers installed
    python bench/bench_llm_peers.py --quick    # a smoke run of ours and raw, not figures
"""
from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

QUICK = "--quick" in sys.argv
ROUNDS = 1 if QUICK else 3
REQUESTS = 8 if QUICK else 40
WARMUP = 2
PROMPT_TOKENS, OUTPUT_TOKENS = 64, 64
LOADS = (1, 4)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ours(base: str, tokenizer: Path, clients: int, work: Path, seed: int) -> dict[str, Any]:
    """The CLI's run, its figures from its JSON."""
    out = work / f"ours-{clients}-{seed}.json"
    cpu = children_cpu()
    proc = subprocess.run(
        [sys.executable, "-m", "latency", "run", "--target", base, "--api", "chat",
         "--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS),
         "--concurrency", str(clients), "--requests", str(REQUESTS), "--warmup", str(WARMUP),
         "--tokenizer", str(tokenizer), "--seed", str(seed), "--no-save", "--force",
         "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    cpu = children_cpu() - cpu
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ours failed ({proc.returncode}): {proc.stderr[-2000:]}")
    from latency.analysis.gen_result import GenResult
    from latency.core.gen_records import STATUS_OK

    result = GenResult.from_dict(json.loads(out.read_text()))
    rows = result.rows
    measured = ~rows["warmup"]
    ok = measured & (rows["status"] == STATUS_OK)
    ttft = (rows["t_first_deliv"][ok] - rows["t_sent"][ok]) / 1e6
    itl = [float(v) for v in _request_itl(result.tokens, ok)]
    span = (rows["t_done"][ok].max() - rows["t_sent"][ok].min()) / 1e9
    view = result.target_view
    assert view is not None
    split = view.split
    queue = (split.parts["network"] + split.parts["queue"]) / 1e6
    target = result.environment["target"]
    return {"ttft_p50_ms": float(statistics.median(ttft)),
            "itl_ms": float(statistics.median(itl)) if itl else None,
            "tokens_per_s": float(rows["output_tokens"][ok].sum() / span),
            "requests": int(ok.sum()), "errors": int((measured & ~ok).sum()),
            "cpu_s": cpu, "split": split.n, "clamped": split.clamped,
            "wait_p50_ms": float(statistics.median(queue)) if split.n else None,
            "retried": target.get("retried_requests"),
            "resolution_ms": target.get("resolution_ms")}


def _request_itl(tokens: Any, ok: Any) -> list[float]:
    """Each successful request's mean gap between tokens (ms)."""
    import numpy as np

    out = []
    for r in np.flatnonzero(ok):
        t = np.sort(tokens["t_delivered"][tokens["request"] == r])
        if len(t) > 1:
            out.append(float((t[-1] - t[0]) / (len(t) - 1) / 1e6))
    return out


def raw(base: str, model: str, prompts: list[str], clients: int) -> dict[str, Any]:
    """A plain streaming client, as lean as one can be written: asyncio's streams, a fresh
    connection a request (the server closes it after each stream anyway), the chunked body
    read line by line, each ``data:`` line with content stamped as it is read (only the last
    event, with ``timings``, is parsed as JSON) — so its own CPU per token, which it takes
    from the server on this machine, is small, like ours."""
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
    left = list(reversed(prompts))
    got: list[dict[str, Any]] = []

    async def one(prompt: str) -> dict[str, Any]:
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                           "max_tokens": OUTPUT_TOKENS, "stream": True, "ignore_eos": True,
                           "stream_options": {"include_usage": True}}).encode()
        head = (f"POST {path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        sent = time.perf_counter_ns()
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(head.encode() + body)
        stamps: list[int] = []
        last = b""
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                if line.startswith(b"data: {"):
                    if b'"content":"' in line and b'"content":""' not in line:
                        stamps.append(time.perf_counter_ns())
                    last = line
                elif line.startswith(b"data: [DONE]"):
                    break
        finally:
            writer.close()
        timings = json.loads(last[6:]).get("timings")
        return {"sent": sent, "stamps": stamps, "timings": timings}

    async def client() -> None:
        while left:
            got.append(await one(left.pop()))

    async def main() -> None:
        await asyncio.gather(*(client() for _ in range(clients)))

    cpu = time.process_time()
    asyncio.run(main())
    cpu = time.process_time() - cpu
    measured = got[WARMUP:]
    ttft = [(g["stamps"][0] - g["sent"]) / 1e6 for g in measured]
    itl = [(g["stamps"][-1] - g["stamps"][0]) / (len(g["stamps"]) - 1) / 1e6
           for g in measured if len(g["stamps"]) > 1]
    tokens = sum(g["timings"]["predicted_n"] for g in measured)
    span = (max(g["stamps"][-1] for g in measured) - min(g["sent"] for g in measured)) / 1e9
    wait = [t - g["timings"]["prompt_ms"] for t, g in zip(ttft, measured, strict=True)]
    return {"ttft_p50_ms": statistics.median(ttft), "itl_ms": statistics.median(itl),
            "tokens_per_s": tokens / span, "requests": len(measured), "errors": 0,
            "cpu_s": cpu, "wait_p50_ms": statistics.median(wait)}


def prompts_of(tokenizer: Path, seed: int) -> list[str]:
    """The prompts ours sends with this seed (the same code: ``gen_workload.build_work``
    with the tokenizer cutting ~64-token windows of the sample texts). Each tool and round
    has a seed of its own: the server's prompt cache never holds another run's prompts."""
    from latency.core.config import RunConfig
    from latency.pipelines.gen_workload import build_work
    from latency.pipelines.target_text import TargetText
    from latency.pipelines.token_counter import TokenCounter

    cfg = RunConfig(target="http://127.0.0.1:1/v1", prompt_tokens=str(PROMPT_TOKENS),
                    output_tokens=str(OUTPUT_TOKENS), requests=REQUESTS, seed=seed)
    work = build_work(TargetText(TokenCounter(tokenizer)), cfg, REQUESTS + WARMUP)
    return [str(p) for p, _ in work]


def table(clients: int, got: dict[str, list[dict[str, Any]]]) -> None:
    keys = ("ttft_p50_ms", "itl_ms", "tokens_per_s")
    print(f"\n{clients} client(s), {REQUESTS} requests a run, {ROUNDS} run(s) a tool "
          "(medians over runs; [lowest–highest])")
    print(f"  {'tool':<9}{'TTFT p50 ms':>22}{'ITL/request ms':>22}{'tokens/s':>20}"
          f"{'CPU-s/run':>11}{'errors':>8}  vs raw (TTFT, ITL, tok/s)")
    base = {k: statistics.median(r[k] for r in got["raw"]) for k in keys} if got.get("raw") \
        else {}
    for name, runs in got.items():
        if not runs:
            continue
        cells = []
        for k in keys:
            vals = [r[k] for r in runs if r.get(k) is not None]
            cells.append(f"{statistics.median(vals):>9.2f} [{min(vals):.2f}–{max(vals):.2f}]"
                         if vals else "—")
        ratio = ", ".join(f"{statistics.median(r[k] for r in runs) / base[k]:.2f}"
                          for k in keys) if base and name != "raw" else ""
        print(f"  {name:<9}{cells[0]:>22}{cells[1]:>22}{cells[2]:>20}"
              f"{statistics.median(r['cpu_s'] for r in runs):>11.1f}"
              f"{sum(r['errors'] for r in runs):>8}  {ratio}")
    for r in got.get("ours", []):
        print(f"  ours: split {r['split']}/{r['requests']} ({r['clamped']} clamped within "
              f"±{r['resolution_ms']:.2f} ms), connections retried {r['retried']}, "
              f"network+queue p50 {r['wait_p50_ms']:.2f} ms")
    if got.get("raw") and got.get("ours"):
        mine = statistics.median(r["wait_p50_ms"] for r in got["ours"])
        theirs = statistics.median(r["wait_p50_ms"] for r in got["raw"])
        print(f"  the split's network + queue p50 {mine:.2f} ms vs raw TTFT − prompt_ms p50 "
              f"{theirs:.2f} ms: ratio {mine / theirs:.3f}")


def main() -> None:
    from tests.llama_cpp import LlamaServer, find_server, make_random_gguf, vocab_path

    binary = find_server()
    if binary is None:
        print("no llama-server: python -m tests.llama_cpp build")
        raise SystemExit(1)
    import llm_peers

    vocab = vocab_path(server=binary)
    assert vocab is not None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = make_random_gguf(vocab, work / "model.gguf")
        tokenizer = llm_peers.hf_tokenizer_from_gguf(vocab, work / "hf-tokenizer")
        with LlamaServer(model, binary=binary, slots=2, ctx=4096) as server:
            base = server.base
            import httpx

            served = httpx.get(f"{base}/models", timeout=30).json()["data"][0]["id"]
            tools = ["ours", "raw"] + ([] if QUICK else ["aiperf", "guidellm"])
            size = model.stat().st_size / 1e6
            print(f"llama-server {binary} (2 slots, 1 thread, model {size:.0f} MB); "
                  f"cores {os.cpu_count()}; prompts ~{PROMPT_TOKENS} tokens, "
                  f"{OUTPUT_TOKENS} output tokens; tools {', '.join(tools)}")
            for clients in LOADS:
                got: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
                for k in range(ROUNDS):
                    for tool in tools:
                        if tool == "ours":
                            r = ours(base, tokenizer, clients, work, seed=100 + k)
                        elif tool == "raw":
                            r = raw(base, served, prompts_of(tokenizer, 200 + k), clients)
                        else:
                            run = getattr(llm_peers, f"run_{tool}")
                            r = run(base.removesuffix("/v1"), served, str(tokenizer), clients,
                                    REQUESTS, PROMPT_TOKENS, OUTPUT_TOKENS, work / tool)
                        if r is not None:
                            got[tool].append(r)
                table(clients, got)


if __name__ == "__main__":
    main()
