"""A generation's figures and the simulator's load curves, checked against the figures that
say the same thing: each bar's total is the summary's percentile, the waterfall's spans and
ticks are the stored stamps, a curve passes through its headline's point, the highest rate
meeting the targets is a point of the goodput curve with the next faster one missing them.
The server is parametric (its costs set, no spread), so one request alone has a known answer."""
import numpy as np
import pytest

from latency.analysis.gen_view import SERIES_POINTS, gen_view, view_of
from latency.core.gen_records import GAP_COMPONENTS, TTFT_COMPONENTS, token_gaps
from latency.figures import gen_plots
from latency.simulation.gen_capacity import best_rate, gen_sweep, point_of
from latency.simulation.gen_parametric import ParametricCosts, parametric_setup

COSTS = ParametricCosts(prefill_ms=1.0, prefill_ms_per_token=0.05, step_ms=4.0,
                        step_ms_per_seq=0.5, max_context=4096)


def setup(rate=8.0, requests=300, **scheduler):
    scheduler.setdefault("slo_ttft_ms", 100.0)
    scheduler.setdefault("slo_tpot_ms", 10.0)
    return parametric_setup(COSTS, prompt_tokens="uniform:16:900", output_tokens="uniform:8:48",
                            rate=rate, requests=requests, **scheduler)


@pytest.fixture(scope="module")
def simulated():
    result = setup().run()
    return result, view_of(result)


def bar_totals(fig):
    cats = list(fig.data[0].x)
    return {cat: sum(float(t.y[i]) for t in fig.data) for i, cat in enumerate(cats)}


def test_the_bars_totals_are_the_summarys_percentiles(simulated):
    result, view = simulated
    s = result.summary
    for figure, parts, stats in ((gen_plots.ttft_bars_figure, TTFT_COMPONENTS, s.ttft_ms),
                                 (gen_plots.gap_bars_figure, GAP_COMPONENTS, s.itl_ms)):
        fig = figure(view)
        assert {t.name for t in fig.data} == {gen_plots.part_label(c) for c in parts}
        totals = bar_totals(fig)
        for bar, key in (("mean", "mean"), ("p50", "p50"), ("p90", "p90"),
                         ("p99 (tail)", "p99")):
            assert totals[bar] == pytest.approx(stats.get(key), rel=1e-9), (figure, bar)


def test_every_part_of_a_chart_has_its_own_colour():
    for parts in (TTFT_COMPONENTS, GAP_COMPONENTS):
        colours = [gen_plots.GEN_COLOURS[c] for c in parts]
        assert len(set(colours)) == len(parts), parts


def test_the_histograms_count_every_request_and_gap(simulated):
    result, view = simulated
    assert view.ttft_counts.sum() == result.summary.successful
    gaps, _ = token_gaps(result.tokens)
    assert view.itl_counts.sum() == len(gaps)
    fig = gen_plots.ttft_histogram_figure(view, 100.0)
    assert any("TTFT target 100 ms" in a.text for a in fig.layout.annotations)
    assert view.ttft_within == pytest.approx(
        np.mean((result.rows["t_first_deliv"] - result.rows["t_intended"]) / 1e6 <= 100.0))


def test_the_waterfall_draws_the_stored_stamps(simulated):
    result, view = simulated
    rows, tokens = result.rows, result.tokens
    drawn = view.waterfall
    # of the last 40 sent, those in flight when the last 12 arrived, in the order sent
    last = np.argsort(rows["t_received"], kind="stable")[-40:]
    window = rows["t_received"][last[-12:]].min()
    expected = [int(i) for i in last if rows["t_done"][i] >= window]
    assert [r.request for r in drawn] == expected and 12 <= len(drawn) <= 40
    origin = rows["t_received"][[r.request for r in drawn]].min()
    for r in drawn:
        row = rows[r.request]
        ms = lambda stamp, row=row: (int(row[stamp]) - origin) / 1e6  # noqa: E731
        assert r.queue == (ms("t_received"), ms("t_admitted"))
        assert r.prefill == (ms("t_admitted"), ms("t_first"))
        assert r.decode == (ms("t_first_deliv"), ms("t_done"))
        mine = tokens[tokens["request"] == r.request]
        assert len(r.tokens_ms) == row["output_tokens"] == len(mine)
        assert np.allclose(r.tokens_ms, (mine["t_delivered"] - origin) / 1e6)
        # each stall as long as its gap's stall part: together the row's recorded stall
        assert sum(b - a for a, b in r.stalls) == pytest.approx(row["stall_ns"] / 1e6)
        assert all(r.decode[0] <= a <= b <= r.decode[1] for a, b in r.stalls)
    fig = gen_plots.waterfall_figure(drawn)
    queue, prefill, decode = fig.data[:3]
    assert list(prefill.base) == [r.prefill[0] for r in drawn]
    assert list(np.add(prefill.base, prefill.x)) == pytest.approx([r.prefill[1] for r in drawn])
    assert len(fig.data[3].x) == sum(len(r.tokens_ms) for r in drawn)


