"""``python -m latency history`` for generation runs: their listing, and show, rename, delete
and export of one (an id ``g…``)."""
from __future__ import annotations

import argparse
from typing import Any

from latency.analysis.machine import DISTURBED, MACHINE_WORDS
from latency.core import fmt
from latency.core.errors import ConfigError

EXIT_OK = 0


def format_generations(gens: list[Any]) -> str:
    """One line a generation run: TTFT p50/p99, ITL and TPOT p99, output tokens/s."""
    cols = [("generation", 10, "<"), ("name", 20, "<"), ("when", 19, "<"), ("model", 14, "<"),
            ("load", 18, "<"), ("status", 9, "<"), ("validity", 8, "<"),
            ("machine", 9, "<"), ("n", 7, ">"),
            ("TTFT p50", 9, ">"), ("TTFT p99", 9, ">"), ("ITL p99", 8, ">"),
            ("TPOT p99", 9, ">"), ("tok/s", 8, ">"), ("setup", 0, "<")]
    lines = ["  ".join(f"{name:{al}{w}}" for name, w, al in cols)]
    for g in gens:
        name = (g.name or "")[:20]
        validity = {True: "VALID", False: "INVALID", None: "—"}[g.valid]
        vals = [g.id, name, g.when, g.model[:14], g.load[:18], g.status, validity,
                MACHINE_WORDS[g.disturbed], f"{g.n:,}", fmt.ms(g.ttft_p50_ms),
                fmt.ms(g.ttft_p99_ms), fmt.ms(g.itl_p99_ms), fmt.ms(g.tpot_p99_ms),
                f"{g.tokens_per_s:,.0f}" if g.tokens_per_s is not None else "—", g.setup]
        lines.append("  ".join(f"{v:{al}{w}}" for v, (_, w, al) in zip(vals, cols)))
    lines.append("(generations: times in ms; `history show ID` prints one)")
    return "\n".join(line.rstrip() for line in lines)


def cmd_generation_action(a: argparse.Namespace) -> int:
    from latency.core.records import in_process
    from latency.storage.gen_store import GenerationStore
    from latency.storage.gen_trace import gen_trace_bytes
    from latency.storage.outputs import check_output, write_atomic

    store = GenerationStore(getattr(a, "db", None))
    if a.action == "rename":
        info = store.rename(a.id, a.name)
        print(f"renamed {info.id} to {info.name!r}")
        return EXIT_OK
    if a.action == "delete":
        info = store.delete(a.id)
        print(f"deleted {info.id} ({info.model}, {info.when})")
        return EXIT_OK
    info, result = store.load(a.id)
    if a.action == "show":
        if getattr(a, "json", False):
            print(result.json_text(requests=False), end="")
        else:
            print(f"generation {info.id}" + (f" “{info.name}”" if info.name else "")
                  + f", saved {info.when} from the {info.source}"
                  + (f" · {DISTURBED}" if info.disturbed else ""))
            print(repr(result))
        return EXIT_OK
    check_output(a.out, "--out", force=a.force, history=store.path)
    if a.format == "json":
        data: bytes | str = result.json_text()
    elif a.format == "csv":
        data = result.csv_bytes()
    elif a.format == "parquet":
        import io

        buf = io.BytesIO()
        result.tokens_frame().to_parquet(buf, index=False)
        data = buf.getvalue()
    else:
        data = gen_trace_bytes(result.rows, result.tokens, result.steps, result.errors,
                               {"generation": info.id, "model": info.model},
                               in_process(result.config))
    try:
        write_atomic(a.out, data)
    except OSError as exc:
        raise ConfigError(f"cannot write {a.out}: {exc.strerror or exc}") from None
    what = {"csv": "a row a request", "parquet": "a row a token"}.get(a.format, a.format)
    print(f"wrote {a.out} ({what}, {len(data):,} bytes) from generation {info.id}")
    return EXIT_OK
