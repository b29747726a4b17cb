"""Percentiles, the p99 interval, histograms and series against numpy and the binomial formula."""
import numpy as np
import pytest
from scipy.stats import binom

from latency.analysis.stats import (
    HIST_EDGES_MS,
    describe_ms,
    histogram_ms,
    per_second_series,
    quantile_ci,
    tail_makeup_ms,
)
from latency.core.records import RECORD_DTYPE, Request, RequestLog, component_ns


def test_percentiles_agree_with_numpy():
    rng = np.random.default_rng(0)
    ns = rng.lognormal(15, 0.7, size=5000).astype(np.int64)
    d = describe_ms(ns)
    ms = ns / 1e6
    for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
        assert d.get(key) == pytest.approx(np.percentile(ms, q))
    assert d.mean == pytest.approx(ms.mean()) and d.max == pytest.approx(ms.max())


def test_p99_interval_is_the_binomial_order_statistic_interval():
    rng = np.random.default_rng(1)
    x = np.sort(rng.exponential(1.0, size=2000))
    lo, hi = quantile_ci(x, 0.99)
    n = len(x)
    l_rank = int(binom.ppf(0.025, n, 0.99))
    u_rank = int(binom.ppf(0.975, n, 0.99)) + 1
    assert (lo, hi) == (x[l_rank - 1], x[u_rank - 1])
    # coverage of [X(l), X(u)] is P(l <= B < u) for B ~ Bin(n, q): at least 95%
    assert binom.cdf(u_rank - 1, n, 0.99) - binom.cdf(l_rank - 1, n, 0.99) >= 0.95
    assert lo <= np.percentile(x, 99) <= hi


def test_p99_interval_coverage_by_simulation():
    rng = np.random.default_rng(2)
    true_p99 = -np.log(0.01)  # exponential(1)
    hits = 0
    for _ in range(400):
        lo, hi = quantile_ci(np.sort(rng.exponential(1.0, size=1000)), 0.99)
        hits += lo <= true_p99 <= hi
    assert hits / 400 >= 0.92


def _mm1_totals(rho: float, n: int, seed: int) -> np.ndarray:
    """Response times (ns, in arrival order) of a simulated M/M/1 queue, 10 ms service."""
    from latency.simulation.simulator import ServiceModel, SimConfig, simulate

    rows = simulate(SimConfig(rate=100 * rho, requests=int(n / 0.9), seed=seed),
                    ServiceModel(forward_ms=10.0))
    m = rows[~rows["warmup"]]
    return m["t_done"] - m["t_intended"]


def test_p99_interval_covers_a_queues_true_p99_about_95_percent_of_the_time():
    # M/M/1 response time is exponential with rate mu - lambda: p99 = ln(100) / (mu - lambda)
    rho, runs = 0.5, 200
    true_p99 = np.log(100) / (100 - 100 * rho) * 1000
    hits = order_stat_hits = given = 0
    for seed in range(1, runs + 1):
        totals = _mm1_totals(rho, 20_000, seed)
        ci = describe_ms(totals).p99_ci95
        naive = quantile_ci(np.sort(totals) / 1e6, 0.99)
        order_stat_hits += naive[0] <= true_p99 <= naive[1]
        if ci is not None:
            given += 1
            hits += ci[0] <= true_p99 <= ci[1]
    assert given >= 0.9 * runs
    # ± 3 binomial standard errors around 95 % on ~200 runs
    assert 0.95 - 3 * np.sqrt(0.95 * 0.05 / given) <= hits / given <= 0.995
    # the reason it is needed: the interval that assumes independent requests misses far more
    assert order_stat_hits / runs < 0.8


def test_a_short_run_near_saturation_gets_no_p99_interval_and_says_why():
    from latency.analysis.stats import missing_interval_reason, quantile_spread

    totals = _mm1_totals(0.9, 6000, 7)
    d = describe_ms(totals)
    assert d.p99_ci95 is None
    spread = quantile_spread(totals, d.p99 * 1e6)
    assert spread.n == len(totals) and spread.effective_n < 1000
    assert "clusters" in missing_interval_reason(spread)
    # independent samples of the same size are worth what they are
    iid = np.random.default_rng(3).exponential(1e6, len(totals)).astype(np.int64)
    assert describe_ms(iid).p99_ci95 is not None


