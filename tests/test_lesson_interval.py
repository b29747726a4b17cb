"""How sure an A/B's end-to-end change is (latency/workshop/interval.py): the interval over its
pairs, on simulated blocks with known answers — a real speed-up it pins down, a null change on
blocks a neighbour slowed it refuses to sign — and the lesson's card saying so."""
from __future__ import annotations

import pytest

from latency.analysis.result import RunResult
from latency.core.config import RunConfig
from latency.simulation.simulator import ServiceModel, SimConfig, simulate
from latency.workshop.interval import MIN_PAIRS, change_interval, pairs_of


def block(pre_ms: float, seed: int, n: int = 150, status: str = "completed") -> RunResult:
    """One block: ``n`` requests at light load (Poisson, 20 req/s) through exponential
    preprocessing of mean ``pre_ms`` and a 2 ms forward pass; its seed names its pair."""
    rows = simulate(SimConfig(rate=20.0, requests=n, seed=seed),
                    ServiceModel(forward_ms=2.0, preprocess_ms=pre_ms, dist="exponential"))
    rows["warmup"][:] = False
    return RunResult(config=RunConfig(model="synthetic", seed=seed), environment={},
                     status=status, log=rows)


def ab_blocks(a_ms: list[float], b_ms: list[float], n: int = 150) -> list[tuple[str, RunResult]]:
    """Pairs A B, B A, … with each block's preprocessing mean given (a neighbour's job shows
    as a whole block slowed)."""
    out: list[tuple[str, RunResult]] = []
    for i, (a, b) in enumerate(zip(a_ms, b_ms)):
        pair = [("A", block(a, 100 + i, n)), ("B", block(b, 100 + i, n))]
        out += pair if i % 2 == 0 else pair[::-1]
    return out


def test_a_real_speed_up_is_signed_and_its_interval_holds_it():
    # B's preprocessing 20 → 10 ms: p50 of 22 ms vs 12 ms of service, about −45 %
    iv = change_interval(ab_blocks([20.0] * 4, [10.0] * 4))
    assert iv is not None and iv.pairs == 4
    assert iv.low <= iv.change <= iv.high < 0 and iv.sign_known
    assert -0.65 < iv.change < -0.3
    assert "B is faster end to end" in iv.text() and "over 4 pairs" in iv.text()


def test_blocks_a_neighbour_slowed_do_not_make_a_sign():
    """No change at all between the arms, but whole blocks slowed two- and threefold (the
    shared machine the lesson ran on): pooled over the requests alone the difference would
    look certain; over the pairs, the interval holds both signs and says so."""
    iv = change_interval(ab_blocks([20.0, 60.0, 20.0, 20.0], [20.0, 20.0, 40.0, 20.0]))
    assert iv is not None and not iv.sign_known and iv.low < 0 < iv.high
    assert "cannot tell whether B is faster or slower" in iv.text()


def test_two_pairs_have_no_interval_and_a_failed_block_drops_its_pair():
    blocks = ab_blocks([20.0] * 4, [10.0] * 4)
    assert MIN_PAIRS == 3 and change_interval(blocks[:4]) is None  # two pairs: too few
    assert change_interval(blocks[:6]).pairs == 3
    failed = RunResult(config=blocks[2][1].config, environment={}, status="failed",
                       log=blocks[2][1].log)
    kept = [*blocks[:2], (blocks[2][0], failed), *blocks[3:]]
    assert len(pairs_of(kept)) == 3 and change_interval(kept).pairs == 3


def test_few_pairs_widen_the_interval_as_a_t_interval_would():
    """The same scatter over three pairs and over six: the interval over three is the wider
    (the bootstrap alone would hardly differ), so a handful of pairs never looks sure."""
    three = change_interval(ab_blocks([20.0, 24.0, 18.0], [18.0, 22.0, 17.0]))
    six = change_interval(ab_blocks([20.0, 24.0, 18.0] * 2, [18.0, 22.0, 17.0] * 2))
    assert three.high - three.low > 1.5 * (six.high - six.low)


def test_the_interval_is_the_same_for_every_viewer():
    blocks = ab_blocks([20.0, 30.0, 20.0], [18.0, 20.0, 25.0])
    assert change_interval(blocks) == change_interval(blocks)


def test_the_lessons_card_says_what_was_measured_not_a_constant():
    """Step 1's measured line names the model's own speed-up and the p50 change from the runs,
    with the interval, and says plainly when it cannot tell the sign."""
    from types import SimpleNamespace

    from latency.workshop.interval import ChangeInterval
    from latency.workshop.practice import measured

    ab = SimpleNamespace(headline=SimpleNamespace(forward_alone_change=-0.673,
                                                  forward_mean_change=-0.2, p50_change=0.067))
    unsure = ChangeInterval(0.5, 0.067, -0.42, 0.53, 4)
    text = measured(ab, unsure)  # type: ignore[arg-type]
    assert text.startswith("the model alone −67%; end-to-end p50 +6.7%")
    assert "−42% to +53%" in text and "cannot tell" in text
    assert "no interval" in measured(ab, None)  # type: ignore[arg-type]
    sure = ChangeInterval(0.5, -0.95, -0.96, -0.94, 2)
    assert "B is faster end to end" in measured(ab, sure)  # type: ignore[arg-type]


def test_the_lesson_is_sized_to_pin_step_1_down_within_its_time():
    """Step 1 has more, longer pairs than step 2 (its change is small); both fit the lesson's
    slot with room to talk (the Workshop's lessons each take a 5-minute slot)."""
    from latency.workshop.practice import practice

    quantise, helping = practice().steps
    assert quantise.plan.pairs >= 4 and quantise.plan.pairs > helping.plan.pairs
    assert quantise.estimated_s + helping.estimated_s < 180
    assert quantise.estimated_s == pytest.approx(8 * (3.0 + 9.0))
