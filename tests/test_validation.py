"""The simulator against the real engine: known answers.

Two checks, both on the synthetic pipeline with exponential forward times and Poisson arrivals:

- *replay*: the simulation fed the run's own arrival times and measured forward times must
  reproduce the run's percentiles — this tests the simulated server's mechanics (FIFO queue,
  replica hand-offs) free of sampling luck, so the tolerance is tight;
- *prediction*: a simulation that knows only the forward-time distribution (its mean and the
  fixed hand-off costs calibrated on this machine, see ``latency.simulation.calibration``) must
  predict the
  measured p50 within 10 % and p99 within 20 % at ρ = 0.5 and ρ = 0.8. A queue's p99 converges
  slowly (at ρ = 0.8 a run of 6,000 requests scatters ±22 % around its true p99), so these runs
  are long enough (≥ 10,000 requests) for the tolerance to test the model, not the dice; both
  sides see the same arrival times (common random numbers), the service draws are independent.
"""
import numpy as np
import pytest

from latency.core.config import RunConfig
from latency.core.records import component_ns, measured_and_ok
from latency.execution.process import run
from latency.simulation.calibration import calibrated, forward_trace_ms, recorded_arrivals
from latency.simulation.simulator import ServiceModel, SimConfig, simulate


def measure(tau_ms: float, rho: float, duration_s: float, seed: int = 3):
    cfg = RunConfig(model="synthetic", model_args={"preprocess_ms": 0.0, "forward_ms": tau_ms,
                                                   "postprocess_ms": 0.0, "dist": "exponential",
                                                   "seed": seed},
                    rate=rho / tau_ms * 1000, duration_s=duration_s, warmup=50, seed=seed)
    result = run(cfg)
    assert result.status == "completed", result.failure
    return result.log


def percentiles(rows: np.ndarray) -> np.ndarray:
    _, ok = measured_and_ok(rows)
    return np.percentile(component_ns(ok)["total"] / 1e6, [50, 99])


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_replaying_a_run_reproduces_its_percentiles(rho):
    log = measure(2.0, rho, 6.0)
    times, rate = recorded_arrivals(log)
    trace = forward_trace_ms(log)
    svc = calibrated(ServiceModel(forward_ms=2.0, dist="exponential"), log)
    svc.forward_trace_ms = trace
    rows = simulate(SimConfig(rate=rate, arrival="recorded", arrival_times_ms=times,
                              requests=len(times), warmup_fraction=0.0), svc)
    (m50, m99), (s50, s99) = percentiles(log), percentiles(rows)
    assert abs(m50 / s50 - 1) < 0.10, (m50, s50)
    assert abs(m99 / s99 - 1) < 0.10, (m99, s99)


@pytest.mark.parametrize("rho,tau_ms,duration_s", [(0.5, 1.0, 20.0), (0.8, 2.0, 50.0)])
def test_prediction_matches_the_engine(rho, tau_ms, duration_s):
    # at ρ 0.8, 20,000 requests: the p99's own scatter is ~±10 %. Near saturation the engine's
    # own per-request work must stay a small part of the service time, or a slower moment of
    # the machine pushes the real load towards 1 and the run becomes a different system from
    # the one predicted: hence a 2 ms service (400 req/s), and one retry with a new seed — a
    # wrong model misses both runs, a starved moment rarely lasts two (BENCHMARKS.md, "Load
    # simulator": what shorter services and single runs missed).
    misses = []
    for seed in (3, 4):
        log = measure(tau_ms, rho, duration_s, seed=seed)
        times, rate = recorded_arrivals(log)
        svc = calibrated(ServiceModel(forward_ms=tau_ms, dist="exponential"), log)
        # many independent service realisations over the same arrivals: the prediction's
        # own sampling error becomes small beside the run's
        rows = simulate(SimConfig(rate=rate, arrival="recorded", arrival_times_ms=times,
                                  requests=8 * len(times), warmup_fraction=0.0, seed=11), svc)
        (m50, m99), (p50, p99) = percentiles(log), percentiles(rows)
        if abs(m50 / p50 - 1) < 0.10 and abs(m99 / p99 - 1) < 0.20:
            return
        misses.append(f"seed {seed}: measured p50 {m50:.2f} / p99 {m99:.2f} ms, predicted "
                      f"{p50:.2f} / {p99:.2f} ms")
    pytest.fail("the prediction missed the engine (p50 within 10 %, p99 within 20 %) in both "
                "runs: " + "; ".join(misses))
