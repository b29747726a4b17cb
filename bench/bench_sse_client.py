"""Generation over HTTP: does our streaming client measure what a plain SSE reader measures,
and what does it cost?

Our OpenAI-compatible server (``--transport http``'s, in its own process) serves synthetic-lm
with known costs. Against that one server, in alternating blocks (so a busy moment of the
machine falls on both), closed loop at 1 and 4 clients:

- **ours**: the run's own path — the GenDriver handing requests to ``SseTransport`` (uvloop,
  httptools, each token stamped as its event is parsed, the server's account laid out);
- **httpx**: ``httpx.AsyncClient.stream`` on asyncio, ``aiter_lines``, each ``data:`` line
  parsed as JSON and stamped — the reader a user would write. It counts events, as vLLM's
  benchmark does: when the server's writer fell behind and put two tokens in one event, it
  sees one gap where ours sees two (the second zero); ``events/req`` shows how often.

For each: TTFT (send → first content event) and ITL (between content events) p50/p90 and the
client's CPU a token (``time.process_time`` of this process over the block: only that client
runs then). The two should agree within a few per cent; the known step time says what the ITL
must be. httpx is a dev requirement (requirements-dev.txt); without it only ours runs.

    python bench/bench_sse_client.py            # ~1 min
    python bench/bench_sse_client.py --quick    # a smoke run, not figures
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time

import numpy as np

from latency.core.config import RunConfig
from latency.core.gen_records import GenRequest
from latency.core.timing import now_ns
from latency.loadgen.gen_driver import GenDriver
from latency.loadgen.sse_client import SseTransport
from latency.serve.http_server import ServerProcess
from sample_models.synthetic_lm import SyntheticLMPipeline

QUICK = "--quick" in sys.argv
COSTS = {"prefill_ms": 2.0, "prefill_ms_per_token": 0.02, "step_ms": 3.0,
         "step_ms_per_seq": 0.5}
PROMPT_WORDS, OUTPUT = 256, 32
ROUNDS = 1 if QUICK else 4
PER_BLOCK = 8 if QUICK else 40


Measured = tuple[list[int], list[int], float, int]


def ours(url: str, text: str, clients: int, n: int) -> Measured:
    """TTFT and ITL (ns) of ``n`` requests through the run's own path, CPU seconds, events."""
    transport = SseTransport(f"{url}/v1/completions", "synthetic-lm")
    done: list[GenRequest] = []
    cancel = threading.Event()
    driver = GenDriver(transport.submit, [(text, OUTPUT)], done.append, cancel)
    cpu = time.process_time()
    driver.closed(clients, n, None, False, 60.0)
    cpu = time.process_time() - cpu
    transport.close()
    ttft, itl = [], []
    for r in done:
        assert r.error is None, r.error
        ttft.append(r.t_first_deliv - r.t_sent)
        itl += np.diff(np.asarray(r.delivered)).tolist()
    return ttft, itl, cpu, sum(r.stream_chunks for r in done)


def plain_httpx(url: str, text: str, clients: int, n: int) -> Measured:
    import httpx

    body = {"model": "synthetic-lm", "prompt": text, "max_tokens": OUTPUT, "stream": True,
            "ignore_eos": True}
    ttft: list[int] = []
    itl: list[int] = []
    left = [n]
    events = [0]

    async def client(http: httpx.AsyncClient) -> None:
        while left[0] > 0:
            left[0] -= 1
            sent = now_ns()
            stamps = []
            async with http.stream("POST", f"{url}/v1/completions", json=body) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunk = json.loads(line[6:])
                        if chunk["choices"] and chunk["choices"][0]["text"]:
                            stamps.append(now_ns())
            events[0] += len(stamps)
            ttft.append(stamps[0] - sent)
            itl.extend(np.diff(stamps).tolist())

    async def main() -> None:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            await asyncio.gather(*(client(http) for _ in range(clients)))

    cpu = time.process_time()
    asyncio.run(main())
    return ttft, itl, time.process_time() - cpu, events[0]


def ms(values: list[int], q: float) -> float:
    return float(np.percentile(values, q)) / 1e6


def main() -> None:
    try:
        import httpx  # noqa: F401
        readers = {"ours": ours, "httpx": plain_httpx}
    except ImportError:
        print("httpx is not installed (pip install -r requirements-dev.txt): ours only")
        readers = {"ours": ours}
    p = SyntheticLMPipeline(**COSTS)
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}; synthetic-lm "
          f"{COSTS}, prompt {PROMPT_WORDS} tokens, {OUTPUT} output tokens; {ROUNDS} rounds of "
          f"{PER_BLOCK} requests a client kind, alternating")
    text = " ".join(" ".join(p.sample_inputs(16, 0)).split()[:PROMPT_WORDS])
    cfg = RunConfig(model="synthetic-lm", model_args=COSTS, max_running=8).checked()
    server = ServerProcess(cfg).start()
    try:
        for reader in readers.values():  # warm both clients and the server
            reader(server.url, text, 2, 4)
        for clients in (1, 4):
            got: dict[str, Measured] = {k: ([], [], 0.0, 0) for k in readers}
            for _ in range(ROUNDS):
                for name, reader in readers.items():
                    t, i, c, e = reader(server.url, text, clients, PER_BLOCK)
                    a, b, cpu, ev = got[name]
                    got[name] = (a + t, b + i, cpu + c, ev + e)
            prefill = p.prefill_time_ms(PROMPT_WORDS)
            print(f"\n{clients} client(s): expected alone TTFT ≈ {prefill:.2f} ms + tokenize + "
                  f"network, ITL ≈ {p.step_time_ms(clients):.2f} ms "
                  f"(a step of {clients})")
            print(f"   {'client':<8} {'TTFT p50':>9} {'TTFT p90':>9} {'ITL p50':>8} "
                  f"{'ITL p90':>8} {'ITL mean':>9} {'CPU/token':>10} {'events/req':>10}")
            for name, (t, i, cpu, ev) in got.items():
                tokens = len(t) * OUTPUT
                print(f"   {name:<8} {ms(t, 50):>9.3f} {ms(t, 90):>9.3f} {ms(i, 50):>8.3f} "
                      f"{ms(i, 90):>8.3f} {np.mean(i) / 1e6:>9.3f} "
                      f"{cpu / tokens * 1e6:>8.1f} µs {ev / len(t):>10.2f}")
            if len(got) == 2:
                (ot, oi, _, _), (ht, hi, _, _) = got["ours"], got["httpx"]
                print(f"   ours vs httpx: TTFT p50 {ms(ot, 50) / ms(ht, 50) - 1:+.1%}, "
                      f"ITL p50 {ms(oi, 50) / ms(hi, 50) - 1:+.1%}, "
                      f"ITL mean {np.mean(oi) / np.mean(hi) - 1:+.1%}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
