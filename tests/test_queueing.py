"""Closed forms against textbook values, and against each other where they must agree."""
import math

import pytest

from latency.simulation import queueing as q


def test_mm1_textbook():
    p = q.mm1(rate=0.8, service_mean=1.0)  # λ = 0.8, μ = 1
    assert (p.utilisation, p.wait_mean, p.response_mean) == pytest.approx((0.8, 4.0, 5.0))
    assert q.mm1_response_percentile(0.8, 1.0, 0.99) == pytest.approx(math.log(100) / 0.2)


def test_erlang_c_textbook_values():
    assert q.erlang_c(3, 2.0) == pytest.approx(4 / 9)  # 2 erlangs on 3 servers
    assert q.erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = ρ
    assert q.erlang_b(2, 1.0) == pytest.approx(0.2)  # B(2, 1) = (1/2)/(1 + 1 + 1/2)


def test_erlang_recursion_is_stable_for_many_servers():
    c = q.erlang_c(500, 480.0)
    assert 0 < c < 1 and math.isfinite(c)


def test_mmc_reduces_to_mm1_and_its_percentiles_are_consistent():
    a, b = q.mmc(0.6, 1.0, 1), q.mm1(0.6, 1.0)
    assert a.wait_mean == pytest.approx(b.wait_mean)
    assert q.mmc_response_percentile(0.6, 1.0, 1, 0.9) == pytest.approx(
        q.mm1_response_percentile(0.6, 1.0, 0.9), rel=1e-6)
    p = q.mmc(2.0, 1.0, 3)
    assert p.wait_mean == pytest.approx((4 / 9) / (3 - 2))
    # P(Wq > t90) = 0.1 by construction
    t90 = q.mmc_wait_percentile(2.0, 1.0, 3, 0.9)
    assert (4 / 9) * math.exp(-(3 - 2) * t90) == pytest.approx(0.1)
    assert q.mmc_wait_percentile(2.0, 1.0, 3, 0.5) == 0.0  # over half never wait


def test_md1_and_friends():
    md1 = q.md1(0.4, 2.0)  # ρ = 0.8
    assert md1.wait_mean == pytest.approx(0.8 * 2.0 / (2 * 0.2))
    assert q.mg1(0.4, 2.0, 1.0).wait_mean == pytest.approx(q.mm1(0.4, 2.0).wait_mean)
    assert q.kingman(0.4, 2.0, 1.0, 0.0).wait_mean == pytest.approx(md1.wait_mean)
    assert q.allen_cunneen(0.4, 2.0, 1, 1.0, 1.0).wait_mean == pytest.approx(
        q.mm1(0.4, 2.0).wait_mean)


@pytest.mark.parametrize("call", [
    lambda: q.mm1(1.0, 1.0), lambda: q.mmc(3.0, 1.0, 3), lambda: q.md1(0.6, 2.0),
    lambda: q.erlang_c(2, 2.5),
])
def test_unstable_queues_are_refused(call):
    with pytest.raises(q.UnstableQueue):
        call()


def test_the_mm1_rate_for_a_percentile_target_inverts_the_percentile():
    """The Workshop's capacity lesson asks the inverse question (what rate meets p99 ≤ SLO)
    of the same owner of the M/M/1 formulas."""
    from latency.simulation import queueing

    for service, target in ((5.0, 40.0), (2.0, 100.0)):
        rate = queueing.mm1_max_rate_for_percentile(service, target, 0.99)
        assert queueing.mm1_response_percentile(rate, service, 0.99) == pytest.approx(target)
    assert queueing.mm1_max_rate_for_percentile(10.0, 20.0, 0.99) <= 0  # service too slow
