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
    s.stop()
    assert series["failures"] == 1 and len(series["t_ns"]) == 1
    assert window_mean(series, "vllm:request_queue_time_seconds") is None


def test_a_big_page_is_parsed_off_the_measuring_process_and_its_cost_is_said():
    """A page of 40,000 label sets (a 2 MB label bomb): fetched and parsed in the scraper's
    own process — the measuring process, whose loop stamps every token, spends almost none
    of the parse's CPU — and what it cost is measured and said; the bombed metric is left out
    and named, not summed."""
    from latency.analysis.server_metrics import server_metric_line
    from tests.conftest import QuietHandler, loopback_server

    page = ("# TYPE vllm:num_requests_running gauge\n"
            + "".join(f'vllm:num_requests_running{{req="r{i:06d}"}} 1\n' for i in range(40_000))
            + "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 2\n").encode()

    class Bomb(QuietHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    with loopback_server(Bomb, path="/metrics") as url:
        scraper = MetricsScraper(url)
        cpu0 = time.process_time()
        scraper.scrape()
        scraper.scrape()
        here = time.process_time() - cpu0
        series = scraper.stop()
    assert series["failures"] == 0, series["last_error"]
    assert list(series["values"]) == ["vllm:num_requests_waiting"]
    assert series["crowded"] == ["vllm:num_requests_running"]
    assert series["scraper_cpu_s"] > 4 * here, (series["scraper_cpu_s"], here)
    text = server_metric_line(series)
    assert "in the scraper's own process" in text and "label sets (over 64)" in text


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


# two /metrics pages of SGLang and of TGI, a second apart, in the shapes their docs give
# (SGLang's families labelled by model; TGI's histograms in seconds, unlabelled)
SGLANG = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="m"}} {running}
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{model_name="m"}} {waiting}
# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{{le="+Inf",model_name="m"}} {n}
sglang:queue_time_seconds_sum{{model_name="m"}} {queue}
sglang:queue_time_seconds_count{{model_name="m"}} {n}
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {n}
sglang:time_to_first_token_seconds_sum{{model_name="m"}} {ttft}
sglang:time_to_first_token_seconds_count{{model_name="m"}} {n}
"""
TGI = """# TYPE tgi_queue_size gauge
tgi_queue_size {waiting}
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{{le="+Inf"}} {n}
tgi_request_queue_duration_sum {queue}
tgi_request_queue_duration_count {n}
# TYPE tgi_request_mean_time_per_token_duration histogram
tgi_request_mean_time_per_token_duration_bucket{{le="+Inf"}} {n}
tgi_request_mean_time_per_token_duration_sum {tpot}
tgi_request_mean_time_per_token_duration_count {n}
"""
VLLM_PREEMPTIONS = """# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{model_name="m"}} {p}
"""


def test_sglangs_and_tgis_histograms_and_vllms_preemptions_are_read_beside_the_clients():
    from latency.analysis.server_metrics import server_metric_line

    def series(pages: list[dict[str, float]]) -> dict:
        names = sorted({k for p in pages for k in p})
        return {"url": "http://h/metrics", "t_ns": list(range(len(pages))),
                "values": {k: [p.get(k) for p in pages] for k in names}}

    sg = series([parse(SGLANG.format(running=2, waiting=0, n=10, queue=1.0, ttft=2.0)),
                 parse(SGLANG.format(running=6, waiting=3, n=30, queue=3.0, ttft=4.4))])
    line = server_metric_line(sg, 8.5, {"TTFT": 118.0, "queue time": 97.0})
    # 20 requests in the window: queue (3.0 − 1.0)/20 s, TTFT (4.4 − 2.0)/20 s
    assert "queue time mean 100.0 ms over 20 requests (the split's: 97.0 ms)" in line, line
    assert "TTFT mean 120.0 ms over 20 requests (the client's: 118.0 ms)" in line, line
    assert "running mean 4.00, peak 6.00" in line and "waiting mean 1.50" in line
    tgi = series([parse(TGI.format(waiting=1, n=4, queue=0.2, tpot=0.08)),
                  parse(TGI.format(waiting=5, n=14, queue=1.2, tpot=0.33))])
    line = server_metric_line(tgi, None, {"TPOT": 24.0})
    assert "queue time mean 100.0 ms over 10 requests" in line, line
    assert "TPOT mean 25.0 ms over 10 requests (the client's: 24.0 ms)" in line, line
    pre = series([parse(VLLM_PREEMPTIONS.format(p=3)), parse(VLLM_PREEMPTIONS.format(p=10))])
    assert "preemptions +7" in server_metric_line(pre)


def test_a_metrics_page_behind_the_key_is_read_with_it():
    from tests.conftest import QuietHandler, loopback_server

    page = VLLM_PREEMPTIONS.format(p=1).encode()

    class Guarded(QuietHandler):
        def do_GET(self) -> None:
            ok = self.headers.get("Authorization") == "Bearer k"
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(page) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(page)

    with loopback_server(Guarded, path="/metrics") as url:
        with pytest.raises(ScrapeError, match="HTTP 401"):
            fetch(url)
        scraper = MetricsScraper(url, period_s=0.05, headers={"Authorization": "Bearer k"})
        scraper.start()
        time.sleep(0.2)
        got = scraper.stop()
    assert got["failures"] == 0 and got["values"]["vllm:num_preemptions_total"][0] == 1.0
    assert "Bearer" not in repr(got)  # the key is sent, never kept


def test_values_that_are_not_finite_or_negative_are_left_out_and_counted():
    """A server's page with NaN, +Inf and negative figures: none is believed or printed."""
    page = ("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running NaN\n"
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting +Inf\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc -1e21\n"
            "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total 3\n")
    dropped = [0]
    assert parse(page, dropped) == {"vllm:num_preemptions_total": 3.0}
    assert dropped == [3]
