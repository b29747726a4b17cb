"""The simulator against the real engine: known answers.

Two checks, both on the synthetic pipeline with exponential 2 ms forward times and Poisson
arrivals, on one run per load (ρ = 0.5 and ρ = 0.8, shared by both checks):

- *replay*: the simulation fed the run's own arrival times and measured forward times must
  reproduce the run's percentiles — this tests the simulated server's mechanics (FIFO queue,
  replica hand-offs) free of sampling luck, so the tolerance is tight (10 %);
- *prediction*: a simulation that knows only the forward-time distribution (its mean and the
  fixed hand-off costs calibrated on this run, ``latency.simulation.calibration``: the service
  the machine delivered, not the nominal 2 ms) must predict the measured p50, p99 and mean.
  Both sides see the same arrival times (common random numbers); the service draws are
  independent, so a run's percentiles scatter around the prediction, and a queue's p99 a lot:
  at ρ = 0.8 a run of 8,000 requests scatters ±14 % (one standard deviation) around it, and
  20,000 requests hardly less (±13 %: the tail is a few long busy periods). So the tolerance is
  that standard error, for a run of this very size: the calibrated model simulates the run 40
  times over its arrivals, and the measurement must lie within 4.5 of their standard
  deviations (of the log) of the prediction — one try, no retry (a retry hides why a run
  missed: a disturbed machine says so in the message).
"""
import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.core.records import component_ns, measured_and_ok
from latency.execution.process import run
from latency.simulation.calibration import calibrated, forward_trace_ms, recorded_arrivals
from latency.simulation.simulator import ServiceModel, SimConfig, simulate
from tests.timing_support import machine_note

pytestmark = pytest.mark.timing

TAU_MS = 2.0
#: ρ → seconds measured (ρ 0.5: 1,500 requests; ρ 0.8: 4,000): the tolerance is the standard
#: error of a run of this size, so a shorter run is as strict a check, only a wider one
LOADS = {0.5: 6.0, 0.8: 10.0}
#: simulated runs of the measured run's size, for the standard error of its percentiles
REPLICATES = 40
#: standard deviations the measurement may lie from the prediction (a correct model misses
#: about once in 10,000 comparisons; a wrong service shape — constant instead of exponential —
#: predicts a mean of 6 ms instead of 10 ms at ρ 0.8, far outside)
K = 4.5


@pytest.fixture(scope="module", params=sorted(LOADS), ids=lambda rho: f"rho{rho}")
def measured(request):
    rho = request.param
    cfg = RunConfig(model="synthetic", model_args={"preprocess_ms": 0.0, "forward_ms": TAU_MS,
                                                   "postprocess_ms": 0.0, "dist": "exponential",
                                                   "seed": 3},
                    rate=rho / TAU_MS * 1000, duration_s=LOADS[rho], warmup=50, seed=3)
    result = run(cfg)
    assert result.status == "completed", result.failure
    return rho, result


def totals_ms(rows: np.ndarray) -> np.ndarray:
    _, ok = measured_and_ok(rows)
    return component_ns(ok)["total"] / 1e6


def figures(rows: np.ndarray) -> np.ndarray:
    """p50, p99 and mean of the total latency (ms)."""
    t = totals_ms(rows)
    return np.array([*np.percentile(t, [50, 99]), t.mean()])


def test_replaying_a_run_reproduces_its_percentiles(measured):
    rho, result = measured
    log = result.log
    times, rate = recorded_arrivals(log)
    svc = calibrated(ServiceModel(forward_ms=TAU_MS, dist="exponential"), log)
    svc.forward_trace_ms = forward_trace_ms(log)
    rows = simulate(SimConfig(rate=rate, arrival="recorded", arrival_times_ms=times,
                              requests=len(times), warmup_fraction=0.0), svc)
    (m50, m99, _), (s50, s99, _) = figures(log), figures(rows)
    note = machine_note(result)
    assert abs(m50 / s50 - 1) < 0.10, (rho, m50, s50, note)
    assert abs(m99 / s99 - 1) < 0.10, (rho, m99, s99, note)


def test_prediction_matches_the_engine_within_the_runs_standard_error(measured):
    rho, result = measured
    log = result.log
    times, rate = recorded_arrivals(log)
    svc = calibrated(ServiceModel(forward_ms=TAU_MS, dist="exponential"), log)
    runs = [simulate(SimConfig(rate=rate, arrival="recorded", arrival_times_ms=times,
                               requests=len(times), warmup_fraction=0.0, seed=100 + i), svc)
            for i in range(REPLICATES)]
    each = np.log([figures(rows) for rows in runs])  # REPLICATES × (p50, p99, mean)
    predicted = np.log(figures(np.concatenate(runs)))
    sd = each.std(axis=0, ddof=1)
    got = np.log(figures(log))
    misses = [f"{name}: measured {np.exp(g):.2f} ms, predicted {np.exp(p):.2f} ms "
              f"(±{100 * s:.0f} % a run of {len(times):,} requests; allowed {K} of those)"
              for name, g, p, s in zip(("p50", "p99", "mean"), got, predicted, sd)
              if abs(g - p) > K * s]
    assert not misses, (f"ρ {rho}, calibrated service {svc.forward_ms:.3f} ms + fixed "
                        f"{svc.network_ms + svc.lag_ms + svc.turnaround_ms:.3f} ms: "
                        + "; ".join(misses) + "; " + machine_note(result))
