"""The server's own Prometheus metrics over a run (``--scrape-metrics``; scraped by
``loadgen.metrics_scraper``), read back: its gauges' means and peaks, and its histograms'
means over the run's window, to set beside what the client measured.
"""
from __future__ import annotations

from typing import Any


def window_mean(series: dict[str, Any], histogram: str) -> tuple[float, float] | None:
    """(requests, mean) of histogram ``histogram`` over the series' window: the change of its
    ``_sum`` over the change of its ``_count`` from the first scrape to the last; None when it
    was not scraped twice or counted nothing in between."""
    values = series.get("values", {})
    sums = [v for v in values.get(f"{histogram}_sum", []) if v is not None]
    counts = [v for v in values.get(f"{histogram}_count", []) if v is not None]
    if len(sums) < 2 or len(counts) < 2:
        return None
    n = counts[-1] - counts[0]
    if n <= 0:
        return None
    return n, (sums[-1] - sums[0]) / n


#: the server's gauges worth a line, by their names in each server's metrics
GAUGES = (("vllm:num_requests_running", "running"), ("vllm:num_requests_waiting", "waiting"),
          ("vllm:kv_cache_usage_perc", "KV cache use"),
          ("sglang:num_running_reqs", "running"), ("sglang:num_queue_reqs", "waiting"),
          ("llamacpp:requests_processing", "processing"),
          ("llamacpp:requests_deferred", "deferred"), ("tgi_queue_size", "queued"),
          ("latency_lab_gen_running", "running"), ("latency_lab_gen_waiting", "waiting"))
#: histograms whose window mean is set beside the client's figure (the first of a label's
#: names that the server has: vLLM renamed its per-iteration inter-token histogram
#: ``time_per_output_token_seconds`` to ``inter_token_latency_seconds``, as SGLang did; its
#: per-request TPOT is ``request_time_per_output_token_seconds``; TGI's histograms are in
#: seconds without the suffix in its name, ``_seconds`` added by some exporters)
HISTOGRAMS = (("vllm:request_queue_time_seconds", "queue time"),
              ("vllm:time_to_first_token_seconds", "TTFT"),
              ("vllm:inter_token_latency_seconds", "ITL"),
              ("vllm:time_per_output_token_seconds", "ITL"),
              ("vllm:request_time_per_output_token_seconds", "TPOT"),
              ("sglang:queue_time_seconds", "queue time"),
              ("sglang:time_to_first_token_seconds", "TTFT"),
              ("sglang:inter_token_latency_seconds", "ITL"),
              ("sglang:time_per_output_token_seconds", "ITL"),
              ("tgi_request_queue_duration", "queue time"),
              ("tgi_request_queue_duration_seconds", "queue time"),
              ("tgi_request_mean_time_per_token_duration", "TPOT"),
              ("tgi_request_mean_time_per_token_duration_seconds", "TPOT"))
#: counters whose change over the window is worth a line (a preemption evicts a running
#: sequence's KV cache: it recomputes or swaps, and its stream stalls meanwhile)
COUNTERS = (("vllm:num_preemptions_total", "preemptions"),
            ("sglang:num_retracted_reqs_total", "retracted requests"),
            ("latency_lab_gen_disconnects_total", "disconnects"))


def window_change(series: dict[str, Any], counter: str) -> float | None:
    """How much ``counter`` grew from the first scrape to the last (None: scraped fewer
    than twice)."""
    v = [x for x in (series.get("values") or {}).get(counter, []) if x is not None]
    return v[-1] - v[0] if len(v) >= 2 else None


def measured_window(series: dict[str, Any], start_ns: int | None, end_ns: int | None
                    ) -> dict[str, Any]:
    """The series cut to the scrapes taken while the run measured (warm-up and the ends
    left out), plus the last scrape before it (``pre_window``), so a histogram's change
    covers the window; the gauges are read from the window's own scrapes."""
    t = list(series.get("t_ns") or [])
    if start_ns is None or not t:
        return series
    end = end_ns if end_ns is not None else t[-1]
    keep = [i for i, x in enumerate(t) if start_ns <= x <= end]
    before = [i for i, x in enumerate(t) if x < start_ns]
    if before:
        keep = [before[-1], *keep]
    return {**series, "t_ns": [t[i] for i in keep], "pre_window": bool(before),
            "values": {k: [v[i] for i in keep if i < len(v)]
                       for k, v in (series.get("values") or {}).items()}}


def server_metric_line(series: dict[str, Any], client_in_flight: float | None = None,
                       client_ms: dict[str, float | None] | None = None) -> str:
    """The server's own metrics over the measurement, one line: its gauges' means and peaks
    and its histograms' means (the last scrape less the first), each beside the client's
    figure of the same name (``client_ms``: mean ms by label, e.g. "TTFT"; "queue time": the
    server split's mean queue), its counters' growth (preemptions) and the client's
    mean requests in flight (Little's law: the sum of their times over the span)."""
    values = series.get("values") or {}
    said = []
    skip = 1 if series.get("pre_window") else 0  # a gauge's reading before the window
    for name, label in GAUGES:
        v = [x for x in values.get(name, [])[skip:] if x is not None]
        if v:
            said.append(f"{label} mean {sum(v) / len(v):,.2f}, peak {max(v):,.2f}")
    shown: set[str] = set()
    for name, label in HISTOGRAMS:
        got = window_mean(series, name) if label not in shown else None
        if got is not None:
            shown.add(label)
            count, mean_s = got
            mine = (client_ms or {}).get(label)
            # the queue is not the client's to see: beside it, the split's (the server's
            # per-request account, joined with the client's stamps)
            whose = "the split's" if label == "queue time" else "the client's"
            beside = f" ({whose}: {mine:,.1f} ms)" if mine is not None else ""
            said.append(f"{label} mean {mean_s * 1e3:,.1f} ms over {count:,.0f} requests"
                        f"{beside}")
    for name, label in COUNTERS:
        grew = window_change(series, name)
        if grew is not None:
            said.append(f"{label} +{grew:,.0f}")
    n = len(series.get("t_ns") or [])
    cost = _scraping(series)
    if not said:
        return (f"server metrics: {n} scrape(s) of {series.get('url')} while measuring, none "
                "of the LLM servers' families in them" + cost)
    client = (f" — the client had {client_in_flight:,.2f} requests in flight on average"
              if client_in_flight is not None else "")
    return (f"server metrics ({n} scrapes of {series.get('url')} while measuring): "
            + "; ".join(said) + client + cost)


def _scraping(series: dict[str, Any]) -> str:
    """What scraping cost (the CPU of the scraper's own process, never the measuring one's)
    and what it left out (metrics of too many label sets)."""
    out = ""
    crowded = series.get("crowded") or []
    if crowded:
        out += (f"; left out for their label sets (over {series.get('label_set_limit')}): "
                + ", ".join(str(c) for c in crowded))
    cpu = series.get("scraper_cpu_s")
    if isinstance(cpu, (int, float)) and cpu >= 0.05:
        out += (f"; parsing the pages took {cpu:,.2f} s of CPU in the scraper's own process "
                "(not the client's)")
    return out
