"""Gamma arrivals (``--arrival gamma --burstiness B``): the mean rate is the rate asked for,
and the gaps' spread is the shape's (coefficient of variation 1/√B), as vLLM's benchmark
draws them; bad shapes are one line."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from latency.loadgen.generator import arrival_offsets_ns
from tests.cli_support import cli_here


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_keep_the_rate_and_have_the_shape_s_spread(burstiness):
    rng = np.random.default_rng(7)
    offsets = np.array(list(itertools.islice(
        arrival_offsets_ns(100.0, "gamma", rng, burstiness=burstiness), 40_000)))
    gaps = np.diff(offsets) / 1e9
    assert gaps.mean() == pytest.approx(0.01, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)


@pytest.mark.parametrize("flags, says", [
    (["--rate", "10", "--arrival", "gamma", "--burstiness", "0"], "--burstiness must be"),
    (["--rate", "10", "--burstiness", "2"], "--arrival gamma"),
])
def test_bad_burstiness_is_one_line(flags, says):
    out = cli_here("run", "--model", "synthetic", "--requests", "5", "--no-save", *flags)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


def test_a_gamma_run_is_measured_and_accounted_for():
    from latency.core.config import RunConfig
    from latency.execution.engine import execute

    result = execute(RunConfig(model="synthetic", rate=200.0, arrival="gamma",
                               burstiness=0.5, requests=100, warmup=0,
                               model_args={"forward_ms": 1.0, "preprocess_ms": 0.2,
                                           "postprocess_ms": 0.1}), force=True)
    assert result.status == "completed"
    assert result.summary.requests + result.summary.dropped == 100


@pytest.mark.parametrize("arrival", [[], ["--arrival", "gamma", "--burstiness", "0.5"]])
def test_an_open_loop_run_through_the_run_process_is_checked_twice_alike(arrival):
    """The CLI's config is checked, sent to the run process and checked again: an open loop
    must pass both (a closed loop's default of one client must not be set on it)."""
    out = cli_here("run", "--model", "synthetic", "--rate", "100", "--requests", "40",
                   "--warmup", "2", "--no-save", "--quiet", *arrival)
    assert out.returncode == 0, out.stderr
    assert "open 100 req/s" in out.stdout
