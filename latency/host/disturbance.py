"""The machine while a run measures: what else used its CPU, and what else slowed it.

A profiler's figures are only as good as the machine they were taken on. The run lock
(``latency.execution.lock``) keeps two Latency Lab runs apart; it cannot see a compile job, a
browser or another user's tests. So every run samples the machine while it measures — about
once a second, in a daemon thread of the run process (``DisturbanceSampler``) — and keeps:

- **other processes' CPU**: the busy time of the cores this run may use (``/proc/stat``, via
  psutil) minus the CPU of this run's own process tree (this process and the processes it
  started for the run: our HTTP server, Ray's workers), in cores;
- **CPU steal**: time the hypervisor gave this VM's cores to someone else;
- **preemptions**: involuntary context switches of this run's threads (all of them: this
  process's and its children's);
- **cgroup CPU throttling**: ``nr_throttled`` and the throttled time of this process's cgroup
  and its ancestors (a container's CPU quota: the silent killer — the machine looks idle);
  cgroup v2 and v1;
- **CPU frequency**, where the kernel exposes it (psutil);
- **pressure stall information** (PSI) for memory and CPU, where the kernel has it.

Stored as ``environment["disturbance"]``: a summary of the whole measurement and a per-second
series (at most ``MAX_SAMPLES`` points: past that, adjacent samples merge and the period
doubles, so a run of any length keeps its whole span). The sampler measures its own CPU time
(``sampler_cpu_s``; BENCHMARKS.md "Disturbance" gives what it was here). What the numbers mean
for the run's figures — the ``machine`` finding and the ``quiet machine`` check — is
``latency.analysis.validity``; the thresholds were measured (``bench/bench_disturbance.py``,
BENCHMARKS.md).

psutil reads what it covers (system and per-process CPU times, CPU frequency); a few things it
does not cover are read by hand, each saying why where it is done: cgroup ``cpu.stat``, PSI,
the kernel's list of a process's children, and the context switches of every thread.
"""
from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from latency.host.cores import usable_cores

#: seconds between samples
PERIOD_S = 1.0
#: the most samples a series keeps: an hour at one a second; past it, pairs merge
MAX_SAMPLES = 3600
#: a child process counts as this run's when it started at most this long before the run
#: (create times have a clock tick's resolution)
CREATE_SLACK_S = 0.05
#: without the kernel's children files, ask psutil for the tree only every this many samples
#: (it scans every process on the machine)
TREE_SCAN_EVERY = 10
PROC = Path("/proc")


# ---- readings ------------------------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def parse_cpu_stat(text: str) -> dict[str, int]:
    """A cgroup ``cpu.stat`` as ``{key: int}``.

    By hand: psutil does not read cgroups. v2 has ``nr_periods``, ``nr_throttled`` and
    ``throttled_usec``; v1 has ``throttled_time`` in ns instead."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = int(value.strip())
        except ValueError:
            continue
    return out


def parse_psi(text: str) -> dict[str, float]:
    """``/proc/pressure/<resource>`` as ``{"some": total_s, "full": total_s}``.

    By hand: psutil does not read pressure stall information. Each line is
    ``some avg10=0.00 avg60=0.00 avg300=0.00 total=<µs>``; the totals are what a share over an
    interval is computed from (the averages are the kernel's own decaying windows)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        for item in rest.split():
            name, _, value = item.partition("=")
            if name == "total":
                try:
                    out[kind] = int(value) / 1e6
                except ValueError:
                    pass
    return out


@dataclass(frozen=True)
class CgroupCpu:
    """One cgroup's ``cpu.stat`` (this process's, or an ancestor's: a quota set anywhere
    above throttles it too)."""

    version: int
    path: Path

    def read(self) -> tuple[int, float] | None:
        """(throttled periods, throttled seconds), or None when the file has neither."""
        text = _read(self.path)
        if text is None:
            return None
        stat = parse_cpu_stat(text)
        if "nr_throttled" not in stat:  # v2 without the cpu controller enabled here
            return None
        if "throttled_usec" in stat:
            seconds = stat["throttled_usec"] / 1e6
        else:
            seconds = stat.get("throttled_time", 0) / 1e9  # v1: ns
        return stat["nr_throttled"], seconds


def cgroup_cpu_stats(proc: Path = PROC) -> list[CgroupCpu]:
    """The ``cpu.stat`` files of this process's cgroup and of its ancestors up to the mount's
    root, cgroup v2 first, then v1's ``cpu`` controller.

    By hand: psutil knows no cgroups. ``/proc/self/cgroup`` names the cgroup (``0::/path``
    for v2, ``N:cpu,cpuacct:/path`` for v1) and ``/proc/self/mountinfo`` where each hierarchy
    is mounted and from which root (in a container with a cgroup namespace the path is ``/``
    and the mount's root is the container's own cgroup)."""
    groups = _read(proc / "self" / "cgroup")
    mounts = _read(proc / "self" / "mountinfo")
    if groups is None or mounts is None:
        return []
    v2_path, v1_path = None, None
    for line in groups.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2_path = path
        elif "cpu" in controllers.split(","):
            v1_path = path
    found: list[CgroupCpu] = []
    for line in mounts.splitlines():
        left, _, right = line.partition(" - ")
        fields_ = left.split()
        rfields = right.split()
        if len(fields_) < 5 or len(rfields) < 1:
            continue
        root, point, fstype = fields_[3], fields_[4], rfields[0]
        options = rfields[2].split(",") if len(rfields) > 2 else []
        if fstype == "cgroup2" and v2_path is not None:
            found += _chain(2, Path(point), root, v2_path)
        elif fstype == "cgroup" and "cpu" in options and v1_path is not None:
            found += _chain(1, Path(point), root, v1_path)
    seen: set[Path] = set()
    unique = []
    for c in sorted(found, key=lambda c: c.version, reverse=True):
        if c.path not in seen and c.path.exists():
            seen.add(c.path)
            unique.append(c)
    return unique


def _chain(version: int, mountpoint: Path, root: str, path: str) -> list[CgroupCpu]:
    """``cpu.stat`` of the cgroup at ``path`` and of each ancestor inside the mount."""
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root.rstrip("/")):] or "/"
    parts = [p for p in path.split("/") if p]
    out = []
    for depth in range(len(parts), -1, -1):
        out.append(CgroupCpu(version, mountpoint.joinpath(*parts[:depth]) / "cpu.stat"))
    return out