def test_chunked_prefill_under_a_small_step_budget_shortens_the_stalls_drawn():
    def longest_stall(**scheduler):
        view = view_of(setup(rate=12.0, **scheduler).run(), waterfall_requests=400)
        return max((b - a for r in view.waterfall for a, b in r.stalls), default=0.0)

    whole = longest_stall()
    chunked = longest_stall(chunked_prefill=64, max_step_tokens=72)
    # a whole prompt of up to 900 tokens stalls everyone for its prefill (up to 46 ms); a step
    # of at most 72 tokens, for at most its 64-token chunk (4.2 ms) a step
    assert whole > 30 and chunked < whole / 2, (whole, chunked)


def test_one_request_alone_takes_its_set_costs():
    result = parametric_setup(COSTS, prompt_tokens="200", output_tokens="5", rate=0.1,
                              arrival="constant", requests=3).run()
    view = view_of(result)
    assert view.ttft_makeup_ms["p50"]["prefill"] == pytest.approx(1.0 + 0.05 * 200)
    assert result.summary.itl_ms.p50 == pytest.approx(4.0 + 0.5 * 1)
    assert result.summary.tpot_ms.p99 == pytest.approx(4.5)


def test_the_scheduler_series_are_bounded_and_within_the_slots(simulated):
    result, view = simulated
    s = view.scheduler
    assert 0 < len(s["t_s"]) <= SERIES_POINTS
    assert max(s["running"]) <= result.config.max_running
    assert s["preemptions"] == sorted(s["preemptions"])
    assert sum(view.tokens_per_s["tokens_per_s"]) == len(result.tokens)
    fig = gen_plots.scheduler_figure(view)
    assert [t.name for t in fig.data][:2] == ["running", "waiting"]


@pytest.fixture(scope="module")
def curves():
    s = setup(requests=300)
    curve = gen_sweep(s)
    answer, with_bisection = best_rate(s, curve, 0.9)
    return s, curve, answer, with_bisection


def test_the_curve_passes_through_the_headline(curves):
    s, curve, _, _ = curves
    headline = s.run()
    point = point_of(8.0, headline.summary)
    marked = curve.with_point(point)
    fig = gen_plots.gen_rate_figure(marked, 100.0, 10.0)
    line = next(t for t in fig.data if t.name == "TTFT p99")
    mark = next(t for t in fig.data if t.name == "your setting")
    i = list(line.x).index(mark.x[0])
    assert line.y[i] == mark.y[1] == headline.summary.ttft_ms.p99
    assert list(line.x) == sorted(line.x)


def test_goodput_never_exceeds_throughput_and_the_best_rate_lies_on_its_curve(curves):
    _, curve, answer, c = curves
    for p in c.points:
        assert p.goodput_rps <= p.throughput_rps + 1e-9
        assert p.throughput_rps <= p.rate * 1.05  # served no more than offered (its drain)
    assert answer.rate is not None and not answer.beyond
    assert answer.point.met_share >= 0.9
    rates = [p.rate for p in c.points]
    i = rates.index(answer.rate)
    assert c.points[i + 1].met_share < 0.9  # the next faster rate simulated misses them
    assert c.points[i + 1].rate - answer.rate < 0.1 * answer.rate  # bisected close
    fig = gen_plots.goodput_figure(c, answer)
    goodput = next(t for t in fig.data if t.name.startswith("goodput"))
    star = next(t for t in fig.data if t.name.startswith("highest rate"))
    assert goodput.y[list(goodput.x).index(star.x[0])] == star.y[0]


def test_an_empty_view_draws_figures_that_say_so():
    from latency.core.gen_records import GEN_DTYPE, STEP_DTYPE, TOKEN_DTYPE

    view = gen_view(np.zeros(0, GEN_DTYPE), np.zeros(0, TOKEN_DTYPE), np.zeros(0, STEP_DTYPE))
    for fig in (gen_plots.ttft_bars_figure(view), gen_plots.waterfall_figure(view.waterfall),
                gen_plots.scheduler_figure(view), gen_plots.ttft_histogram_figure(view)):
        assert fig.layout.annotations[0].text == "no data yet"


def test_the_itl_histograms_share_within_the_target_is_a_share_of_gaps(simulated):
    """The TPOT target drawn over every gap: its share counts gaps, not requests, and says so
    (a request meets TPOT on its mean gap, so the two shares differ)."""
    _, view = simulated
    texts = [a.text for a in gen_plots.itl_histogram_figure(view, 10.0).layout.annotations]
    assert any("TPOT target 10 ms" in t and "of the gaps within" in t for t in texts), texts
    texts = [a.text for a in gen_plots.ttft_histogram_figure(view, 100.0).layout.annotations]
    assert any("of the requests within" in t for t in texts), texts


def test_every_poisson_point_sits_at_the_rate_asked():
    """The sweep reuses the same random draws at every rate (common random numbers); scaled
    to the rate asked, no point sits ~10 % off it with all the others (the headline said
    "your 8/s offered 7.10/s")."""
    for rate in (2.0, 8.0, 30.0):
        for seed in (0, 1):
            s = setup(rate=rate, requests=200, seed=seed).run().summary
            assert s.offered_rps == pytest.approx(rate, rel=1e-6), (rate, seed, s.offered_rps)
