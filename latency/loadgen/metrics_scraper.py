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

Parsed with ``prometheus_client``'s text parser, not by hand. Bounded: each scrape within
``SCRAPE_TIMEOUT_S`` and ``MAX_BODY`` bytes, at most ``MAX_SERIES`` series and ``MAX_SAMPLES``
scrapes; a scrape that fails is counted and the run goes on.
"""
from __future__ import annotations

import http.client
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
MAX_BODY = 16 * 1024 * 1024
MAX_SERIES = 256
#: a day of scrapes at one a second
MAX_SAMPLES = 86_400
PERIOD_S = 1.0


class ScrapeError(ValueError):
    """A scrape that gave no usable metrics (status, size, not Prometheus text)."""


def parse(text: str, dropped: list[int] | None = None) -> dict[str, float]:
    """The kept samples of one ``/metrics`` page, summed over their label sets. Every kept
    family counts or times something, so a value that is not finite or is negative is not
    believed: it is left out (counted in ``dropped[0]`` when given), never printed."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                name = s.name
                if not name.startswith(PREFIXES) or name.endswith(("_bucket", "_created")):
                    continue
                if name not in out and len(out) >= MAX_SERIES:
                    continue
                value = float(s.value)
                if not math.isfinite(value) or value < 0:
                    if dropped is not None:
                        dropped[0] += 1
                    continue
                out[name] = out.get(name, 0.0) + value
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not Prometheus text: {server_text(exc, 120)}") from None
    return out


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


class MetricsScraper:
    """Reads ``url`` every ``period_s`` on a thread of its own from ``start`` to ``stop``,
    sending ``headers`` (the run's key: never kept in the series)."""

    def __init__(self, url: str, period_s: float = PERIOD_S,
                 headers: dict[str, str] | None = None) -> None:
        self.url, self.period_s = url, period_s
        self._headers = dict(headers or {})
        self.t_ns: list[int] = []
        self.values: list[dict[str, float]] = []
        self.failures = 0
        self.last_error: str | None = None
        #: values the server sent that were not believed (not finite, or negative)
        self.dropped = [0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="scrape")

    def start(self) -> MetricsScraper:
        self._thread.start()
        return self

    def scrape(self) -> None:
        try:
            got = parse(fetch(self.url, headers=self._headers), self.dropped)
        except ScrapeError as exc:
            self.failures += 1
            self.last_error = str(exc)
            return
        if len(self.t_ns) < MAX_SAMPLES:
            self.t_ns.append(now_ns())
            self.values.append(got)

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.scrape()
            next_at += self.period_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> dict[str, Any]:
        """Stop, scrape once more (the window's end) and return the series."""
        self._stop.set()
        self._thread.join(timeout=SCRAPE_TIMEOUT_S + 1)
        self.scrape()
        return self.series()

    def series(self) -> dict[str, Any]:
        """``{"url", "t_ns", "values": {name: [value or None per scrape]}, "failures"}``."""
        names = sorted({k for v in self.values for k in v})
        return {"url": self.url, "t_ns": list(self.t_ns),
                "values": {n: [v.get(n) for v in self.values] for n in names},
                "failures": self.failures, "last_error": self.last_error,
                "dropped_values": self.dropped[0]}