def involuntary_switches_of(pid: int, proc: Path = PROC) -> int | None:
    """Involuntary context switches of every thread of process ``pid``.

    By hand: psutil's ``num_ctx_switches()`` reads ``/proc/<pid>/status``, which counts the
    process's main thread only; a run's work is in its other threads."""
    try:
        tasks = os.listdir(proc / str(pid) / "task")
    except OSError:
        return None
    total = 0
    for tid in tasks:
        text = _read(proc / str(pid) / "task" / tid / "status")
        if text is None:
            continue
        for line in text.splitlines():
            if line.startswith("nonvoluntary_ctxt_switches:"):
                total += int(line.split(":", 1)[1])
                break
    return total


def children_of(pid: int, proc: Path = PROC) -> list[int] | None:
    """The processes ``pid`` started that are still running, and theirs (recursively); None
    when the kernel does not list children (``CONFIG_PROC_CHILDREN``).

    By hand: psutil's ``Process.children()`` finds children by scanning every process of the
    machine (~2 ms with 120 processes, more on a busy host, every second); the kernel lists
    each thread's children in ``/proc/<pid>/task/<tid>/children``."""
    if not (proc / str(pid) / "task" / str(pid) / "children").exists():
        return None
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(proc / str(p) / "task")
        except OSError:  # ended meanwhile
            continue
        for tid in tasks:
            for child in (_read(proc / str(p) / "task" / tid / "children") or "").split():
                if child.isdigit() and int(child) not in out:
                    out.append(int(child))
                    todo.append(int(child))
    return out


# ---- one sample ----------------------------------------------------------------------------
@dataclass
class Reading:
    """Cumulative counters at one moment (seconds unless named otherwise)."""

    wall: float
    busy: float  # the run's cores, all processes (user, nice, system, irq, softirq)
    steal: float
    ours: float  # this run's process tree
    target: float  # the target server's processes on this machine (0 when none)
    involuntary: int
    throttled_periods: int | None
    throttled: float | None
    memory_some: float | None
    memory_full: float | None
    cpu_some: float | None
    freq_mhz: float | None
    #: the sampler thread's own CPU time so far
    sampler_cpu: float


@dataclass
class Interval:
    """What happened between two readings: the deltas, and the frequency at its end."""

    t_end: float  # seconds since the start
    dt: float
    busy: float
    steal: float
    ours: float
    target: float
    involuntary: int
    throttled_periods: int | None
    throttled: float | None
    memory_some: float | None
    cpu_some: float | None
    freq_mhz: float | None

    def merged(self, later: Interval) -> Interval:
        """This interval and the next as one (sums; the frequency time-weighted)."""
        dt = self.dt + later.dt
        freq = None
        if self.freq_mhz is not None and later.freq_mhz is not None and dt > 0:
            freq = (self.freq_mhz * self.dt + later.freq_mhz * later.dt) / dt
        return Interval(later.t_end, dt, freq_mhz=freq, **{
            name: _add(getattr(self, name), getattr(later, name)) for name in COUNTED})


