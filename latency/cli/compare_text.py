"""What ``compare`` prints around its table, for one-shot and generation runs alike."""
from __future__ import annotations

from typing import Any


def setup_and_machine_lines(diffs: dict[str, list[str]], letters: list[str],
                            environments: list[dict[str, Any]], machine: str | None
                            ) -> list[str]:
    """What ``compare`` says before its table, for one-shot and generation runs alike: each
    run's setting that differs from A, each disturbed run's mark, an unequal machine."""
    from latency.analysis.machine import disturbed_mark

    lines = [f"setup A → {x}: " + "; ".join(d) for x, d in diffs.items() if d]
    for x, env in zip(letters, environments):
        mark = disturbed_mark(env)
        if mark:
            lines.append(f"{x} {mark}")
    if machine:
        lines.append(f"warning: {machine}")
    return lines
