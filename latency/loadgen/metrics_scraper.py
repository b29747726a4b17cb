"""The server's own metrics beside the client's (``--scrape-metrics``): its Prometheus
``/metrics`` read every second while the run measures, kept as time series with the run.

What is kept: the samples of the LLM servers' metric families — vLLM's ``vllm:*`` (requests
running and waiting, KV-cache use, preemptions, the request-time histograms), SGLang's
``sglang:*``, llama.cpp's ``llamacpp:*``, TGI's ``tgi_*`` and our own server's
``latency_lab_gen_*`` — each summed over its label sets (a server with several models or
engines gives one line), histograms as their ``_sum`` and ``_count`` (their buckets are left:
a mean over a window needs only the two). A histogram's window mean is the change of its sum
over the change of its count between two scrapes (``analysis.server_metrics.window_mean``):
the server's own mean of, say, its queue time over exactly the requests it finished in that
window, to set beside what the client measured.

Parsed with ``prometheus_client``'s text parser, not by hand — in a process of its own
(``ScrapeWorker``), never in the measuring process, whose event loop stamps every token: a parser
busy with a big page there would show up as gaps between tokens that no server made. What
that process used is measured and said (``scraper_cpu_s``). Bounded: each scrape within
``SCRAPE_TIMEOUT_S`` and ``MAX_BODY`` bytes, at most ``MAX_SERIES`` series of at most
``MAX_LABEL_SETS`` label sets each (a family with more is left out and named: a sum over so
many says nothing), at most ``MAX_SAMPLES`` scrapes, and the next scrape waits at least twice
as long as the last one took; a scrape that fails is counted and the run goes on.
"""
from __future__ import annotations

import http.client
import json
import math
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from latency.core.fmt import server_text
from latency.core.timing import now_ns
from latency.loadgen.bounded_http import bounded, connection

#: the metric families kept (prefixes of their sample names)
PREFIXES = ("vllm:", "sglang:", "llamacpp:", "tgi_", "latency_lab_gen_")
SCRAPE_TIMEOUT_S = 5.0
#: vLLM's page is ~0.1 MB; parsing takes ~0.6 s of CPU a MiB
MAX_BODY = 4 * 1024 * 1024
MAX_SERIES = 256
#: label sets one metric may have and still be summed (models × engines, not requests)
MAX_LABEL_SETS = 64
#: the longest line the scraper's process reads or writes (a page's kept series as JSON)
ANSWER_LIMIT = 1 << 20
#: a day of scrapes at one a second
MAX_SAMPLES = 86_400
PERIOD_S = 1.0


class ScrapeError(ValueError):
    """A scrape that gave no usable metrics (status, size, not Prometheus text)."""


