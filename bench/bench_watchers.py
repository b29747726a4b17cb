"""Do 30 watching browsers slow a run down? Forward-time median with N idle sessions vs none.

    python bench/bench_watchers.py [--sessions 30] [--duration 15] [--repeats 2] [--presenter]
    python bench/bench_watchers.py --generation [--presenter]   # a generation run (tiny-lm):
                                              # the decode step's p50 and tokens/s instead
    python bench/bench_watchers.py --quick    # a smoke run (CI): 3 tabs, one pair of 2 s
                                              # synthetic runs, no warm-up (not figures)

A workshop room opens the Live Profiler in 30 browsers. The page's fragments
(``st.fragment(run_every=...)``) rerun every second in the dashboard server's process, and
re-render the charts from a shared cached snapshot while a run is in flight. The run itself
executes in its own process on the same machine, so if watching costs the server real CPU,
the run's timings (the forward pass above all) inflate. This script measures that end to end,
against the real ``streamlit run app.py``.

Why it is built this way:

* **Idle tabs are fake browsers, not Chromium.** 30 Chromium instances on a 2-core machine
  would measure Chromium's rendering, not our server; in a real room the browsers run on the
  students' laptops. So each tab is a small asyncio websocket client (``FakeTab``) speaking
  Streamlit's own protocol on ``/_stcore/stream`` (protobuf ``BackMsg`` up, ``ForwardMsg``
  down) the way the 1.67 frontend does, as far as the server can tell:

  - it opens the ``live`` page with a ``rerun_script`` BackMsg (page name, query string,
    context info), as the frontend does right after the socket connects, and afterwards
    sends back the page hash from the ``navigation`` message;
  - it honours fragment auto-reruns: ``run_every`` reaches the browser as a
    ``ForwardMsg.auto_rerun`` (``interval``, ``fragment_id``; sent by
    ``streamlit/runtime/fragment.py``). The frontend then ``setInterval``s a
    ``rerun_script{fragment_id, is_auto_rerun=true}``, ignores a repeat with the same
    interval, cancels on ``stop_auto_rerun``, and drops every timer when a ``new_session``
    of a whole-page run arrives (the run re-announces the fragments it still wants). So does
    ``FakeTab``;
  - it reads and parses every ForwardMsg, keeps the frontend's ForwardMsg cache (hashes of
    ``metadata.cacheable`` messages, aged per finished script run, expired after
    ``max_cached_message_age`` runs) and reports it in ``cached_message_hashes``, so the server
    sends ``ref_hash`` stubs for unchanged charts, as it does for a browser;
  - permessage-deflate is negotiated as by a browser (the ``websockets`` default).

  Widget states are not echoed back on every rerun (a browser sends them all); the server
  keeps them in session state either way. The tabs are opened spread over one second, as in a
  room where people arrive at different moments (30 timers in phase would be a worse burst).
  Each report row says how often the server actually re-rendered the live view for each idle
  tab during the run (``renders/s/tab``; 1.0 = every second): the check that the server
  really did the work of N watchers, and the first thing to fall when it cannot keep up.

* **The measured run is started through the UI**, by one more ``FakeTab`` (the "driver"):
  it opens ``/live?model=...`` (every control is URL-bound), presses **Start** (a
  ``trigger_value`` widget state for the button's id), waits until its run shows as finished,
  and fetches **Download result (JSON)** as the browser does: a ``deferred_file`` backend
  operation request for the button's ``deferred_file_id`` (or its plain ``url``), then an HTTP
  GET. The driver is itself a watching tab, in both arms: "0 idle sessions" means only the
  driver watches.

* **Arms are interleaved** (0, N, 0, N for ``--repeats 2``) after a short unreported warm-up
  run, so machine drift hits both. The server process's CPU time (``/proc/<pid>/stat``
  utime+stime; the run's own process is a child and not counted) is read from Start to the
  result; so is this script's own CPU ("bench": the fake tabs share the cores too), and the
  1-minute load average before each run (other work on the machine shows there).

* ``404s`` counts result downloads whose link was gone before the GET (Streamlit drops a
  generated file after two script runs of any session; a busy room makes that quick), and
  ``--post-script-gc on|off`` overrides ``.streamlit/config.toml``'s ``runner.postScriptGC``
  to compare: Streamlit's default ``gc.collect(2)`` after every script run (~140 ms over a
  heap that holds torch) saturates the server with a room's once-a-second fragment runs.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test suite's browser helper (tests/ is not installed)

import numpy as np  # noqa: E402
import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from tests.browser import streamlit_server  # noqa: E402

FRAGMENT_DONE = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
EARLY_FOR_RERUN = ForwardMsg.FINISHED_EARLY_FOR_RERUN
CLK_TCK = os.sysconf("SC_CLK_TCK")
RUN_ID = re.compile(r"`((?:run|gen)-[^`]+)`")  # a one-shot run's id, or a generation's
FINISHED = ("completed", "stopped", "failed")
JSON_LABEL = "Download result (JSON)"
GEN_JSON_LABEL = "Download the run (JSON)"
#: the Live Profiler's generation mode, as its URL-bound mode control spells it
GEN_MODE = "streamed generation (LLM)"
INSTRUCTOR_KEY = "bench-watchers-instructor"


# ---- the fake browser tab ------------------------------------------------------------------
@dataclass
class TabStats:
    messages: int = 0
    bytes: int = 0
    ref_hits: int = 0          # ForwardMsgs the server replaced by a ref_hash stub
    full_runs: int = 0         # script_finished of a whole-page run
    fragment_runs: int = 0     # script_finished of a fragment run
    renders: int = 0           # live-view renders (its status line arrived)
    reruns_sent: int = 0
    download_404s: int = 0     # a download link gone before we could GET it


@dataclass
class _Cached:
    run_count: int
    fragment_id: str


@dataclass
class Download:
    run_id: str                # the run whose status line preceded the button
    url: str
    deferred_file_id: str


@dataclass
class FakeTab:
    """One browser tab on a page of the dashboard, as far as the server can tell."""

    base_url: str
    query: str = ""
    page: str = "live"
    stats: TabStats = field(default_factory=TabStats)
    buttons: dict[str, str] = field(default_factory=dict)        # label -> widget id
    inputs: dict[str, str] = field(default_factory=dict)         # text input label -> id
    downloads: dict[str, Download] = field(default_factory=dict)  # label -> latest button
    status_line: str = ""      # "**<icon> running** · `run-…` · …" of the live view

    def __post_init__(self) -> None:
        self._ws: Any = None
        self._reader_task: asyncio.Task | None = None
        self._timers: dict[str, tuple[float, asyncio.Task]] = {}
        self._cache: dict[str, _Cached] = {}
        self._run_count = 0
        self._max_age = 2
        self._page_hash = ""
        self._session_id = ""
        self._pending: dict[str, asyncio.Future] = {}
        self.full_run_done = asyncio.Event()

    # -- connection ---------------------------------------------------------------------------
    async def open(self) -> None:
        ws_url = self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
        # The subprotocol tokens the frontend sends when it has no XSRF cookie yet.
        self._ws = await websockets.connect(
            ws_url, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], max_size=None,
            open_timeout=300)  # a saturated server can take long to answer the handshake
        self._reader_task = asyncio.create_task(self._reader())
        await self.rerun()  # the frontend's first "Requesting a script run."

    async def close(self) -> None:
        self._cancel_timers()
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._ws is not None:
            await self._ws.close()

    @property
    def run_id(self) -> str:
        m = RUN_ID.search(self.status_line)
        return m.group(1) if m else ""

    # -- sending --------------------------------------------------------------------------------
    async def rerun(self, fragment_id: str = "", auto: bool = False,
                    triggers: tuple[str, ...] = (),
                    strings: dict[str, str] | None = None) -> None:
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
        for wid, text in (strings or {}).items():
            w = rs.widget_states.widgets.add()
            w.id = wid
            w.string_value = text
        ci = rs.context_info
        ci.timezone, ci.timezone_offset, ci.locale = "UTC", 0, "en-US"
        ci.url = f"{self.base_url}/{self.page}" + (f"?{self.query}" if self.query else "")
        ci.color_scheme = "light"
        self.stats.reruns_sent += 1
        await self._ws.send(msg.SerializeToString())

    async def fetch(self, label: str, attempts: int = 10) -> bytes:
        """Click a download button: get a deferred file's URL from the server, then GET it.

        Streamlit keeps a generated file only until two script runs of *any* session have
        seen it unreferenced (``MediaFileManager.remove_orphaned_files``), so on a busy server
        the GET can come too late and get a 404; a person would click again. So do we, and
        count it (``stats.download_404s``)."""
        d = self.downloads[label]
        for _ in range(attempts):
            url = d.url or await self._deferred_url(d.deferred_file_id)
            full = urllib.parse.urljoin(self.base_url + "/", url.lstrip("/"))
            try:
                return await asyncio.to_thread(
                    lambda: urllib.request.urlopen(full, timeout=60).read())  # noqa: B023
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
                self.stats.download_404s += 1
        raise RuntimeError(f"{label}: 404 on each of {attempts} attempts")

    async def _deferred_url(self, file_id: str) -> str:
        msg = BackMsg()
        req = msg.backend_operation_request
        req.request_id = uuid.uuid4().hex
        req.session_id = self._session_id
        req.deferred_file.file_id = file_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[req.request_id] = fut
        await self._ws.send(msg.SerializeToString())
        resp = await asyncio.wait_for(fut, 300)
        if resp.error_msg:
            raise RuntimeError(f"deferred download failed: {resp.error_msg}")
        return resp.deferred_file.url

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

    def _cancel_timers(self, fragment_ids: Any = None) -> None:
        for fid in list(self._timers) if fragment_ids is None else fragment_ids:
            old = self._timers.pop(fid, None)
            if old is not None:
                old[1].cancel()

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
            self._session_id = msg.new_session.initialize.session_id or self._session_id
            if not msg.metadata.run.fragment_ids:  # a whole-page run: timers start afresh
                self._cancel_timers()
        elif kind == "navigation":  # the page that ran: the frontend sends its hash back
            self._page_hash = msg.navigation.page_script_hash
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            self._element(msg.delta.new_element)
        elif kind == "auto_rerun":
            fid, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
            old = self._timers.get(fid)
            if old is None or old[0] != interval:  # same interval again: keep the timer
                self._cancel_timers([fid])
                task = asyncio.get_running_loop().create_task(self._auto_rerun(fid, interval))
                self._timers[fid] = (interval, task)
        elif kind == "stop_auto_rerun":
            self._cancel_timers(msg.stop_auto_rerun.fragment_ids)
        elif kind == "script_finished":
            status = msg.script_finished
            if status == FRAGMENT_DONE:
                self.stats.fragment_runs += 1
            elif status != EARLY_FOR_RERUN:
                self.stats.full_runs += 1
                self.full_run_done.set()
            if status != EARLY_FOR_RERUN:
                self._age_cache(list(msg.metadata.run.fragment_ids))
        elif kind == "backend_operation_response":
            fut = self._pending.pop(msg.backend_operation_response.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(msg.backend_operation_response)

    def _element(self, el: Any) -> None:
        which = el.WhichOneof("type")
        if which == "markdown" and RUN_ID.search(el.markdown.body):
            self.status_line = el.markdown.body
            self.stats.renders += 1
        elif which == "button":
            self.buttons[el.button.label] = el.button.id
        elif which == "text_input":
            self.inputs[el.text_input.label] = el.text_input.id
        elif which == "download_button":
            b = el.download_button
            self.downloads[b.label] = Download(self.run_id, b.url, b.deferred_file_id)

    def _age_cache(self, fragment_ids: list[str]) -> None:
        """The frontend's ForwardMsgCache.incrementRunCount."""
        self._run_count += 1
        for h, c in list(self._cache.items()):
            if fragment_ids and (not c.fragment_id or c.fragment_id not in fragment_ids):
                continue
            if self._run_count - c.run_count > self._max_age:
                del self._cache[h]


