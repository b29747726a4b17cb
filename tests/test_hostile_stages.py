"""A user's stage that raises anything (``sys.exit``, ``KeyboardInterrupt``) or returns the
wrong thing fails its own request or batch, with the reason, and the run goes on: no request is
left unanswered, no worker thread dies, the run never hangs.

The command line runs in this process (``latency.cli.main``: the same code as ``python -m
latency``, without a fresh interpreter's imports per case); the user's code runs in the run's
own process either way."""
import json
from pathlib import Path

import pytest

from latency.cli.main import main

PIPELINES = Path(__file__).with_name("hostile_pipelines.py")


@pytest.mark.parametrize("name,says", [
    ("PreExit", "preprocess: SystemExit"), ("PreKBI", "preprocess: KeyboardInterrupt"),
    ("FwdExit", "forward: SystemExit"), ("PostExit", "postprocess: SystemExit"),
    ("PostKBI", "postprocess: KeyboardInterrupt"), ("SplitNone", "split returned NoneType"),
    ("FwdShort", "gave 1 output(s)"),
])
def test_a_stage_that_exits_or_returns_the_wrong_thing_fails_alone(name, says, tmp_path,
                                                                  capsys):
    out = tmp_path / "r.json"
    code = main(["run", "--pipeline", f"{PIPELINES}:{name}", "--concurrency", "4",
                 "--requests", "40", "--warmup", "0", "--batch-size", "4",
                 "--max-batch-delay-ms", "5", "--no-save", "--quiet", "--json", str(out)])
    assert code == 1, capsys.readouterr().err  # INVALID: every request failed
    d = json.loads(out.read_text())
    s = d["summary"]
    # FwdShort's one row is right for a batch of one: a request that happened to be batched
    # alone is answered; every request of a larger batch fails
    cols = d["requests"]["columns"]
    expected = (sum(1 for b in cols["batch_size"] if b > 1) if name == "FwdShort" else 40)
    assert d["status"] == "completed" and s["requests"] == 40 and s["errors"] == expected
    assert expected > 0
    assert any(says in m for m in s["error_messages"]), s["error_messages"]


@pytest.mark.parametrize("name", ["InitExit", "factory_exit"])
def test_a_constructor_that_exits_fails_the_run_with_exit_1(name, tmp_path, capsys):
    """A CI gate must not read a pass: sys.exit(0) in __init__ (or a factory) was exit 0 with
    nothing printed or saved."""
    out = tmp_path / "r.json"
    code = main(["run", "--pipeline", f"{PIPELINES}:{name}", "--requests", "5", "--warmup",
                 "0", "--no-save", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 1, (printed.out, printed.err)
    assert "building the pipeline failed: SystemExit" in printed.out
    assert json.loads(out.read_text())["status"] == "failed"
