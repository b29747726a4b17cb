"""The summary's 'machine while measuring' line: the sampler's share of a core only over a
span that can carry one (a 2 ms measurement with two samples read '54% of a core'), and
counts in the singular when they are one."""
from __future__ import annotations

from latency.analysis.summary_text import machine_line
from latency.analysis.validity import MIN_SAMPLED_S


def _env(measured_s: float, switches: int) -> dict:
    return {"disturbance": {"measured_s": measured_s, "cores": 2, "other_cores_mean": 0.01,
                            "run_cores_mean": 1.0, "steal_cores_mean": 0.0,
                            "involuntary_switches": switches, "samples": 2,
                            "sampler_cpu_s": 0.001, "sampler_cpu_pct": 0.001 / measured_s * 100}}


def test_a_short_measurement_gives_no_share_of_a_core():
    line = machine_line(_env(MIN_SAMPLED_S / 100, 1))
    assert line is not None and "% of a core" not in line and "preempted 1 time;" in line


def test_a_long_one_does():
    line = machine_line(_env(10.0, 3))
    assert line is not None and "(0.01% of a core)" in line and "preempted 3 times" in line
