"""Files written before the package was reorganised and the summary typed (commit 18890bb:
``tests/data/compat/make_fixtures.py``) still load, and today's code writes the same shapes.

- the history database of that code opens, lists and loads its runs;
- each stored summary survives ``Summary.from_dict → to_dict`` key for key, value for value;
- summarising the stored rows again gives the same numbers as that code did (the text of a
  verdict or warning may be worded differently; every number and key is the same, but for the
  p99 intervals: they are computed differently since, honest about queueing — batch means, not
  the binomial formula — and a stored interval still loads as stored);
- a run JSON of that code reloads, and its result writes JSON and CSV whose keys, columns and
  numbers are those of the file (keys added since — the run's validity, a summary's
  warning_kinds — come after them).
"""
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from latency.analysis.result import RunResult
from latency.analysis.summary import Summary
from latency.analysis.timings import Timings
from latency.core.config import RunConfig
from latency.core.records import rows_from_table
from latency.storage.run_files import load_run
from latency.storage.store import RunStore

DATA = Path(__file__).parent / "data" / "compat"
TEXT_KEYS = {"verdict", "warnings"}
#: recomputed by a new method since (the p99 interval under queueing); same key
RECOMPUTED_KEYS = {"p99_ci95"}
#: summary keys added since, after the old ones (older versions read summaries by key and
#: ignore these): each warning's kind, aligned with the warnings, which stay plain text
ADDED_KEYS = {"warning_kinds"}


@pytest.fixture()
def old_store(tmp_path):
    db = tmp_path / "history.sqlite"
    shutil.copy(DATA / "history_v2.sqlite", db)  # a copy: opening may checkpoint the WAL
    return RunStore(db)


def _numbers_equal(a, b, path=""):
    """Same keys and same numbers, recursively; strings compared only outside TEXT_KEYS. ``b``
    may have keys of ADDED_KEYS after ``a``'s (a file written today, ``a`` an old one's)."""
    if isinstance(a, dict):
        added = [k for k in b if k not in a] if isinstance(b, dict) else []
        assert isinstance(b, dict) and list(b) == list(a) + added and set(added) <= ADDED_KEYS, \
            f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            if k not in TEXT_KEYS | RECOMPUTED_KEYS:
                _numbers_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _numbers_equal(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_the_old_history_lists_and_loads(old_store):
    runs = old_store.list()
    assert sorted(r.name for r in runs) == ["compat closed", "compat open_http"]
    assert old_store.integrity_check() == "ok"
    for info in runs:
        run = old_store.load(info.id)
        assert run.result is not None and len(run.result.log) == run.info.n + (
            run.summary.warmup_requests)
        assert run.summary.requests == info.n and run.summary.latency_ms.p99 == info.p99_ms


def test_stored_summaries_round_trip_and_recompute_to_the_same_numbers(old_store):
    import sqlite3

    with sqlite3.connect(old_store.path) as conn:
        stored = dict(conn.execute("SELECT name, summary FROM runs"))
    for info in old_store.list():
        raw = json.loads(stored[info.name])
        assert Summary.from_dict(raw).to_dict() == raw  # byte for byte, text included
        result = old_store.load(info.id).result
        again = RunResult(config=result.config, environment=result.environment,
                          status=result.status, log=result.log, errors=result.errors,
                          timings=result.timings, warnings=result.warnings)
        _numbers_equal(raw, again.summary.to_dict())


@pytest.mark.parametrize("name", ["closed", "open_http"])
def test_an_old_run_json_and_csv_are_written_again_alike(name):
    old = json.loads((DATA / f"run_{name}.json").read_text())
    rows, config = load_run(str(DATA / f"run_{name}.json"))
    loaded = config.to_dict()
    assert not set(old["config"]) - set(loaded), "a key of the old config was lost"
    for key, value in old["config"].items():  # the whole old config, key by key
        assert loaded[key] == value, f"config.{key}: {loaded[key]!r} != {value!r}"
    assert {k: loaded[k] for k in set(loaded) - set(old["config"])} == {
        k: v for k, v in RunConfig().to_dict().items() if k not in old["config"]}  # added since
    errors = {int(k): v for k, v in old["requests"]["errors"].items()}
    result = RunResult(config=config, environment=old["environment"], status=old["status"],
                       log=rows, errors=errors, timings=Timings.from_dict(old["timings"]))
    new = json.loads(result.json_text(requests=True))
    # every key of the old file, in its order; keys added since (validity) come after
    assert [k for k in new if k in old] == list(old)
    assert set(new) - set(old) <= {"validity"}
    # the config written again: the old one whole, in its order, then the fields added since
    assert [k for k in new["config"] if k in old["config"]] == list(old["config"])
    assert {k: new["config"][k] for k in old["config"]} == old["config"]
    assert new["config"] == json.loads(json.dumps(loaded))
    _numbers_equal(old["summary"], new["summary"], "summary")
    assert new["series"] == old["series"] and new["requests"] == old["requests"]
    assert rows_from_table(new["requests"]).tobytes() == rows.tobytes()
    old_csv = pd.read_csv(DATA / f"run_{name}.csv")
    new_csv = pd.read_csv(io.BytesIO(result.csv_bytes()))
    assert list(new_csv.columns) == list(old_csv.columns)
    pd.testing.assert_frame_equal(new_csv, old_csv)


def test_a_version_4_history_keeps_both_kinds_in_one_table(tmp_path):
    """``history_v4.sqlite`` was written by the code of schema 4, where generations had a
    table of their own (``run --model synthetic --requests 40 --name "v4 one-shot"``, then
    ``run --model synthetic-lm --prompt-tokens 16 --output-tokens 8 --requests 12
    --concurrency 2 --name "v4 generation"``). Opened today, both are runs of one history:
    ``latest`` is the generation, ``latest~1`` the one-shot run, both load whole."""
    import sqlite3

    db = tmp_path / "history.sqlite"
    shutil.copy(DATA / "history_v4.sqlite", db)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT id, n, ttft_p99_ms FROM generations").fetchone()
    store = RunStore(db)
    runs = store.list()
    assert [(r.name, r.kind) for r in runs] == [("v4 generation", "generation"),
                                                ("v4 one-shot", "one-shot")]
    assert store.resolve("latest") == before[0] and store.integrity_check() == "ok"
    gen = store.load("latest")
    assert gen.info.id == before[0] and gen.info.p99_ms == before[2] and gen.info.valid
    assert gen.result.summary.requests == before[1] == 12
    assert gen.result.summary.ttft_ms.p99 == pytest.approx(before[2])  # derived again
    assert len(gen.result.tokens) >= 12 * 8 and len(gen.result.steps) > 0
    one_shot = store.load("latest~1")
    assert one_shot.info.kind == "one-shot" and one_shot.summary.requests == 40
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "generations" not in tables and conn.execute(
            "PRAGMA user_version").fetchone()[0] == 5
    # rename, delete and export reach the moved generation by its id, as before
    assert store.rename(before[0][:4], "renamed").name == "renamed"
    store.delete(before[0])
    assert [r.kind for r in store.list()] == ["one-shot"]
