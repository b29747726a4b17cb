"""The server's Prometheus metrics read while a run measures (latency.loadgen.metrics_scraper):
against an exporter made by ``prometheus_client`` itself (what vLLM, SGLang and our own
server's peers use to expose theirs), with vLLM's metric names, the series follow the server's
gauges and a histogram's window mean is the mean of what it observed in the window."""
from __future__ import annotations

import socket
import time

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from latency.analysis.server_metrics import window_mean  # noqa: E402
from latency.loadgen.metrics_scraper import (  # noqa: E402
    MetricsScraper,
    ScrapeError,
    fetch,
    metrics_url,
    parse,
)


@pytest.fixture
def exporter():
    reg = prometheus_client.CollectorRegistry()
    running = prometheus_client.Gauge("vllm:num_requests_running", "running", ["model_name"],
                                      registry=reg)
    queue = prometheus_client.Histogram("vllm:request_queue_time_seconds", "queue",
                                        ["model_name"], registry=reg)
    other = prometheus_client.Gauge("process_open_fds", "not an LLM metric", registry=reg)
    server, thread = prometheus_client.start_http_server(0, "127.0.0.1", registry=reg)
    try:
        yield f"http://127.0.0.1:{server.server_port}", running, queue, other
    finally:
        server.shutdown()
        thread.join(5)


def test_the_series_follow_the_servers_gauges_and_histograms(exporter):
    url, running, queue, other = exporter
    other.set(99)
    running.labels("a").set(2)
    running.labels("b").set(1)  # two models: one line, summed
    queue.labels("a").observe(5.0)  # before the window: not in its mean
    s = MetricsScraper(f"{url}/metrics", period_s=0.05).start()
    time.sleep(0.2)
    running.labels("a").set(6)
    for v in (0.1, 0.2, 0.3):
        queue.labels("a").observe(v)
    time.sleep(0.2)
    series = s.stop()
    got = series["values"]["vllm:num_requests_running"]
    assert got[0] == 3 and got[-1] == 7
    assert "process_open_fds" not in series["values"]  # only the LLM servers' families
    assert not any(k.endswith("_bucket") for k in series["values"])
    assert len(series["t_ns"]) == len(got) and series["failures"] == 0
    n, mean = window_mean(series, "vllm:request_queue_time_seconds")
    assert n == 3 and mean == pytest.approx(0.2)


def test_a_scrape_that_fails_is_counted_and_the_series_goes_on(exporter):
    url, *_ = exporter
    s = MetricsScraper(f"{url}/metrics")
    s.scrape()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        s.url = f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"
    s.scrape()
    series = s.series()
    assert series["failures"] == 1 and len(series["t_ns"]) == 1
    assert window_mean(series, "vllm:request_queue_time_seconds") is None


def test_what_is_not_prometheus_text_is_refused():
    with pytest.raises(ScrapeError):
        parse("this is { not metrics")
    assert parse("# nothing here\n") == {}
    with pytest.raises(ScrapeError, match="ConnectionRefusedError|Errno"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        fetch(f"http://127.0.0.1:{port}/metrics")


def test_the_metrics_of_a_v1_base_are_at_its_origin():
    assert metrics_url("http://gpu-box:8000/v1") == "http://gpu-box:8000/metrics"
    assert metrics_url("https://h/proxy/v1") == "https://h/metrics"


def test_the_servers_histogram_means_are_set_beside_the_clients():
    from latency.analysis.server_metrics import measured_window, server_metric_line

    series = {"url": "http://h/metrics", "t_ns": [0, 10, 20, 30],
              "values": {"vllm:num_requests_running": [9.0, 2.0, 4.0, 9.0],
                         "vllm:time_to_first_token_seconds_sum": [5.0, 5.0, 5.5, 5.0],
                         "vllm:time_to_first_token_seconds_count": [1.0, 1.0, 11.0, 1.0]}}
    # the scrapes while measuring (10..20) and the last one before it (0)
    window = measured_window(series, 10, 20)
    assert window["t_ns"] == [0, 10, 20]
    line = server_metric_line(window, 3.5, {"TTFT": 48.0})
    assert "running mean 3.00, peak 4.00" in line  # the gauge inside the window only
    assert "TTFT mean 50.0 ms over 10 requests (the client's: 48.0 ms)" in line
    assert "3.50 requests in flight" in line