def test_too_few_samples_have_no_p99_interval():
    assert quantile_ci(np.arange(100.0), 0.99) is None
    assert describe_ms(np.arange(1, 101, dtype=np.int64) * 1000).p99_ci95 is None


def test_histogram_counts_everything_in_fixed_log_bins():
    values = np.array([0.0001, 0.5, 1.0, 1.2, 50.0, 1e7])
    counts = histogram_ms(values)
    assert counts.sum() == len(values)
    assert len(counts) == len(HIST_EDGES_MS) - 1
    assert np.allclose(np.diff(np.log10(HIST_EDGES_MS)), 1 / 20)


def test_per_second_series_counts_and_percentiles():
    t = np.array([0.1, 0.2, 0.9, 2.5])  # nothing completes in second 2
    total = np.array([1.0, 2.0, 3.0, 10.0])
    s = per_second_series(t, total)
    assert s["throughput_rps"] == [3.0, 0.0, 1.0]
    assert s["p50_ms"][0] == 2.0 and s["p50_ms"][1] is None and s["p99_ms"][2] == 10.0


def test_tail_makeup_shows_what_the_slow_requests_are_made_of():
    n = 1000
    queue = np.where(np.arange(n) >= 980, 50.0, 0.0)  # the slowest 2% waited in the queue
    fwd = np.full(n, 5.0)
    total = queue + fwd
    mk = tail_makeup_ms({"queue": queue, "forward": fwd}, total, 0.99)
    assert mk["queue"] + mk["forward"] == pytest.approx(np.percentile(total, 99))
    assert mk["queue"] > mk["forward"]
    mk50 = tail_makeup_ms({"queue": queue, "forward": fwd}, total, 0.50)
    assert mk50["queue"] == 0 and mk50["forward"] == pytest.approx(5.0)


def test_record_is_small_and_components_telescope():
    # 92 bytes of engine fields + 13 of transport facts (bytes each way, emulated delay, whether
    # the server's time was split) since the HTTP transport
    assert RECORD_DTYPE.itemsize <= 105
    log = RequestLog.with_capacity(1)
    for k in range(40):  # forces growth
        r = Request(b"x", 0, False, None, 1000 + k)
        (r.t_sent, r.t_received, r.t_pre_start, r.t_pre_end, r.t_fwd_start, r.t_fwd_end,
         r.t_post_start, r.t_post_end, r.t_done) = [1000 + k + 7 * j for j in range(1, 10)]
        log.append(r)
    c = component_ns(log.view())
    assert len(log.view()) == 40
    parts = sum(c[k] for k in ("network", "queue", "preprocess", "forward", "postprocess",
                               "overhead"))
    assert np.array_equal(parts, c["total"]) and np.all(c["total"] == 63)


def test_failed_request_keeps_its_failed_stage_and_zero_after():
    r = Request(b"x", 0, False, None, 100)
    r.t_sent, r.t_received, r.t_pre_start, r.t_pre_end = 110, 120, 130, 190
    r.fill_missing_server()
    r.t_done = 200
    log = RequestLog.with_capacity(1)
    log.append(r)
    c = {k: int(v[0]) for k, v in component_ns(log.view()).items()}
    assert c["preprocess"] == 60 and c["forward"] == 0 and c["postprocess"] == 0
    assert c["network"] == 10 + 10 and c["total"] == 100


def test_the_last_partial_second_is_rated_by_its_observed_length():
    t = np.array([0.1, 0.5, 0.9, 1.1, 1.2])  # 3/s in second 0; 2 in the first 0.25 s of 1
    s = per_second_series(t, np.ones(5), end_s=1.25)
    assert s["throughput_rps"] == [3.0, pytest.approx(8.0)]
