"""One rule set for generation advice: a lever is named only where the run's own facts
support it — more slots only when requests waited for one, more KV only when the budget ran
out and preempted, shorter steps when nobody waited for a slot but for the step running —
and never a lever beside its opposite.

Runs built to need each lever are simulated on an emulated server whose costs are exact
(tests/test_gen_simulator.py's ``EXACT``; no model runs), so the facts are the scheduler's,
not the machine's."""
from __future__ import annotations

from tests.test_gen_simulator import simulate


def _verdict(r) -> str:
    return str(r.verdict)


def _no_opposites(v: str) -> None:
    assert not ("raise --max-running" in v and "lower --max-running" in v), v
    assert not ("raise --kv-tokens" in v and "lower --kv-tokens" in v), v


def test_requests_that_waited_for_a_slot_are_told_more_slots():
    r = simulate([64] * 40, [64] * 40, clients=8, max_running=2)
    assert r.summary.scheduler["max_waiting"] > 0 and not r.summary.preemptions
    v = _verdict(r)
    assert "queue" in v and "raise --max-running" in v, v
    _no_opposites(v)


def test_a_full_kv_budget_is_told_more_kv_not_more_slots():
    r = simulate([300] * 24, [200] * 24, clients=8, max_running=8, kv_tokens=1600)
    assert r.summary.preemptions > 0 and r.summary.scheduler["max_waiting"] > 0
    v = _verdict(r)
    assert "raise --max-running" not in v, v
    if "queue" in v:
        assert "raise --kv-tokens" in v, v
    _no_opposites(v)


def test_a_wait_for_the_running_step_with_no_one_waiting_is_told_shorter_steps():
    """Slots to spare, long prompts prefilled whole: a request that comes while another's
    prefill runs waits for that step — no request ever waits for a slot."""
    r = simulate([2000, 16] * 20, [4, 4] * 20, rate=40, max_running=64,
                 max_step_tokens=4096)
    assert r.summary.scheduler["max_waiting"] == 0
    v = _verdict(r)
    assert "raise --max-running" not in v, v
    if "queue" in v.split(";")[0]:
        assert "step already running" in v and "--chunked-prefill" in v, v


def test_a_lone_request_needs_no_lever_of_load():
    r = simulate([64] * 5, [16] * 5, clients=1, max_running=8)
    v = _verdict(r)
    for lever in ("--max-running", "--kv-tokens", "lower the load"):
        assert lever not in v, v