# ---- the server process ---------------------------------------------------------------------
def server_pid(port: int) -> int:
    """The ``streamlit run`` process that ``streamlit_server`` started on this port."""
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
    would block the server mid-benchmark. Read it away through /proc (Linux)."""
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
    wall_s: float               # Start pressed → the driver sees its run finished
    server_cpu_s: float
    bench_cpu_s: float
    load: float                 # 1-min load average before the run
    render_rate: list[float]    # live-view renders per second, per idle tab, during the run
    idle_kib_s: float           # KiB/s received per idle tab, during the run
    download_404s: int          # result downloads that 404'd before one succeeded


async def full_run(tab: FakeTab, **rerun: Any) -> None:
    """Send a rerun and wait until a whole-page run of it finished."""
    tab.full_run_done.clear()
    await tab.rerun(**rerun)
    await asyncio.wait_for(tab.full_run_done.wait(), 300)


async def until(test: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    t0 = time.monotonic()
    while not test():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        await asyncio.sleep(0.05)


async def present(driver: FakeTab) -> None:
    """The driver signs in with the instructor key (the sidebar's text input) and presses
    Present, as an instructor at the projector does."""
    await until(lambda: "Instructor key" in driver.inputs, "the instructor key box")
    await full_run(driver, strings={driver.inputs["Instructor key"]: INSTRUCTOR_KEY})
    await until(lambda: "Present" in driver.buttons, "the Present button")
    await full_run(driver, triggers=(driver.buttons["Present"],))
    await until(lambda: "Release" in driver.buttons, "presenting (the Release button)")


def finished(status_line: str) -> bool:
    """The live view's status line says its run ended (a one-shot run's "**… completed**",
    a generation's "`run-…` · completed · …")."""
    return any(f" {s}**" in status_line or f"· {s} ·" in status_line for s in FINISHED)


async def measured_run(url: str, pid: int, query: str, sessions: int, settle_s: float,
                       timeout_s: float, presenting: bool = False,
                       idle_query: str = "", json_label: str = JSON_LABEL) -> Outcome:
    """One run, watched by ``sessions`` idle tabs (on ``idle_query``: the page's mode) — or,
    ``presenting``, by that many followers of the driver, who presents (in both arms) before
    they open."""
    driver = FakeTab(url, query=query)
    if presenting:
        await driver.open()
        await asyncio.wait_for(driver.full_run_done.wait(), 600)
        await present(driver)
    idle = [FakeTab(url, query=idle_query) for _ in range(sessions)]
    for tab in idle:  # spread over one second, so their timers are out of phase
        await tab.open()
        await asyncio.sleep(1.0 / sessions)
    if not presenting:
        await driver.open()
    tabs = idle + [driver]
    await asyncio.wait_for(asyncio.gather(*(t.full_run_done.wait() for t in tabs)), 600)
    await asyncio.sleep(settle_s)

    load = os.getloadavg()[0]
    before_run = driver.run_id
    snap = lambda: [(t.stats.renders, t.stats.bytes) for t in idle]  # noqa: E731
    before = snap()
    cpu0, bench0, t0 = cpu_seconds(pid), time.process_time(), time.monotonic()
    await driver.rerun(triggers=(driver.buttons["Start"],))  # press Start
    while True:  # until the driver's page shows its new run finished, with the downloads
        rid = driver.run_id
        d = driver.downloads.get(json_label)
        if (rid and rid != before_run and finished(driver.status_line)
                and d is not None and d.run_id == rid):
            break
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"the run did not finish in {timeout_s:.0f} s; the driver "
                               f"last saw: {driver.status_line!r}")
        await asyncio.sleep(0.05)
    wall = time.monotonic() - t0
    cpu1, bench1 = cpu_seconds(pid), time.process_time()
    after = snap()
    body = await driver.fetch(json_label)
    if presenting:
        if not all(t.run_id == driver.run_id for t in idle):
            raise RuntimeError("a follower did not show the presenter's run: "
                               f"{[t.run_id for t in idle]} vs {driver.run_id}")
        await full_run(driver, triggers=(driver.buttons["Release"],))
    for t in tabs:
        await t.close()
    return Outcome(
        sessions=sessions, result=json.loads(body), wall_s=wall, server_cpu_s=cpu1 - cpu0,
        bench_cpu_s=bench1 - bench0, load=load,
        render_rate=[(a[0] - b[0]) / wall for a, b in zip(after, before)],
        idle_kib_s=(sum(a[1] - b[1] for a, b in zip(after, before)) / wall / 1024 / sessions
                    if sessions else 0.0),
        download_404s=driver.stats.download_404s)


