"""HTTP transport: what loopback HTTP costs, where the server should live, and how fast our
load generator is next to Locust against the same server.

1. Loopback cost per request (the ``network`` component, concurrency 1) for the tabular and
   image pipelines, OIP JSON vs raw bytes, with the in-process hand-off for reference.
2. Server placement: our server in its own process (what ``--transport http`` does) vs in a
   thread of the load generator's process (one GIL for both), same load, side by side.
3. Highest request rate against a no-op pipeline (``python -m latency serve``, synthetic, all
   stages 0 ms), closed loop, each client in its own process, one after the other against the
   same server: ours (our keep-alive pool on httptools, clients as coroutines on one uvloop
   loop), the usual alternatives — a thread-per-connection ``requests`` client and an aiohttp
   session on one loop (if installed: ``pip install aiohttp``) — and Locust (FastHttpUser, its
   fastest user class). Client CPU
   per request comes from ``getrusage(RUSAGE_CHILDREN)`` around each client process.

Locust is not a project dependency; install it apart, for the benchmark only:

    python -m venv /tmp/locust-venv && /tmp/locust-venv/bin/pip install locust
    LOCUST=/tmp/locust-venv/bin/locust python bench/bench_http.py

Without ``LOCUST`` (or ``locust`` on the PATH) that part is skipped with a message.
``--quick`` shortens everything (a smoke run, not figures); ``--rate-only`` runs part 3 alone.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.execution.validate import validated
from latency.serve.oip import encode_request

ROOT = Path(__file__).resolve().parents[1]

NOOP = {"preprocess_ms": 0, "forward_ms": 0, "postprocess_ms": 0}
QUICK = "--quick" in sys.argv


def ms(v: float) -> str:
    return f"{v:.3f}"


def loopback_cost() -> None:
    n = 150 if QUICK else 1500
    print(f"1. loopback HTTP cost per request: concurrency 1, {n} requests, network component")
    print(f"   {'pipeline':<12} {'transport':<18} {'req bytes':>9} {'resp B':>7} "
          f"{'net p50':>8} {'net p99':>8} {'total p50':>9}  ms")
    for model in ("tabular-mlp", "image-cnn"):
        rows = [("in-process", RunConfig(model=model, requests=n, warmup=50))]
        for payload in ("json", "raw"):
            rows.append((f"HTTP {payload}", RunConfig(model=model, transport="http",
                                                      payload=payload, requests=n,
                                                      warmup=50)))
        for label, cfg in rows:
            s = execute(cfg).summary
            t = s.transport
            req = (t.request_bytes or {}).get("mean") or 0
            resp = (t.response_bytes or {}).get("mean") or 0
            net = s.components_ms["network"]
            print(f"   {model:<12} {label:<18} {req:>9.0f} {resp:>7.0f} {ms(net.p50):>8} "
                  f"{ms(net.p99):>8} {ms(s.latency_ms.p50):>9}")


def _thread_server(config: RunConfig) -> tuple[str, object]:
    from latency.serve.builder import build_server
    from latency.serve.http_app import create_app
    from latency.serve.http_server import bind, uvicorn_server

    sock = bind("127.0.0.1", 0)
    server = build_server(config).server
    uv = uvicorn_server(create_app(server, config.model, 32 << 20))
    threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not uv.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", (uv, server)


def server_placement() -> None:
    n = 300 if QUICK else 3000
    args = {"preprocess_ms": 0.5, "forward_ms": 1.0, "postprocess_ms": 0.2}
    print(f"\n2. where the server lives: synthetic 0.5/1/0.2 ms, {n} requests")
    print(f"   {'server':<32} {'conc':>4} {'net p50':>8} {'net p99':>8} {'queue p50':>9} "
          f"{'total p99':>9} {'req/s':>7}")
    base = validated(RunConfig(model="synthetic", model_args=args))
    url, (uv, server) = _thread_server(base)
    try:
        for conc in (1, 4):
            for label, cfg in (
                    ("own process (--transport http)",
                     RunConfig(model="synthetic", model_args=args, transport="http",
                               concurrency=conc, requests=n, warmup=100)),
                    ("thread of the client process",
                     RunConfig(model="synthetic", model_args=args, target=url,
                               concurrency=conc, requests=n, warmup=100))):
                s = execute(cfg).summary
                c = s.components_ms
                print(f"   {label:<32} {conc:>4} {ms(c['network'].p50):>8} "
                      f"{ms(c['network'].p99):>8} {ms(c['queue'].p50):>9} "
                      f"{ms(s.latency_ms.p99):>9} {s.throughput_rps:>7.0f}")
    finally:
        uv.should_exit = True
        server.stop()


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed_child(cmd: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    before = _child_cpu()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return out, _child_cpu() - before


REQUESTS_CLIENT = r'''
import sys, threading, time, requests
url, body, conc, dur = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3]), float(sys.argv[4])
done = [0] * conc
def work(i):
    s = requests.Session()
    end = time.monotonic() + dur
    while time.monotonic() < end:
        r = s.post(url, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 200
        done[i] += 1
ts = [threading.Thread(target=work, args=(i,)) for i in range(conc)]
t0 = time.monotonic()
[t.start() for t in ts]; [t.join() for t in ts]
print(sum(done) / (time.monotonic() - t0), sum(done))
'''

H1_CLIENT = r'''
import asyncio, sys, time, uvloop
from latency.loadgen.http1_pool import Pool
url, body, conc, dur = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3]), float(sys.argv[4])
async def main():
    pool, n, end = Pool(url, conc, 60.0), 0, time.monotonic() + dur
    async def w():
        nonlocal n
        while time.monotonic() < end:
            status, _, _ = await pool.post(body, "application/json")
            assert status == 200
            n += 1
    t0 = time.monotonic()
    await asyncio.gather(*[w() for _ in range(conc)])
    return n / (time.monotonic() - t0), n
rps, n = uvloop.run(main())
print(rps, n)
'''

AIOHTTP_CLIENT = r'''
import asyncio, sys, time, aiohttp, uvloop
url, body, conc, dur = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3]), float(sys.argv[4])
async def main():
    n = 0
    end = time.monotonic() + dur
    conn = aiohttp.TCPConnector(limit=conc)
    async with aiohttp.ClientSession(connector=conn, skip_auto_headers=("User-Agent",)) as s:
        async def w():
            nonlocal n
            while time.monotonic() < end:
                async with s.post(url, data=body,
                                  headers={"Content-Type": "application/json"}) as r:
                    await r.read()
                    assert r.status == 200
                n += 1
        t0 = time.monotonic()
        await asyncio.gather(*[w() for _ in range(conc)])
        return n / (time.monotonic() - t0), n
rps, n = uvloop.run(main())
print(rps, n)
'''

LOCUSTFILE = '''
from locust import task
from locust.contrib.fasthttp import FastHttpUser
BODY = {body!r}
class OIP(FastHttpUser):
    @task
    def infer(self):
        self.client.post("/v2/models/synthetic/infer", data=BODY,
                         headers={{"Content-Type": "application/json"}})
'''


def max_rate() -> None:
    dur = 4 if QUICK else 15
    print(f"\n3. highest request rate, no-op pipeline, closed loop, {dur} s a client "
          "(client processes one after the other, same server)")
    server = subprocess.Popen(
        [sys.executable, "-m", "latency", "serve", "--model", "synthetic", "--port", "0",
         "--replicas", "1", "--preprocess-workers", "2"]
        + sum((["--model-arg", f"{k}={v}"] for k, v in NOOP.items()), []),
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().split()[3]
    infer = f"{url}/v2/models/synthetic/infer"
    body = encode_request(b"request-0-0", "json")[0].decode()
    print(f"   server: {url} (python -m latency serve, synthetic no-op, 1 replica); "
          f"body {len(body)} B")
    print(f"   {'client':<38} {'conc':>4} {'req/s':>8} {'client CPU/request':>19}")
    tmp = Path(tempfile.mkdtemp())
    try:
        for conc in (8, 32):
            j = tmp / f"ours{conc}.json"
            out, cpu = _timed_child(
                [sys.executable, "-m", "latency", "run", "--target", url, "--model",
                 "synthetic", "--concurrency", str(conc), "--duration", str(dur),
                 "--warmup", "200", "--json", str(j), "--quiet", "--no-save"], dur + 120)
            if out.returncode != 0:
                print(f"   ours failed: {out.stderr.strip()[-300:]}")
                continue
            d = json.loads(j.read_text())
            s, t = d["summary"], d["timings"]
            rps = s["throughput_rps"]
            n = s["requests"] + s["warmup_requests"]
            in_run = t["measure_cpu_s"] / max(s["requests"], 1) * 1e6
            print(f"   {'ours: http1_pool, coroutines on uvloop':<38} {conc:>4} {rps:>8.0f} "
                  f"{cpu / n * 1e6:>9.0f} µs (whole process incl. start-up; "
                  f"{in_run:.0f} µs while measuring)")
            out, cpu = _timed_child([sys.executable, "-c", REQUESTS_CLIENT, infer, body,
                                     str(conc), str(dur)], dur + 60)
            if out.returncode == 0:
                rps_r, n_r = out.stdout.split()
                print(f"   {'requests.Session, thread per connection':<38} {conc:>4} "
                      f"{float(rps_r):>8.0f} {cpu / int(n_r) * 1e6:>9.0f} µs (whole process)")
            else:
                print(f"   requests client failed: {out.stderr.strip()[-200:]}")
            out, cpu = _timed_child([sys.executable, "-c", H1_CLIENT, infer, body, str(conc),
                                     str(dur)], dur + 60)
            if out.returncode == 0:
                rps_h, n_h = out.stdout.split()
                print(f"   {'our http1_pool alone, bare loop':<38} {conc:>4} {float(rps_h):>8.0f} "
                      f"{cpu / int(n_h) * 1e6:>9.0f} µs (whole process)")
            try:
                import aiohttp  # noqa: F401 - bench-only: pip install aiohttp
            except ImportError:
                print("   aiohttp: not installed, skipped (pip install aiohttp)")
            else:
                out, cpu = _timed_child([sys.executable, "-c", AIOHTTP_CLIENT, infer, body,
                                         str(conc), str(dur)], dur + 60)
                if out.returncode == 0:
                    rps_a, n_a = out.stdout.split()
                    print(f"   {'aiohttp ClientSession, one event loop':<38} {conc:>4} "
                          f"{float(rps_a):>8.0f} {cpu / int(n_a) * 1e6:>9.0f} µs (whole "
                          "process)")
            _locust(url, body, conc, dur, tmp)
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


def _locust(url: str, body: str, conc: int, dur: int, tmp: Path) -> None:
    exe = os.environ.get("LOCUST") or shutil.which("locust")
    if not exe:
        print("   Locust: not installed, skipped (python -m venv /tmp/locust-venv && "
              "/tmp/locust-venv/bin/pip install locust; LOCUST=/tmp/locust-venv/bin/locust)")
        return
    f = tmp / "locustfile.py"
    f.write_text(LOCUSTFILE.format(body=body))
    prefix = tmp / f"locust{conc}"
    out, cpu = _timed_child([exe, "-f", str(f), "--headless", "-u", str(conc), "-r",
                             str(conc), "-t", f"{dur}s", "--host", url, "--only-summary",
                             "--csv", str(prefix), "--loglevel", "WARNING"], dur + 120)
    stats = Path(f"{prefix}_stats.csv")
    if not stats.exists():
        print(f"   Locust failed: {(out.stderr or out.stdout).strip()[-300:]}")
        return
    import csv

    row = next(r for r in csv.DictReader(stats.open()) if r["Name"] == "Aggregated")
    n, rps = int(row["Request Count"]), float(row["Requests/s"])
    fails = int(row["Failure Count"])
    print(f"   {'Locust FastHttpUser (gevent)':<38} {conc:>4} {rps:>8.0f} "
          f"{cpu / max(n, 1) * 1e6:>9.0f} µs (whole process incl. start-up)"
          + (f", {fails} failures" if fails else ""))


def main() -> None:
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    if "--rate-only" not in sys.argv:
        loopback_cost()
        server_placement()
    max_rate()


if __name__ == "__main__":
    main()