#: an interval's counts: what two readings' difference, and two intervals' sum, are made of
COUNTED = ("busy", "steal", "ours", "target", "involuntary", "throttled_periods", "throttled",
           "memory_some", "cpu_some")


def _add(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a + b


def _delta(a: Any, b: Any) -> Any:
    return None if a is None or b is None else max(b - a, 0)


@dataclass
class _Tree:
    """This run's process tree: this process, and the children started since the run began
    (our HTTP server, Ray's processes — not a process the caller had already started)."""

    since: float
    pid: int = field(default_factory=os.getpid)
    #: child pid → psutil.Process (kept: it caches the create time); None = not the run's
    known: dict[int, psutil.Process | None] = field(default_factory=dict)
    #: the last (CPU seconds, involuntary switches) read of each of the run's children, also
    #: of those that ended (their last reading stays counted, so the total never drops)
    last: dict[int, tuple[float, int]] = field(default_factory=dict)
    no_children_file: bool = False
    scans: int = 0

    def children(self) -> list[int]:
        if not self.no_children_file:
            kids = children_of(self.pid)
            if kids is not None:
                return kids
            self.no_children_file = True
        self.scans += 1
        if self.scans % TREE_SCAN_EVERY != 1:  # psutil scans the machine: not every second
            return [p for p, proc in self.known.items() if proc is not None]
        try:
            return [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        except psutil.Error:
            return []

    def totals(self) -> tuple[float, int]:
        """(CPU seconds, involuntary switches) of this process — all its threads, also those
        that ended (``process_time``, ``getrusage``) — plus the run's children."""
        cpu = time.process_time()
        switches = int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
        for pid in self.children():
            proc = self.known[pid] if pid in self.known else self._adopt(pid)
            if proc is None:
                continue
            try:
                t = proc.cpu_times()
            except psutil.Error:
                continue
            before = self.last.get(pid, (0.0, 0))  # first seen: all of it is the run's
            self.last[pid] = (max(t.user + t.system, before[0]),
                              max(involuntary_switches_of(pid) or 0, before[1]))
        return (cpu + sum(c for c, _ in self.last.values()),
                switches + sum(s for _, s in self.last.values()))

    def _adopt(self, pid: int) -> psutil.Process | None:
        try:
            proc = psutil.Process(pid)
            ours = _started_after(proc, self.since)
        except psutil.Error:
            return None
        self.known[pid] = proc if ours else None
        return proc if ours else None


def _started_after(proc: psutil.Process, since: float) -> bool:
    """Whether ``proc`` started after ``since`` (``time.time()``), to a clock tick.

    psutil's ``create_time()`` is the kernel's start time (ticks since boot) plus the boot time
    of ``/proc/stat``, which is whole seconds: up to a second off the wall clock. Compared in
    time since boot, both sides are exact."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is None:  # pragma: no cover - not Linux: the wall clock, roughly
        return proc.create_time() >= since - 1.0
    since_boot = since - (time.time() - time.clock_gettime(boottime))
    return proc.create_time() - psutil.boot_time() >= since_boot - CREATE_SLACK_S


class DisturbanceSampler:
    """Samples the machine once a ``period_s`` from ``start()`` to ``stop()``, in a daemon
    thread; ``summary()`` is what ``environment["disturbance"]`` holds.

    ``run_started``: when the run began (``time.time()``): processes started since are this
    run's (our HTTP server is started before measuring); None: now. ``cpus``: the CPUs this
    run may use (default: this process's affinity). ``target_pids``: the server a run
    targets, when it runs on this machine — its CPU is counted as the target's, apart from
    other processes' (it is what the run measures, not what disturbs it)."""

    def __init__(self, period_s: float = PERIOD_S, max_samples: int = MAX_SAMPLES,
                 run_started: float | None = None, cpus: list[int] | None = None,
                 target_pids: list[int] | None = None) -> None:
        if max_samples < 2:
            raise ValueError("max_samples must be at least 2")
        self.period_s = float(period_s)
        self.max_samples = int(max_samples)
        try:
            self.cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - non-Linux
            self.cpus = list(range(psutil.cpu_count() or 1))
        self._tree = _Tree(run_started if run_started is not None else time.time())
        self._targets: dict[int, psutil.Process] = {}
        for pid in target_pids or []:
            try:
                self._targets[pid] = psutil.Process(pid)
            except psutil.Error:
                continue
        self._target_last: dict[int, float] = {}
        self._cgroups = cgroup_cpu_stats()
        self._has_psi = {r: _read(PROC / "pressure" / r) is not None for r in ("memory", "cpu")}
        self._freq_ok = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._first: Reading | None = None
        self._last: Reading | None = None
        self._intervals: list[Interval] = []
        #: seconds each series point spans (doubles each time the series is halved)
        self._point_s = self.period_s
        self._pending: Interval | None = None
        self._sampler_cpu = 0.0
        self._samples = 0
        self._error: str | None = None

    # ---- the thread ----------------------------------------------------------------------
    def start(self) -> DisturbanceSampler:
        self._take()  # the baseline, in the caller's thread: the measurement starts now
        self._thread = threading.Thread(target=self._loop, name="disturbance", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """The last reading (the measurement ends now), then the summary."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._take()
        return self.summary()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._take()

    # ---- readings ------------------------------------------------------------------------
    def _reading(self) -> Reading:
        per_cpu = psutil.cpu_times(percpu=True)
        mine = [per_cpu[i] for i in self.cpus if i < len(per_cpu)] or per_cpu
        busy = sum(t.user + t.nice + t.system + getattr(t, "irq", 0.0)
                   + getattr(t, "softirq", 0.0) for t in mine)
        steal = sum(getattr(t, "steal", 0.0) for t in mine)
        ours, involuntary = self._tree.totals()
        target = self._target_cpu()
        periods, throttled = self._throttling()
        mem = self._psi("memory")
        cpu = self._psi("cpu")
        return Reading(time.monotonic(), busy, steal, ours, target, involuntary, periods,
                       throttled,
                       mem.get("some") if mem is not None else None,
                       mem.get("full") if mem is not None else None,
                       cpu.get("some") if cpu is not None else None, self._freq(),
                       self._sampler_cpu)

    def _target_cpu(self) -> float:
        """The target's processes' CPU seconds (each one's last reading kept once it ends,
        so the total never drops)."""
        for pid, proc in self._targets.items():
            try:
                t = proc.cpu_times()
            except psutil.Error:
                continue
            self._target_last[pid] = max(t.user + t.system, self._target_last.get(pid, 0.0))
        return sum(self._target_last.values())

    def _throttling(self) -> tuple[int | None, float | None]:
        """Summed over the cgroup and its ancestors that report throttling (a quota at any
        level throttles this process; each level counts its own)."""
        got = [r for r in (c.read() for c in self._cgroups) if r is not None]
        if not got:
            return None, None
        return sum(p for p, _ in got), sum(s for _, s in got)

    def _psi(self, resource_name: str) -> dict[str, float] | None:
        if not self._has_psi.get(resource_name):
            return None
        text = _read(PROC / "pressure" / resource_name)
        return parse_psi(text) if text is not None else None

    def _freq(self) -> float | None:
        if not self._freq_ok:
            return None
        try:
            f = psutil.cpu_freq()
        except (OSError, NotImplementedError, AttributeError, RuntimeError):
            f = None
        if f is None or not f.current:
            self._freq_ok = False
            return None
        return float(f.current)

    def _take(self) -> None:
        t0 = time.thread_time()
        try:
            reading = self._reading()
        except Exception as exc:  # noqa: BLE001 - a sampler never breaks the run it watches
            self._error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            if self._first is None:
                self._first = reading
            elif self._last is not None:
                self._add(self._interval(self._last, reading))
            self._last = reading
            self._samples += 1
            self._sampler_cpu += time.thread_time() - t0

    def _interval(self, a: Reading, b: Reading) -> Interval:
        assert self._first is not None
        return Interval(b.wall - self._first.wall, b.wall - a.wall, freq_mhz=b.freq_mhz, **{
            name: _delta(getattr(a, name), getattr(b, name)) for name in COUNTED})

    def _add(self, interval: Interval) -> None:
        """Append one interval at the series' resolution: while a point spans more than one
        period (after halving) intervals gather until the point is full."""
        if self._pending is not None:
            interval = self._pending.merged(interval)
            self._pending = None
        if interval.dt < 0.5 * self.period_s and self._intervals:  # the last, short one
            self._intervals[-1] = self._intervals[-1].merged(interval)
            return
        if interval.dt < self._point_s * 0.75 and self._point_s > self.period_s:
            self._pending = interval
            return
        self._intervals.append(interval)
        if len(self._intervals) >= self.max_samples:  # halve: merge neighbours
            pairs = self._intervals
            merged = [pairs[i].merged(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]
            if len(pairs) % 2:
                merged.append(pairs[-1])
            self._intervals = merged
            self._point_s *= 2

    # ---- the result ----------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The measurement as a whole (from the first and the last reading) and its series."""
        with self._lock:
            first, last = self._first, self._last
            intervals = list(self._intervals)
            if self._pending is not None:
                intervals.append(self._pending)
            samples, sampler_cpu = self._samples, self._sampler_cpu
        out: dict[str, Any] = {"period_s": self.period_s, "samples": samples,
                               "cores": len(self.cpus) or usable_cores()}
        if self._error is not None:
            out["error"] = self._error
        if first is None or last is None or last is first:
            out["measured_s"] = 0.0
            return out
        whole = self._interval(first, last)
        span = max(whole.dt, 1e-9)
        other = max(whole.busy - whole.ours - whole.target, 0.0)
        series = series_of(intervals)
        out.update({
            "measured_s": round(whole.dt, 3),
            "other_cores_mean": round(other / span, 3),
            "other_cores_max": max(series["other_cores"], default=None),
            "run_cores_mean": round(whole.ours / span, 3),
            **({"target_cores_mean": round(whole.target / span, 3),
                "target_pids": sorted(self._targets)} if self._targets else {}),
            "steal_cores_mean": round(whole.steal / span, 3),
            "involuntary_switches": int(whole.involuntary),
            "throttled_periods": whole.throttled_periods,
            "throttled_s": None if whole.throttled is None else round(whole.throttled, 4),
            "cgroup": ", ".join(f"v{c.version} {c.path}" for c in self._cgroups) or None,
            "memory_pressure_pct": _pct(whole.memory_some, span),
            "memory_pressure_full_pct": _pct(_delta(first.memory_full, last.memory_full),
                                             span),
            "cpu_pressure_pct": _pct(whole.cpu_some, span),
            "freq_mhz_min": _round(min(series.get("freq_mhz") or [], default=None), 0),
            "freq_mhz_max": _round(max(series.get("freq_mhz") or [], default=None), 0),
            "sampler_cpu_s": round(sampler_cpu, 5),
            "sampler_cpu_pct": round(100 * sampler_cpu / span, 4),
            "series": series,
        })
        return out


def _pct(seconds: float | None, span: float) -> float | None:
    return None if seconds is None else round(100 * seconds / span, 2)


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


#: the series' columns: (name, from an interval); a column whose values are all None is left
#: out (the kernel does not say)
SERIES: tuple[tuple[str, Callable[[Interval], Any]], ...] = (
    ("t_s", lambda i: round(i.t_end, 3)),
    ("other_cores", lambda i: round(max(i.busy - i.ours - i.target, 0.0) / i.dt, 3)
     if i.dt else 0.0),
    ("run_cores", lambda i: round(i.ours / i.dt, 3) if i.dt else 0.0),
    ("target_cores", lambda i: (round(i.target / i.dt, 3) if i.dt else 0.0) or None),
    ("steal_cores", lambda i: round(i.steal / i.dt, 3) if i.dt else 0.0),
    ("preempted_per_s", lambda i: round(i.involuntary / i.dt, 1) if i.dt else 0.0),
    ("throttled_ms", lambda i: None if i.throttled is None else round(i.throttled * 1e3, 2)),
    ("throttled_periods", lambda i: i.throttled_periods),
    ("memory_pressure_pct", lambda i: None if i.memory_some is None or not i.dt
     else round(100 * i.memory_some / i.dt, 2)),
    ("cpu_pressure_pct", lambda i: None if i.cpu_some is None or not i.dt
     else round(100 * i.cpu_some / i.dt, 2)),
    ("freq_mhz", lambda i: None if i.freq_mhz is None else round(i.freq_mhz, 0)),
)


def series_of(intervals: list[Interval]) -> dict[str, list[Any]]:
    """The per-second series (columns of equal length) of these intervals."""
    out: dict[str, list[Any]] = {}
    for name, value in SERIES:
        column = [value(i) for i in intervals]
        if name in ("t_s", "other_cores") or any(v is not None for v in column):
            out[name] = column
    return out


__all__ = ["MAX_SAMPLES", "PERIOD_S", "DisturbanceSampler", "cgroup_cpu_stats",
           "children_of", "involuntary_switches_of", "parse_cpu_stat", "parse_psi"]