# ---- report ---------------------------------------------------------------------------------
def figures(result: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """What a run measured that watching could inflate: (value, unit) by name. A one-shot
    run's forward pass and latency; a generation's decode step (the pipeline's own call, in
    steps that only decode, of the run's commonest batch: its forward pass), TTFT, gaps and
    output tokens/s."""
    s = result["summary"]
    if result.get("kind") != "generation":
        fwd, tot = s["components_ms"]["forward"], s["latency_ms"]
        return {"forward p50": (fwd["p50"], "ms"), "forward p99": (fwd["p99"], "ms"),
                "total p50": (tot["p50"], "ms"), "total p99": (tot["p99"], "ms"),
                "throughput": (s["throughput_rps"], "req/s")}
    from latency.analysis.gen_result import GenResult

    steps = GenResult.from_dict(result).steps
    decode = steps[(steps["prefill_tokens"] == 0) & (steps["decode_seqs"] > 0)]
    # the steps of the batch size most steps ran: a decode step's time grows with its batch,
    # and which sizes a run happened to hold would otherwise move its median between runs
    sizes, counts = np.unique(decode["decode_seqs"], return_counts=True)
    call = decode["call_ns"][decode["decode_seqs"] == sizes[counts.argmax()]] / 1e6
    return {"step p50": (float(statistics.median(call)), "ms"),
            "step p99": (float(sorted(call)[int(0.99 * (len(call) - 1))]), "ms"),
            "TTFT p50": (s["ttft_ms"]["p50"], "ms"), "ITL p99": (s["itl_ms"]["p99"], "ms"),
            "throughput": (s["output_tokens_per_s"], "tok/s")}


def header(names: list[str]) -> str:
    return (f"{'sessions':>8} " + " ".join(f"{n:>11}" for n in names)
            + f" {'srv cpu':>8} {'srv':>5} {'bench':>6} {'wall':>6} {'renders/s/tab':>18} "
              f"{'KiB/s/tab':>9} {'load':>5} {'404s':>4}")


def row(o: Outcome) -> str:
    rr = (f"{statistics.mean(o.render_rate):.2f} ({min(o.render_rate):.2f})"
          if o.render_rate else "-")
    cells = " ".join(f"{v:>11.3f}" if unit == "ms" else f"{v:>11.1f}"
                     for v, unit in figures(o.result).values())
    return (f"{o.sessions:>8} {cells} {o.server_cpu_s:>8.2f} "
            f"{o.server_cpu_s / o.wall_s:>5.2f} {o.bench_cpu_s:>6.2f} {o.wall_s:>6.1f} "
            f"{rr:>18} {o.idle_kib_s:>9.1f} {o.load:>5.2f} {o.download_404s:>4}")


def summary(outs: list[Outcome], n: int) -> None:
    by_n: dict[int, list[Outcome]] = {}
    for o in outs:
        by_n.setdefault(o.sessions, []).append(o)

    def line(name: str, f: Callable[[Outcome], float], unit: str, fmt: str = ".3f") -> None:
        a, b = (statistics.median(f(o) for o in by_n[k]) for k in (0, n))
        print(f"  {name:<14} 0: {a:{fmt}} {unit:<6} {n}: {b:{fmt}} {unit:<6} ratio {n}/0 = "
              f"{b / a:.3f}")

    print(f"median over {len(by_n[0])} run(s) per arm:")
    for name, (_, unit) in figures(outs[0].result).items():
        line(name, lambda o, k=name: figures(o.result)[k][0], unit,
             ".3f" if unit == "ms" else ".1f")
    line("server CPU", lambda o: o.server_cpu_s / o.wall_s, "cores", ".2f")


def post_script_gc(env: dict[str, str]) -> str:
    """The server's effective runner.postScriptGC: environment, else config.toml, else on."""
    if "STREAMLIT_RUNNER_POST_SCRIPT_GC" in env:
        return f"{env['STREAMLIT_RUNNER_POST_SCRIPT_GC']} (forced)"
    cfg = ROOT / ".streamlit" / "config.toml"
    if cfg.exists():
        value = tomllib.loads(cfg.read_text()).get("runner", {}).get("postScriptGC")
        if value is not None:
            return f"{str(value).lower()} (.streamlit/config.toml)"
    return "true (Streamlit's default)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=30, help="idle watching tabs (default 30)")
    ap.add_argument("--duration", type=int, default=15, help="run length, s (default 15)")
    ap.add_argument("--repeats", type=int, default=2, help="pairs of (0, N) runs (default 2)")
    ap.add_argument("--model", default="image-cnn",
                    help="pipeline; its forward pass should be real CPU work (default image-cnn)")
    ap.add_argument("--concurrency", type=int, default=4, help="closed-loop clients (default 4)")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="seconds the tabs watch before Start (default 3)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the unreported warm-up run")
    ap.add_argument("--presenter", action="store_true",
                    help="presenter mode: the driver signs in as instructor and presents (in "
                         "both arms); the N tabs follow it instead of watching on their own")
    ap.add_argument("--post-script-gc", choices=("project", "on", "off"), default="project",
                    help="Streamlit's runner.postScriptGC (a gc.collect(2) after every script "
                         "run, fragment runs included): as .streamlit/config.toml says "
                         "(default), or forced on/off to compare")
    ap.add_argument("--generation", action="store_true",
                    help="a generation run on the Live Profiler's generation mode (default "
                         "model tiny-lm: a real decode step), its idle tabs on that mode too")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 3 tabs, one pair of 2 s runs of the synthetic pipeline, "
                         "1 s settle, no warm-up")
    args = ap.parse_args()
    if args.generation and args.model == "image-cnn":
        args.model = "tiny-lm"
    if args.quick:
        args.sessions, args.duration, args.repeats, args.settle = 3, 2, 1, 1.0
        args.model = "synthetic-lm" if args.generation else "synthetic"
        args.no_warmup = True

    if args.generation:  # the generation mode's controls: prefix glive_ (ui/gen_controls.py)
        mode = {"live_kind": GEN_MODE}
        query = urllib.parse.urlencode({**mode, "glive_model": args.model,
                                        "glive_closed": "true",
                                        "glive_clients": args.concurrency,
                                        "glive_prompts": "64", "glive_outputs": "32",
                                        "glive_duration": args.duration})
        idle_query, json_label = urllib.parse.urlencode(mode), GEN_JSON_LABEL
        warm = urllib.parse.urlencode({**mode, "glive_model": args.model,
                                       "glive_duration": 2})
    else:
        query = urllib.parse.urlencode({"model": args.model, "mode": "closed loop",
                                        "concurrency": args.concurrency,
                                        "duration": args.duration, "threads": 1,
                                        "replicas": 1, "batch": 1})
        idle_query, json_label = "", JSON_LABEL
        warm = urllib.parse.urlencode({"model": args.model, "duration": 2})
    print(f"cores: {os.cpu_count()}   run: /live?{query}")
    print("idle tabs: Streamlit-protocol websocket clients (no Chromium); the driver tab also "
          "watches, in both arms")
    env = {"STREAMLIT_LOGGER_LEVEL": "error"}
    if args.presenter:
        env["LATENCY_LAB_INSTRUCTOR_KEY"] = INSTRUCTOR_KEY
        print(f"presenter mode: the driver presents; the {args.sessions} tabs follow it")
    if args.post_script_gc != "project":  # an environment variable beats config.toml
        env["STREAMLIT_RUNNER_POST_SCRIPT_GC"] = "true" if args.post_script_gc == "on" else "false"
    print(f"server: streamlit run app.py, runner.postScriptGC = {post_script_gc(env)}")
    with streamlit_server(env) as url:
        pid = server_pid(int(url.rsplit(":", 1)[1]))
        drain_stdout(pid)
        timeout = args.duration + 600

        async def go() -> list[Outcome]:
            if not args.no_warmup:
                await measured_run(url, pid, warm, 0, 0.5, timeout, idle_query=idle_query,
                                   json_label=json_label)
            outs = []
            for _ in range(args.repeats):
                for n in (0, args.sessions):
                    o = await measured_run(url, pid, query, n, args.settle, timeout,
                                           args.presenter, idle_query, json_label)
                    if not outs:
                        print(header(list(figures(o.result))), flush=True)
                    cfg = o.result["config"]
                    if cfg["model"] != args.model or cfg["concurrency"] != args.concurrency:
                        raise RuntimeError(f"the run did not get the URL's settings: {cfg}")
                    print(row(o), flush=True)
                    outs.append(o)
            return outs

        outs = asyncio.run(go())
    print()
    summary(outs, args.sessions)


if __name__ == "__main__":
    main()