def parse(text: str, dropped: list[int] | None = None,
          crowded: set[str] | None = None) -> dict[str, float]:
    """The kept samples of one ``/metrics`` page, summed over their label sets. Every kept
    family counts or times something, so a value that is not finite or is negative is not
    believed: it is left out (counted in ``dropped[0]`` when given), never printed. A metric
    of more than ``MAX_LABEL_SETS`` label sets is left out too (named in ``crowded``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    sets: dict[str, int] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                name = s.name
                if not name.startswith(PREFIXES) or name.endswith(("_bucket", "_created")):
                    continue
                if name not in out and len(out) >= MAX_SERIES:
                    continue
                sets[name] = sets.get(name, 0) + 1
                value = float(s.value)
                if not math.isfinite(value) or value < 0:
                    if dropped is not None:
                        dropped[0] += 1
                    continue
                out[name] = out.get(name, 0.0) + value
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not Prometheus text: {server_text(exc, 120)}") from None
    for name in [n for n, k in sets.items() if k > MAX_LABEL_SETS]:
        out.pop(name, None)
        if crowded is not None and len(crowded) < 8:
            crowded.add(server_text(name, 80))
    return out


def scrape_once(url: str, headers: dict[str, str]
                ) -> tuple[int, dict[str, float], int, set[str]]:
    """One scrape, fetched and parsed (in the scraper's process): when the page was read (the
    monotonic clock is the machine's, not the process's: the run's own stamps compare with
    it), the kept samples, how many values were not believed, the metrics left out for their
    label sets."""
    dropped, crowded = [0], set[str]()
    text = fetch(url, headers=headers)
    read_ns = now_ns()
    return read_ns, parse(text, dropped, crowded), dropped[0], crowded


def fetch(url: str, timeout_s: float = SCRAPE_TIMEOUT_S,
          headers: dict[str, str] | None = None) -> str:
    """GET ``url`` (the whole exchange bounded in time, the body in size) with ``headers``
    besides Accept (a server behind a key guards its /metrics with it too); ScrapeError
    unless 200 with a body."""
    parts = urlsplit(url)
    conn = connection(url, timeout_s)
    try:
        with bounded(conn, timeout_s, "the scrape"):  # the whole exchange, not each read
            conn.request("GET", parts.path or "/metrics",
                         headers={"Accept": "text/plain", **(headers or {})})
            resp = conn.getresponse()
            body = resp.read(MAX_BODY + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise ScrapeError(f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    if resp.status != 200:
        raise ScrapeError(f"HTTP {resp.status}")
    if len(body) > MAX_BODY:
        raise ScrapeError(f"larger than {MAX_BODY // 2**20} MiB")
    return body.decode("utf-8", "replace")


def metrics_url(base: str) -> str:
    """The ``/metrics`` of the server at ``base`` (a ``/v1`` base URL's origin)."""
    parts = urlsplit(base)
    return f"{parts.scheme}://{parts.netloc}/metrics"


class ScrapeWorker:
    """The scraper's process: a Python of its own that fetches and parses one page for each
    line it is sent (``serve_scrapes``) and answers with one line of JSON.

    A ``subprocess``, not a ``multiprocessing`` child: the run process that scrapes is itself
    a daemonic ``multiprocessing`` child, and those may not have any. It ends when its stdin
    closes (this process gone) or when it is killed; one that outlasts a scrape is killed and
    the next scrape starts another."""

    def __init__(self) -> None:
        import queue
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-c",
             "from latency.loadgen.metrics_scraper import serve_scrapes; serve_scrapes()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1)
        self._answers: queue.Queue[str] = queue.Queue(maxsize=1)
        threading.Thread(target=self._read, daemon=True, name="scrape-answers").start()

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        for line in iter(lambda: stdout.readline(ANSWER_LIMIT), ""):
            self._answers.put(line)

    def ask(self, url: str, headers: dict[str, str], timeout_s: float
            ) -> tuple[int, dict[str, float], int, set[str]]:
        """One scrape (``scrape_once``'s answer); ScrapeError when it failed or was late."""
        import queue

        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps([url, headers]) + "\n")
            self.proc.stdin.flush()
            answer = json.loads(self._answers.get(timeout=timeout_s))
        except queue.Empty:
            raise ScrapeError("the scrape outlasted its time") from None
        except (OSError, ValueError):
            raise ScrapeError("the scraper's process ended") from None
        if "error" in answer:
            raise ScrapeError(str(answer["error"]))
        return (int(answer["t_ns"]), {str(k): float(v) for k, v in answer["values"].items()},
                int(answer["dropped"]), set(answer["crowded"]))

    def cpu_s(self) -> float:
        """The CPU it has used (user + system, s)."""
        import psutil

        try:
            times = psutil.Process(self.proc.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return times.user + times.system

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def serve_scrapes() -> None:
    """The scraper's process: a line ``[url, headers]`` in, a line of JSON out, until stdin
    closes."""
    import sys

    for line in iter(lambda: sys.stdin.readline(ANSWER_LIMIT), ""):
        try:
            url, headers = json.loads(line)
            read_ns, values, dropped, crowded = scrape_once(url, headers)
            answer: dict[str, Any] = {"t_ns": read_ns, "values": values, "dropped": dropped,
                                      "crowded": sorted(crowded)}
        except Exception as exc:  # noqa: BLE001 - every failure is an answer
            answer = {"error": str(exc) if isinstance(exc, ScrapeError)
                      else f"{type(exc).__name__}: {server_text(exc, 200)}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


class MetricsScraper:
    """Reads ``url`` every ``period_s`` (or twice as long as the last scrape took, if more)
    from ``start`` to ``stop``: a thread here waits, a process of its own fetches and parses.
    Sends ``headers`` (the run's key: never kept in the series)."""

    def __init__(self, url: str, period_s: float = PERIOD_S,
                 headers: dict[str, str] | None = None) -> None:
        self.url, self.period_s = url, period_s
        self._headers = dict(headers or {})
        self.t_ns: list[int] = []
        self.values: list[dict[str, float]] = []
        self.failures = 0
        self.last_error: str | None = None
        #: values the server sent that were not believed (not finite, or negative)
        self.dropped = 0
        #: metrics left out for their label sets (the first 8)
        self.crowded: set[str] = set()
        self.cpu_s = 0.0
        self._took_s = 0.0
        self._worker: ScrapeWorker | None = None
        self._spent_cpu_s = 0.0  # of workers closed before the end
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="scrape")

    def start(self) -> MetricsScraper:
        """Start the scraper's process and take the first scrape (the window's start) before
        returning — a process spawns in a second or two, which must not fall inside the
        window — then scrape every period in a thread."""
        self.scrape()
        self._thread.start()
        return self

    def scrape(self) -> None:
        if self._worker is None:
            self._worker = ScrapeWorker()
        t = time.monotonic()
        try:
            read_ns, got, dropped, crowded = self._worker.ask(
                self.url, self._headers, SCRAPE_TIMEOUT_S + 2 * MAX_BODY / 2**20 + 30)
        except ScrapeError as exc:
            self.failures += 1
            self.last_error = str(exc)
            if self._worker.proc.poll() is None and "outlasted" in str(exc):
                self._spent_cpu_s += self._worker.cpu_s()
                self._worker.close()  # stuck: the next scrape starts another
                self._worker = None
            return
        finally:
            self._took_s = time.monotonic() - t
        self.dropped += dropped
        self.crowded |= set(sorted(crowded)[:8 - len(self.crowded)])
        if len(self.t_ns) < MAX_SAMPLES:
            self.t_ns.append(read_ns)
            self.values.append(got)

    def _loop(self) -> None:
        while not self._stop.wait(max(self.period_s, 2 * self._took_s)):
            self.scrape()

    def stop(self) -> dict[str, Any]:
        """Stop, scrape once more (the window's end), end the scraper's process (its CPU
        kept) and return the series."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=SCRAPE_TIMEOUT_S + 1)
        if self._worker is not None:
            self.scrape()
        if self._worker is not None:
            self.cpu_s = self._spent_cpu_s + self._worker.cpu_s()
            self._worker.close()
            self._worker = None
        return self.series()

    def series(self) -> dict[str, Any]:
        """``{"url", "t_ns", "values": {name: [value or None per scrape]}, "failures", …}``."""
        names = sorted({k for v in self.values for k in v})
        return {"url": self.url, "t_ns": list(self.t_ns),
                "values": {n: [v.get(n) for v in self.values] for n in names},
                "failures": self.failures, "last_error": self.last_error,
                "dropped_values": self.dropped, "crowded": sorted(self.crowded),
                "label_set_limit": MAX_LABEL_SETS,
                "scraper_cpu_s": round(self.cpu_s, 3)}
