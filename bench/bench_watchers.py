"""Do 30 watching browsers slow a run down? Forward-time median with N idle sessions vs none.

    python bench/bench_watchers.py [--sessions 30] [--duration 15] [--repeats 2]

A workshop room opens the Live Profiler in 30 browsers. Each tab's ``st.fragment(run_every=1)``
re-renders the charts every second from a shared cached snapshot, in the dashboard server's
process. The run itself executes in its own process on the same machine, so if watching costs
the server real CPU, the run's timings (above all the forward pass) would inflate. This script
measures that, end to end, against the real ``streamlit run app.py``:

* **Idle tabs are fake browsers, not Chromium.** 30 Chromium instances on a 2-core machine
  would measure Chromium's rendering, not our server — in a real room the browsers run on the
  students' laptops. So each tab is a small asyncio websocket client (``FakeTab``) that speaks
  Streamlit's own protocol on ``/_stcore/stream`` (protobuf ``BackMsg`` up, ``ForwardMsg``
  down) exactly as the frontend does, as far as the server can tell:

  - it opens the ``live`` page with a ``rerun_script`` BackMsg (page name, query string,
    context info), like the frontend right after the socket connects;
  - it honours fragment auto-reruns: Streamlit 1.67 tells the browser about
    ``run_every`` with a ``ForwardMsg.auto_rerun`` (``interval``, ``fragment_id``;
    ``streamlit/runtime/fragment.py``); the frontend then calls ``setInterval`` and sends
    ``rerun_script{fragment_id, is_auto_rerun=true}`` every ``interval`` seconds, until a
    ``stop_auto_rerun`` arrives. ``FakeTab`` does the same, on a fixed-rate timer;
  - it reads and parses every ForwardMsg, and keeps the frontend's ForwardMsg cache (hashes of
    ``metadata.cacheable`` messages, aged per finished script run, expired after
    ``max_cached_message_age`` runs) and sends those hashes in ``cached_message_hashes``, so
    the server sends ``ref_hash`` stubs instead of unchanged charts, as it does for a browser;
  - permessage-deflate is negotiated as by a browser (the ``websockets`` default).

  Widget states are not echoed back on every rerun (the browser sends them all); the server
  keeps them in session state either way, so this changes nothing measurable. The tabs' timers
  are started spread over one interval, as in a room where people open the page at different
  moments (all 30 in phase would be a worse, unrealistic burst).

  Each report row shows how many fragment runs per second per idle tab the server actually
  completed during the run — the check that the server really did the work of N watchers.

* **The measured run is started through the UI**, by one more ``FakeTab`` (the "driver") that
  opens ``/live?model=...`` (every control is URL-bound), presses **Start** (a
  ``trigger_value`` widget state for the button's id), waits for the run to finish, and
  fetches the **Download result (JSON)** file over HTTP. The driver is itself a watching tab,
  in both arms: "0 idle sessions" means only the driver is watching.

* **Arms are interleaved** (0, N, 0, N for ``--repeats 2``) after one short unreported warm-up
  run, so machine drift hits both. The server process's CPU time (``/proc/<pid>/stat``
  utime+stime; the run's own process is a child and not counted) is read over each run, from
  Start to the result; so is this script's own CPU (the fake tabs live here and share the
  cores too: that is reported as "bench CPU").
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from tests.browser import streamlit_server  # noqa: E402

FRAGMENT_DONE = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
EARLY_FOR_RERUN = ForwardMsg.FINISHED_EARLY_FOR_RERUN
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the fake browser tab ------------------------------------------------------------------
@dataclass
class TabStats:
    messages: int = 0
    bytes: int = 0
    deltas: int = 0
    ref_hits: int = 0          # ForwardMsgs the server replaced by a ref_hash stub
    full_runs: int = 0         # script_finished of a whole-page run
    fragment_runs: int = 0     # script_finished of a fragment run
    reruns_sent: int = 0


@dataclass
class _Cached:
    run_count: int
    fragment_id: str


@dataclass
class FakeTab:
    """One browser tab on a page of the dashboard, as far as the server can tell."""

    base_url: str
    query: str = ""
    page: str = "live"
    stats: TabStats = field(default_factory=TabStats)
    buttons: dict[str, str] = field(default_factory=dict)       # label -> widget id
    downloads: dict[str, str] = field(default_factory=dict)     # label -> media URL

    def __post_init__(self) -> None:
        self._ws: Any = None
        self._tasks: list[asyncio.Task] = []
        self._timers: dict[str, tuple[float, asyncio.Task]] = {}
        self._cache: dict[str, _Cached] = {}
        self._run_count = 0
        self._max_age = 2
        self._page_hash = ""
        self.full_run_done = asyncio.Event()

    # -- connection ---------------------------------------------------------------------------
    async def open(self) -> None:
        ws_url = self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
        # Same subprotocol tokens as the frontend sends when it has no XSRF cookie yet.
        self._ws = await websockets.connect(
            ws_url, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], max_size=None,
            ping_interval=None)
        self._tasks.append(asyncio.create_task(self._reader()))
        await self.rerun()  # the frontend's first "Requesting a script run."

    async def close(self) -> None:
        for _, task in self._timers.values():
            task.cancel()
        for task in self._tasks:
            task.cancel()
        if self._ws is not None:
            await self._ws.close()

    # -- sending --------------------------------------------------------------------------------
    async def rerun(self, fragment_id: str = "", auto: bool = False,
                    triggers: tuple[str, ...] = ()) -> None:
        msg = BackMsg()
        rs = msg.rerun_script
        rs.query_string = self.query
        rs.page_name = self.page
        rs.page_script_hash = self._page_hash
        rs.fragment_id = fragment_id
        rs.is_auto_rerun = auto
        rs.cached_message_hashes.extend(self._cache)
        for wid in triggers:
            w = rs.widget_states.widgets.add()
            w.id = wid
            w.trigger_value = True
        ci = rs.context_info
        ci.timezone, ci.timezone_offset, ci.locale = "UTC", 0, "en-US"
        ci.url = f"{self.base_url}/{self.page}" + (f"?{self.query}" if self.query else "")
        ci.color_scheme = "light"
        self.stats.reruns_sent += 1
        await self._ws.send(msg.SerializeToString())

    async def _auto_rerun(self, fragment_id: str, interval: float) -> None:
        """The frontend's ``setInterval(() => rerun(fragmentId, isAutoRerun=true), interval)``."""
        loop = asyncio.get_running_loop()
        next_t = loop.time() + interval
        while True:
            await asyncio.sleep(max(0.0, next_t - loop.time()))
            next_t += interval
            try:
                await self.rerun(fragment_id, auto=True)
            except websockets.ConnectionClosed:
                return

    # -- receiving ------------------------------------------------------------------------------
    async def _reader(self) -> None:
        try:
            async for data in self._ws:
                self.stats.messages += 1
                self.stats.bytes += len(data)
                msg = ForwardMsg()
                msg.ParseFromString(data)
                self._handle(msg)
        except websockets.ConnectionClosed:
            pass
        except Exception as exc:  # a broken tab must not go unnoticed
            print(f"fake tab reader failed: {exc!r}", file=sys.stderr)
            raise

    def _handle(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            self.stats.ref_hits += 1
            cached = self._cache.get(msg.ref_hash)
            if cached is None:
                raise RuntimeError(f"ForwardMsg cache miss for {msg.ref_hash}")
            cached.run_count = self._run_count  # the frontend refreshes a hit's age
            return
        if msg.metadata.cacheable and msg.hash and msg.hash not in self._cache:
            frag = msg.delta.fragment_id if kind == "delta" else ""
            self._cache[msg.hash] = _Cached(self._run_count, frag)
        if kind == "new_session":
            self._max_age = msg.new_session.config.max_cached_message_age or 2
        elif kind == "navigation":  # the page that ran: the frontend sends its hash back
            self._page_hash = msg.navigation.page_script_hash
        elif kind == "delta":
            self.stats.deltas += 1
            d = msg.delta
            if d.WhichOneof("type") == "new_element":
                el = d.new_element
                which = el.WhichOneof("type")
                if which == "button":
                    self.buttons[el.button.label] = el.button.id
                elif which == "download_button":
                    self.downloads[el.download_button.label] = el.download_button.url
        elif kind == "auto_rerun":
            fid, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
            old = self._timers.get(fid)
            if old is None or old[0] != interval:  # same interval again: keep the timer
                if old is not None:
                    old[1].cancel()
                task = asyncio.get_running_loop().create_task(self._auto_rerun(fid, interval))
                self._timers[fid] = (interval, task)
        elif kind == "stop_auto_rerun":
            for fid in msg.stop_auto_rerun.fragment_ids:
                old = self._timers.pop(fid, None)
                if old is not None:
                    old[1].cancel()
        elif kind == "script_finished":
            status = msg.script_finished
            if status == FRAGMENT_DONE:
                self.stats.fragment_runs += 1
            elif status != EARLY_FOR_RERUN:
                self.stats.full_runs += 1
                self.full_run_done.set()
            if status != EARLY_FOR_RERUN:
                self._age_cache(list(msg.metadata.run.fragment_ids))

    def _age_cache(self, fragment_ids: list[str]) -> None:
        """The frontend's ForwardMsgCache.incrementRunCount."""
        self._run_count += 1
        for h, c in list(self._cache.items()):
            if fragment_ids and (not c.fragment_id or c.fragment_id not in fragment_ids):
                continue
            if self._run_count - c.run_count > self._max_age:
                del self._cache[h]


# ---- process CPU time -----------------------------------------------------------------------
def server_pid(port: int) -> int:
    """The ``streamlit run`` process started by ``streamlit_server`` for this port."""
    needle = f"--server.port\0{port}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"streamlit" in cmd and needle in cmd:
                return int(entry.name)
    raise RuntimeError(f"no streamlit process for port {port}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (its children, e.g. the run process, not included)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def drain_stdout(pid: int) -> None:
    """``streamlit_server`` pipes the server's output and never reads it; a full pipe (64 KiB)
    would block the server mid-benchmark. Read it away through /proc (Linux only)."""
    def pump() -> None:
        try:
            with open(f"/proc/{pid}/fd/1", "rb", buffering=0) as f:
                while f.read(65536):
                    pass
        except OSError:
            pass
    threading.Thread(target=pump, daemon=True).start()


# ---- one measured run -----------------------------------------------------------------------
@dataclass
class Outcome:
    sessions: int
    result: dict[str, Any]
    wall_s: float
    server_cpu_s: float
    bench_cpu_s: float
    load: float                 # 1-min load average before the run: other work on the machine
    frag_rate: list[float]      # fragment runs per second, per idle tab, during the run
    idle_kbps: float            # bytes/s received per idle tab, during the run
    ref_share: float            # share of idle tabs' ForwardMsgs answered from their cache


async def measured_run(url: str, pid: int, query: str, sessions: int, settle_s: float,
                       timeout_s: float) -> Outcome:
    idle = [FakeTab(url) for _ in range(sessions)]
    # Open the idle tabs spread over one second, so their 1-s timers are out of phase.
    for i, tab in enumerate(idle):
        await tab.open()
        await asyncio.sleep(1.0 / max(sessions, 1))
    driver = FakeTab(url, query=query)
    await driver.open()
    tabs = idle + [driver]
    await asyncio.wait_for(asyncio.gather(*(t.full_run_done.wait() for t in tabs)), 120)
    # Every idle tab must be watching (its fragment rerunning) before Start; an overloaded
    # server may take a while to get round to all of them.
    deadline = time.monotonic() + 120
    while idle and min(t.stats.fragment_runs for t in idle) == 0:
        if time.monotonic() > deadline:
            raise RuntimeError("an idle tab never got a fragment run: auto-rerun not honoured?")
        await asyncio.sleep(0.2)
    await asyncio.sleep(settle_s)

    load = os.getloadavg()[0]
    old_downloads = set(driver.downloads.values())
    before = [(t.stats.fragment_runs, t.stats.bytes, t.stats.messages, t.stats.ref_hits)
              for t in idle]
    cpu0, bench0, t0 = cpu_seconds(pid), time.process_time(), time.monotonic()
    await driver.rerun(triggers=(driver.buttons["Start"],))  # press Start
    while True:  # the new run's JSON download appears when it has finished
        link = driver.downloads.get("Download result (JSON)")
        if link and link not in old_downloads:
            break
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError("the run did not finish in time")
        await asyncio.sleep(0.1)
    wall = time.monotonic() - t0
    cpu1, bench1 = cpu_seconds(pid), time.process_time()
    after = [(t.stats.fragment_runs, t.stats.bytes, t.stats.messages, t.stats.ref_hits)
             for t in idle]
    link = urllib.parse.urljoin(url + "/", link.lstrip("/"))
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(link, timeout=30).read())
    for t in tabs:
        await t.close()
    result = json.loads(body)
    d_msgs = sum(a[2] - b[2] for a, b in zip(after, before))
    return Outcome(
        sessions=sessions, result=result, wall_s=wall, server_cpu_s=cpu1 - cpu0,
        bench_cpu_s=bench1 - bench0, load=load,
        frag_rate=[(a[0] - b[0]) / wall for a, b in zip(after, before)],
        idle_kbps=(sum(a[1] - b[1] for a, b in zip(after, before)) / wall / 1024 / sessions
                   if sessions else 0.0),
        ref_share=(sum(a[3] - b[3] for a, b in zip(after, before)) / d_msgs if d_msgs else 0.0))


# ---- report ---------------------------------------------------------------------------------
def row(o: Outcome) -> str:
    s = o.result["summary"]
    fwd, tot = s["components_ms"]["forward"], s["latency_ms"]
    frag = (f"{statistics.mean(o.frag_rate):.2f} (min {min(o.frag_rate):.2f})"
            if o.frag_rate else "-")
    return (f"{o.sessions:>8} {fwd['p50']:>9.3f} {fwd['p99']:>9.3f} {tot['p50']:>9.3f} "
            f"{tot['p99']:>9.3f} {s['throughput_rps']:>9.1f} {o.server_cpu_s:>7.2f} "
            f"{100 * o.server_cpu_s / o.wall_s:>6.0f}% {o.bench_cpu_s:>6.2f} "
            f"{o.wall_s:>6.1f}  {frag:<16} {o.idle_kbps:>9.1f} {o.load:>5.2f}")


HEADER = (f"{'sessions':>8} {'fwd p50':>9} {'fwd p99':>9} {'tot p50':>9} {'tot p99':>9} "
          f"{'req/s':>9} {'srv cpu':>7} {'srv %':>7} {'bench':>6} {'wall':>6}  "
          f"{'frag runs/s/tab':<16} {'KiB/s/tab':>9} {'load':>5}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=30, help="idle watching tabs (default 30)")
    ap.add_argument("--duration", type=int, default=15, help="run length, s (default 15)")
    ap.add_argument("--repeats", type=int, default=2, help="pairs of (0, N) runs (default 2)")
    ap.add_argument("--model", default="image-cnn",
                    help="pipeline; its forward pass should be real CPU work (default image-cnn)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--settle", type=float, default=3.0,
                    help="seconds the tabs watch before Start (default 3)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the unreported warm-up run")
    args = ap.parse_args()

    query = urllib.parse.urlencode({"model": args.model, "mode": "closed loop",
                                    "concurrency": args.concurrency,
                                    "duration": args.duration, "threads": 1, "replicas": 1,
                                    "batch": 1})
    print(f"cores: {os.cpu_count()}   pipeline: /live?{query}")
    print(f"idle tabs: Streamlit-protocol websocket clients (no Chromium); the driver tab is "
          f"also watching in every arm")
    env = {"STREAMLIT_LOGGER_LEVEL": "error"}
    with streamlit_server(env) as url:
        port = int(url.rsplit(":", 1)[1])
        pid = server_pid(port)
        drain_stdout(pid)
        timeout = args.duration + 120

        async def go() -> list[Outcome]:
            if not args.no_warmup:
                warm = urllib.parse.urlencode({"model": args.model, "duration": 2})
                await measured_run(url, pid, warm, 0, 0.5, timeout)
                print("warm-up run done")
            outs = []
            for _ in range(args.repeats):
                for n in (0, args.sessions):
                    o = await measured_run(url, pid, query, n, args.settle, timeout)
                    cfg = o.result["config"]
                    assert cfg["model"] == args.model and cfg["concurrency"] == args.concurrency, cfg
                    print(row(o) if outs else HEADER + "\n" + row(o), flush=True)
                    outs.append(o)
            return outs

        outs = asyncio.run(go())

    print()
    by_n: dict[int, list[Outcome]] = {}
    for o in outs:
        by_n.setdefault(o.sessions, []).append(o)

    def med(n: int, f: Any) -> float:
        return statistics.median(f(o) for o in by_n[n])

    fwd50 = lambda o: o.result["summary"]["components_ms"]["forward"]["p50"]  # noqa: E731
    tot50 = lambda o: o.result["summary"]["latency_ms"]["p50"]  # noqa: E731
    rps = lambda o: o.result["summary"]["throughput_rps"]  # noqa: E731
    cpu = lambda o: o.server_cpu_s / o.wall_s  # noqa: E731
    n = args.sessions
    print(f"median over {args.repeats} run(s) per arm:")
    print(f"  forward p50   0: {med(0, fwd50):.3f} ms   {n}: {med(n, fwd50):.3f} ms   "
          f"ratio {n}/0 = {med(n, fwd50) / med(0, fwd50):.3f}")
    print(f"  total p50     0: {med(0, tot50):.3f} ms   {n}: {med(n, tot50):.3f} ms   "
          f"ratio {n}/0 = {med(n, tot50) / med(0, tot50):.3f}")
    print(f"  throughput    0: {med(0, rps):.1f} req/s   {n}: {med(n, rps):.1f} req/s   "
          f"ratio {n}/0 = {med(n, rps) / med(0, rps):.3f}")
    print(f"  server CPU    0: {100 * med(0, cpu):.0f}% of a core   "
          f"{n}: {100 * med(n, cpu):.0f}% of a core   "
          f"(≈ {100 * (med(n, cpu) - med(0, cpu)) / max(n, 1):.1f}% of a core per idle tab)")


if __name__ == "__main__":
    main()
