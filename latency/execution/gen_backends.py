"""Who serves a generation run, and how its requests reach it: the generation server in this
process (``--transport in-process``), our OpenAI-compatible server in a process of its own
reached by the streaming client (``--transport http``), or a server of yours (``--target``).

Both have one face (``GenBackend``), so the engine and the GenDriver do not know which they
drive: ``start`` gives the driver its ``submit``; each request comes back through its
``on_token``/``on_done`` (in process: the driver's receiver thread stamps ``delivered``; over
HTTP: the client stamps each token as it parses its event, then calls ``on_done`` with every
stamp filled in); ``abandon`` drops what has not started once an open loop's grace is over;
``close`` ends it and hands over the scheduler's steps (over HTTP: fetched from the server
process, placed on this clock, ``serve.gen_steps``).

Why a process of its own for the HTTP server: as for one-shot runs (``ServerProcess``), the
client's threads would otherwise share the server's GIL, and each side's work would be
charged to the other's time.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.gen_records import GenRequest
from latency.core.timing import now_ns
from latency.execution.http_backend import http_get, retried_note
from latency.execution.openai_probe import TargetInfo, api_key, auth_headers
from latency.execution.remote_tokenizer import RemoteTokenCounter
from latency.loadgen.delivery_jitter import DeliveryJitter
from latency.loadgen.metrics_scraper import MetricsScraper, metrics_url
from latency.loadgen.sse_client import SseTransport
from latency.pipelines.generative import GenerativePipeline
from latency.pipelines.token_counter import TokenCounter
from latency.serve.builder import build_gen_server
from latency.serve.gen_server import GenServer, StepCallback
from latency.serve.gen_steps import STEPS_KEPT, placed
from latency.serve.http_server import ServerProcess

Submit = Callable[[GenRequest], None]
#: the most connections the streaming client opens (our server holds up to 2,048)
MAX_CONNECTIONS = 2048
#: the shortest silence that fails a stream (a tenth of --request-timeout, at least this)
MIN_IDLE_S = 5.0


def stream_limits(c: RunConfig) -> dict[str, Any]:
    """The streaming client's bounds for a run: connections for its clients (or its open
    loop's backlog), each stream's time (--request-timeout) and its longest silence."""
    return {"connections": min(MAX_CONNECTIONS, max(c.concurrency or 1,
                                                    c.backlog_limit() or 1)),
            "timeout_s": c.request_timeout_s,
            "idle_s": max(c.request_timeout_s / 10, MIN_IDLE_S)}


class GenBackend(Protocol):
    def start(self, timings: Timings, env: dict[str, Any]) -> Submit: ...

    def abandon(self) -> None: ...

    def close(self) -> list[str]: ...


class InProcessGen:
    """The generation server in this process (the pipeline built here is the one served)."""

    def __init__(self, config: RunConfig, pipeline: GenerativePipeline,
                 on_step: StepCallback) -> None:
        self.config, self.pipeline, self.on_step = config, pipeline, on_step
        self.server: GenServer | None = None

    def start(self, timings: Timings, env: dict[str, Any]) -> Submit:
        self.server = build_gen_server(self.config, self.on_step, self.pipeline).server
        return self.server.submit

    def abandon(self) -> None:
        if self.server is not None:
            self.server.abandon()

    def close(self) -> list[str]:
        if self.server is not None:
            self.server.stop()
        return []


class HttpGen:
    """Our OpenAI-compatible server in its own process on 127.0.0.1, and the streaming
    client (``loadgen.sse_client``)."""

    def __init__(self, config: RunConfig, on_step: StepCallback) -> None:
        self.config, self.on_step = config, on_step
        self.server: ServerProcess | None = None
        self.transport: SseTransport | None = None

    def start(self, timings: Timings, env: dict[str, Any]) -> Submit:
        c = self.config
        t = time.perf_counter()
        self.server = ServerProcess(c, c.max_body_mb).start()
        timings.server_start_s = time.perf_counter() - t
        timings.update(self.server.ready.get("timings") or {})  # measured in the server
        self.transport = SseTransport(f"{self.server.url}/v1/completions", c.model,
                                      ignore_eos=not c.stop_on_eos, **stream_limits(c))
        return self.transport.submit

    def abandon(self) -> None:
        if self.transport is not None:
            self.transport.abandon()

    def close(self) -> list[str]:
        warnings: list[str] = []
        if self.transport is not None:
            self.transport.close()
            unusable = self.transport.unusable
            if unusable:
                why = ", ".join(f"{n} {reason}" for reason, n in sorted(unusable.items()))
                warnings.append(f"{sum(unusable.values())} streamed request(s) came without a "
                                f"usable server account ({why}): each kept whole, its time "
                                "to first token as network and its gaps as delivery")
            warnings += retried_note(self.transport.retried)
        if self.server is not None:
            warnings += self._steps()
            self.server.stop()
        return warnings

    def _steps(self) -> list[str]:
        """The server's scheduler steps, onto this process's clock (``gen_steps.placed``)."""
        assert self.server is not None
        asked = now_ns()
        status, body = http_get(f"{self.server.url}/latency_lab/steps", timeout_s=30)
        got = now_ns()
        if status != 200:
            return [f"the server's scheduler steps could not be read (HTTP {status}): the "
                    "summary has no scheduler figures"]
        try:
            rows = placed(body, asked, got)
        except ValueError as exc:
            return [f"the server's scheduler steps could not be read: {exc}"]
        for row in rows.tolist():
            self.on_step(row)
        if len(rows) >= STEPS_KEPT:
            return [f"the server kept its last {STEPS_KEPT:,} scheduler steps only"]
        return []


#: the scrapes of a server's /metrics a live view is sent (the last ten minutes at one a second)
LIVE_SCRAPES = 600


class TargetGen:
    """A server of yours (``--target``, probed: ``openai_probe.TargetInfo``), reached by the
    streaming client with a trace id a request, its key and, when it takes them, forced
    output lengths; its ``/metrics`` scraped during the run with ``--scrape-metrics``."""

    def __init__(self, config: RunConfig, target: TargetInfo,
                 counter: TokenCounter | RemoteTokenCounter | None = None) -> None:
        self.config, self.target, self.counter = config, target, counter
        self.transport: SseTransport | None = None
        self.scraper: MetricsScraper | None = None
        self.jitter: DeliveryJitter | None = None
        #: the server's metrics over the run (``metrics_scraper`` series), once closed
        self.metrics: dict[str, Any] | None = None
        self.env: dict[str, Any] = {}

    def start(self, timings: Timings, env: dict[str, Any]) -> Submit:
        c, t, counter = self.config, self.target, self.counter
        ignore_eos = (not c.stop_on_eos) if t.forces_length else None
        self.transport = SseTransport(
            t.url, t.model, chat=t.api == "chat", ignore_eos=ignore_eos,
            min_tokens=t.forces_length, headers=auth_headers(api_key(c.api_key_env)),
            counter=counter, trace=True, needs_done=t.sends_done, chunk_usage=t.chunk_usage,
            **stream_limits(c))
        env["target"] = t.describe()
        if counter is not None:
            env["target"]["tokenizer"] = counter.source
            env["target"]["tokenizer_per_chunk"] = not isinstance(counter, RemoteTokenCounter) \
                or counter.shape != "vllm"
        self.env = env
        self.jitter = DeliveryJitter(t.base, auth_headers(api_key(c.api_key_env))).start()
        if c.scrape_metrics:
            self.scraper = MetricsScraper(metrics_url(t.base),
                                          headers=auth_headers(api_key(c.api_key_env))).start()
        return self.transport.submit

    def abandon(self) -> None:
        if self.transport is not None:
            self.transport.abandon()

    def live(self) -> dict[str, Any]:
        """What a live view of the run needs beside its rows: the server's description (the
        round-trip floor its split takes) and its /metrics so far (the last ``LIVE_SCRAPES``
        scrapes: a live chart, not the record — the whole series is the result's)."""
        out: dict[str, Any] = {"target": dict(self.env.get("target") or {})}
        if self.scraper is not None:
            series = self.scraper.series()
            keep = slice(-LIVE_SCRAPES, None)
            out["server_metrics"] = {**series, "t_ns": series["t_ns"][keep],
                                     "values": {k: v[keep]
                                                for k, v in series["values"].items()}}
        return out

    def _resolution(self) -> dict[str, Any]:
        """What the client can resolve of a server's report (``server_split``): a stamp
        waits for the client's loop (its wake-ups' p99 over the run) and a delivery varies
        (small round trips to the server during the run, ``loadgen.delivery_jitter``; the
        probe's before it where none was timed) — each in ms, and their sum."""
        assert self.transport is not None
        lag = self.transport.stamp_lag_ns() / 1e6
        figures = self.jitter.stop() if self.jitter is not None else {}
        delivery = figures.get("delivery_jitter_ms") or self.target.rtt_spread_ns / 1e6
        return {**figures, "stamp_lag_p99_ms": lag, "delivery_jitter_ms": delivery,
                "resolution_ms": lag + delivery}

    def close(self) -> list[str]:
        warnings: list[str] = []
        if self.scraper is not None:
            self.metrics = self.scraper.stop()
            if self.metrics.get("dropped_values"):
                warnings.append(f"{self.metrics['dropped_values']} value(s) of the server's "
                                "/metrics were not finite or were negative: left out, not "
                                "believed")
            if self.metrics.get("failures"):
                warnings.append(f"{self.metrics['failures']} scrape(s) of the server's "
                                f"/metrics failed (last: {self.metrics.get('last_error')})")
        if self.transport is not None:
            self.transport.close()
            bad = self.transport.bad_reports
            warnings += retried_note(self.transport.retried)
            if "target" in self.env:
                self.env["target"].update(self._resolution())
                self.env["target"]["unusable_reports"] = self.transport.bad_report_total
                self.env["target"]["retried_requests"] = self.transport.retried
            if self.transport.bad_report_total:
                why = "; ".join(f"{n} × {reason}" for reason, n in bad.most_common(3))
                warnings.append(f"{self.transport.bad_report_total} request(s) came with a "
                                f"report of the server's that could not be used (e.g. {why}): "
                                "left out of the split")
        if self.transport is not None and self.transport.uncounted:
            n = sum(self.transport.uncounted.values())
            why = self.transport.uncounted.most_common(1)[0][0]
            warnings.append(f"the server's tokenizer could not count {n} repl(ies) (e.g. "
                            f"{why}): their gaps are per chunk")
        if not self.target.rtt_floor_ns:
            warnings.append("no round-trip floor to the server (its GET /models did not "
                            "answer 200): where the split takes the network as that floor "
                            "(llama.cpp's report), the network is counted in the queue")
        if not self.target.sends_done:
            warnings.append("the server ends its streams without [DONE]: a stream counted "
                            "whole once a choice carried its finish_reason and the reply "
                            "ended (one cut short before it is an error)")
        if not self.target.forces_length and not self.config.stop_on_eos:
            warnings.append("the server refused ignore_eos/min_tokens: output lengths could "
                            "not be forced, so a request may end early at its end-of-sequence "
                            "token (each request's own count is kept)")
        elif self.transport is not None and not self.config.stop_on_eos:
            warnings += _unforced(self.transport.finishes)
        if self.transport is not None and "target" in self.env:
            self.env["target"]["finish_reasons"] = dict(self.transport.finishes)
        return warnings


def _unforced(finishes: Counter[str]) -> list[str]:
    """The warning for replies that ended on their own though the server took ignore_eos and
    min_tokens (it accepted the fields and did not honour them): their lengths were not
    forced. A forced reply ends at its length ("length"), or names no reason."""
    early = {r: n for r, n in finishes.items() if r not in ("length", "none")}
    if not early:
        return []
    total = sum(finishes.values())
    why = ", ".join(f"{n} × {r!r}" for r, n in sorted(early.items(), key=lambda x: -x[1])[:3])
    return [f"{sum(early.values())} of {total} replies ended before their asked length "
            f"({why}) though the server took ignore_eos/min_tokens: it does not honour them, "
            "so those lengths were not forced (each request's own count is kept)"]


def gen_backend(config: RunConfig, pipeline: GenerativePipeline,
                on_step: StepCallback) -> GenBackend:
    """The backend ``config.transport`` asks for (over HTTP the server process builds its own
    pipeline from the config: validated, it names no object of the caller's)."""
    if config.transport == "http":
        return HttpGen(config, on_step)
    return InProcessGen(config, pipeline, on_step)
