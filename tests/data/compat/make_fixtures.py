"""Writes the compatibility fixtures: a run history, a run JSON and a requests CSV written by
the code *before* the package was reorganised (commit 18890bb), so the tests can check that
today's code still reads them and writes byte-identical summaries, JSON and CSV.

It uses that commit's module paths on purpose; it does not run on later code. To remake:
    git worktree add /tmp/old 18890bb && cd /tmp/old && python tests/data/compat/make_fixtures.py OUT
"""
import sys
from pathlib import Path

from latency.core.config import RunConfig
from latency.run.engine import execute
from latency.storage.store import RunStore

out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
out.mkdir(parents=True, exist_ok=True)
store = RunStore(out / "history_v2.sqlite")
closed = execute(RunConfig(model="synthetic", concurrency=2, requests=400, warmup=10,
                           batch_size=2, max_batch_delay_ms=1.0,
                           model_args={"preprocess_ms": 0.3, "postprocess_ms": 0.2, "forward_ms": 0.5, "error_rate": 0.05, "seed": 3}))
opened = execute(RunConfig(model="synthetic", rate=200.0, requests=150, warmup=5,
                           transport="http", net_rtt_ms=2.0,
                           model_args={"preprocess_ms": 0.3, "postprocess_ms": 0.2, "forward_ms": 0.5}))
for name, result in (("closed", closed), ("open_http", opened)):
    store.save(result, name=f"compat {name}", source="cli")
    (out / f"run_{name}.json").write_text(result.json_text(requests=True))
    (out / f"run_{name}.csv").write_bytes(result.csv_bytes())
    print(name, result.status, result.summary["requests"], result.summary["errors"])
