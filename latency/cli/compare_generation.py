"""``python -m latency compare`` of generation runs (history ids ``g…`` or ``run --json``
files).

The runs, every setting that differs, an unequal machine, the table of
TTFT, TPOT, ITL, E2E, throughput, goodput and the parts of E2E, and the gate
(``--fail-if-p99-worse``: TTFT, TPOT and ITL p99). A generation and a one-shot run are not
compared: their figures measure different things.
"""
from __future__ import annotations

import argparse
import json

from latency.storage.run_files import load_generation

EXIT_OK, EXIT_REGRESSION = 0, 1


def cmd_compare_generations(a: argparse.Namespace) -> int:
    from latency.analysis.compare import setup_differences
    from latency.analysis.gen_compare import format_gen_diff, gen_gate
    from latency.analysis.gen_text import describe_generation
    from latency.analysis.machine import unequal_disturbance
    from latency.cli.compare_text import compare_letters, setup_and_machine_lines

    results = [load_generation(ref, getattr(a, "db", None)) for ref in a.ids]
    letters = compare_letters(len(results))
    summaries = [r.summary for r in results]
    pct = a.fail_if_p99_worse
    gates = [gen_gate(summaries[0], s, pct, letters[0], x)
             for x, s in zip(letters[1:], summaries[1:])] if pct is not None else []
    diffs = {x: setup_differences(results[0].config, r.config, results[0].environment,
                                  r.environment) for x, r in zip(letters[1:], results[1:])}
    machine = unequal_disturbance({x: [r.environment] for x, r in zip(letters, results)})
    if a.json:
        print(json.dumps({
            "runs": [{"letter": x, "file": ref, "status": r.status,
                      "summary": r.summary.to_dict()} for x, ref, r in
                     zip(letters, a.ids, results)],
            "setup_differences": diffs, "machine_warning": machine,
            "gate": None if pct is None else {
                "max_worse_pct": pct, "passed": all(g.passed for g in gates),
                "results": [{"run": x, "passed": g.passed, "message": g.message}
                            for x, g in zip(letters[1:], gates)]},
        }, indent=2))
    else:
        for x, ref, r in zip(letters, a.ids, results):
            print(f"{x}  {ref} · {r.status} · {r.summary.requests:,} requests · "
                  f"{describe_generation(r.config)}")
        for line in setup_and_machine_lines(diffs, letters, [r.environment for r in results],
                                            machine):
            print(line)
        print()
        targets = all(r.config.target is not None for r in results)
        print(format_gen_diff(letters, summaries, [
            r.target_view.to_dict() if r.target_view is not None else None
            for r in results] if targets else None))
        print("(ms, or the unit the row says; Δ% against A)")
        for g in gates:
            print(g.message)
    return EXIT_OK if all(g.passed for g in gates) else EXIT_REGRESSION
