"""GenResult: what one generation run measured — its request, token and step logs — with its
summary, verdict, validity, text, JSON, CSV (a row a request) and Parquet (a row a token).

A value like ``RunResult``: the summary is derived from the logs on demand, so it cannot
disagree with the stamps it summarises; ``repr`` prints what the CLI prints.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from latency.analysis.findings import Finding, Verdict
from latency.analysis.gen_summary import GenSummary, summarize_generation
from latency.analysis.gen_turns import turn_of
from latency.analysis.gen_verdict import gen_findings, gen_verdict
from latency.analysis.run_model import MeasuredRun
from latency.analysis.server_metrics import measured_window
from latency.analysis.server_split import split_for
from latency.analysis.target_view import TargetView, target_view
from latency.analysis.validity import Validity
from latency.analysis.validity import validity as run_validity
from latency.core.gen_records import (
    GEN_COMPONENTS,
    GEN_DTYPE,
    GEN_STAMPS,
    STATUS_OK,
    STEP_DTYPE,
    TOKEN_DTYPE,
    component_ns,
)
from latency.core.gen_reports import (
    MISSING,
    REPORT_DTYPE,
    SOURCE_NAMES,
    SPLIT,
    SPLIT_PARTS,
    empty_reports,
    trace_id_hex,
)
from latency.core.records import in_process

if TYPE_CHECKING:
    import pandas as pd

#: the result's kind in its JSON (a one-shot run's file has none)
KIND = "generation"


@dataclass(repr=False)
class GenResult(MeasuredRun):
    """A generation run (a ``MeasuredRun``, kind "generation")."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=GEN_DTYPE))
    tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=TOKEN_DTYPE))
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=STEP_DTYPE))
    #: a few requests' generated text (request row → text), to read what was served
    samples: dict[int, str] = field(default_factory=dict)
    #: a row a request (aligned with ``rows``): what a server of yours reported of it and
    #: the trace id sent with it (``gen_reports``); empty for our own scheduler's runs
    reports: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=REPORT_DTYPE))

    kind: ClassVar[str] = KIND

    @property
    def is_target(self) -> bool:
        """A generation from a server of yours (``--target``)."""
        return self.config.target is not None

    @property
    def is_simulated(self) -> bool:
        """A run of the generation simulator (``simulation.gen_simulator``): no model ran."""
        return "simulated" in self.environment

    @cached_property
    def target_view(self) -> TargetView | None:
        """The server split, chunk gaps and token counts of a target run (None otherwise)."""
        if not self.is_target or not len(self.rows):
            return None  # a summary-only result keeps the split it was saved with
        series = self.environment.get("server_metrics")
        t = self.timings
        return target_view(self.rows, self.tokens, self.reports, self.environment,
                           bool(self.config.tokenizer),
                           measured_window(series, t.measure_start_ns, t.measure_end_ns)
                           if series else None)

    @cached_property
    def summary(self) -> GenSummary:
        c = self.config
        t = self.timings
        return summarize_generation(
            self.rows, self.tokens, self.steps, self.errors, t.measure_start_ns,
            t.measure_end_ns, c.objectives,
            offered=t.offered_requests, offered_span_s=t.offered_span_s,
            dropped=t.dropped_overload or 0)

    @cached_property
    def findings(self) -> list[Finding]:
        own = [w if isinstance(w, Finding) else Finding(str(w), "run") for w in self.warnings]
        view = self.target_view
        return own + gen_findings(self.summary, self.config) + (
            view.findings() if view is not None else [])

    @cached_property
    def verdict(self) -> Verdict:
        view = self.target_view
        if view is not None:  # the client's own components are whole: the server's split
            if not self.summary.successful:
                return Verdict("no successful requests: nothing to judge")
            said = view.verdict()
            if said is not None:
                return said
            if not view.split.n:
                return Verdict(f"TTFT p99 {self.summary.ttft_ms.p99 or 0:,.1f} ms, ITL p99 "
                               f"{self.summary.itl_ms.p99 or 0:,.1f} ms; where the server "
                               f"spends them is unknown: {view.unavailable_reason()}")
            return Verdict("no single part leads TTFT's tail at the server: it is spread "
                           "over network, queue and prefill")
        if self.is_target and "verdict" in self.__dict__.get("_stored", {}):
            return Verdict(self.__dict__["_stored"]["verdict"])  # a summary-only file
        return gen_verdict(self.summary, self.config, in_process(self.config))

    @cached_property
    def validity(self) -> Validity:
        """VALID or INVALID by the very checks of a one-shot run (``analysis.validity``):
        finished as planned, warm-up finished, requests succeeded, the error rate within
        ``--max-error-rate``, nothing dropped by overload, every request accounted for; the
        machine quiet (advisory unless ``--require-quiet``)."""
        return run_validity(self.summary, self.config, self.status, self.timings,
                            self.environment, self.failure)

    @cached_property
    def series(self) -> dict[str, list[float]]:
        """Per second of the measurement: output tokens delivered (tokens/s), requests
        finished, their TTFT p99, and the scheduler's mean running and waiting sequences and
        KV tokens in use — the run over time."""
        start = self.timings.measure_start_ns
        if start is None:
            return {}
        end = self.timings.measure_end_ns or start
        n = max(int(np.ceil((end - start) / 1e9)), 1)
        edges = start + np.arange(n + 1, dtype=np.int64) * 1_000_000_000
        measured = ~self.rows["warmup"] & (self.rows["status"] == STATUS_OK)
        ok_rows = np.flatnonzero(measured)
        tok = self.tokens[np.isin(self.tokens["request"], ok_rows)]
        tokens = np.histogram(tok["t_delivered"], edges)[0]
        done = self.rows[measured]
        finished = np.histogram(done["t_done"], edges)[0]
        slot = np.clip((done["t_done"] - start) // 1_000_000_000, 0, n - 1)
        ttft = (done["t_first_deliv"] - done["t_intended"]) / 1e6
        p99 = [float(np.percentile(ttft[slot == i], 99)) if (slot == i).any() else None
               for i in range(n)]
        st = self.steps[(self.steps["t_start"] >= start) & (self.steps["t_start"] < end)]
        which = np.clip((st["t_start"] - start) // 1_000_000_000, 0, n - 1)

        def mean_of(col: str) -> list[float | None]:
            return [float(st[col][which == i].mean()) if (which == i).any() else None
                    for i in range(n)]

        return {"t_s": list(range(1, n + 1)), "output_tokens_per_s": tokens.tolist(),
                "requests_finished": finished.tolist(), "ttft_p99_ms": p99,
                "running": mean_of("running"), "waiting": mean_of("waiting"),
                "kv_used": mean_of("kv_used")}

    def __repr__(self) -> str:
        from latency.analysis.gen_text import format_generation

        return format_generation(self)

    # ---- files ----------------------------------------------------------------------------
    def to_dict(self, requests: bool = False) -> dict[str, Any]:
        d = {"kind": KIND, **self._shared_dict(),
             "warnings": [str(w) for w in self.findings], "verdict": str(self.verdict),
             "validity": self.validity.to_dict(),
             "samples": {str(k): v for k, v in self.samples.items()}}
        if self.traceback:
            d["traceback"] = self.traceback
        view = self.target_view
        if view is not None:
            d["server_split"] = view.to_dict()
        elif "server_split" in self.__dict__.get("_stored", {}):
            d["server_split"] = self.__dict__["_stored"]["server_split"]
        if len(self.reports) and (self.reports["source"].any() or self.reports["trace_hi"].any()):
            d["reports"] = _table(self.reports, None)
        if requests:
            d["requests"] = _table(self.rows, "t_intended")
            d["requests"]["errors"] = {str(k): v for k, v in self.errors.items()}
            d["tokens"] = _table(self.tokens, None, t0=d["requests"]["t0_ns"])
            d["steps"] = _table(self.steps, None, t0=d["requests"]["t0_ns"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenResult:
        rows = _untable(d.get("requests"), GEN_DTYPE)
        errors = (d.get("requests") or {}).get("errors") or {}
        result = cls(**cls._shared_fields(d, errors), rows=rows,
                     tokens=_untable(d.get("tokens"), TOKEN_DTYPE),
                     steps=_untable(d.get("steps"), STEP_DTYPE),
                     samples={int(k): str(v) for k, v in (d.get("samples") or {}).items()},
                     reports=reports_of(d, len(rows)))
        if not len(rows) and isinstance(d.get("summary"), dict):
            result.__dict__["summary"] = GenSummary.from_dict(d["summary"])
            # what cannot be derived again without the requests: kept as it was saved
            result.__dict__["_stored"] = {k: d[k] for k in ("server_split", "verdict")
                                          if k in d}
        return result

    def json_text(self, requests: bool = True) -> str:
        return json.dumps(self.to_dict(requests), indent=1) + "\n"

    def requests_frame(self) -> pd.DataFrame:
        """One row a request (warm-up included and labelled): stamps relative to the start
        of measuring, every component and TTFT/TPOT/E2E, in ms."""
        import pandas as pd

        rows = self.rows
        comps = component_ns(rows)
        t0 = self._start_ns(rows)
        n = rows["output_tokens"].astype(np.int64)
        tpot = np.where(n > 1, (comps["e2e"] - comps["ttft"]) / np.maximum(n - 1, 1) / 1e6,
                        np.nan)
        cols: dict[str, Any] = {
            **self._request_columns(rows),
            "prompt_tokens": rows["prompt_tokens"], "output_tokens": rows["output_tokens"],
            "prefill_chunks": rows["chunks"], "preemptions": rows["preemptions"],
            "replica": rows["replica"],
            "ttft_ms": comps["ttft"] / 1e6, "tpot_ms": tpot, "e2e_ms": comps["e2e"] / 1e6,
            "ttft_sent_ms": (rows["t_first_deliv"] - rows["t_sent"]) / 1e6,
        }
        if self.config.turns > 1:  # chat sessions: each request's turn in its session
            cols["turn"] = turn_of(rows, self.config.turns)
        for c in GEN_COMPONENTS:
            cols[f"{c}_ms"] = comps[c] / 1e6
        for st in GEN_STAMPS:
            cols[f"t_{st}_ms"] = (rows[f"t_{st}"] - t0) / 1e6
        if self.is_target:
            cols.update(_report_columns(self.reports, len(rows)))
            target = self.environment.get("target") or {}
            cols.update(_split_columns(rows, self.reports, target))
        return pd.DataFrame(cols)

    def tokens_frame(self) -> pd.DataFrame:
        """One row a token: its request, index, what produced it, and its stamps (integer
        ns from the start of measuring)."""
        import pandas as pd

        t = self.tokens
        t0 = self._start_ns(self.rows)
        out = {name: t[name] for name in ("request", "index", "kind", "batch")}
        for name in ("t_call_start", "t_produced", "t_detok", "t_delivered"):
            out[f"{name}_ns"] = t[name] - t0
        return pd.DataFrame(out)


def _table(array: np.ndarray, anchor: str | None, t0: int | None = None) -> dict[str, Any]:
    """A JSON-ready columnar table; stamps (``t_*``) relative to ``t0_ns``."""
    if t0 is None:
        t0 = int(array[anchor].min()) if anchor and len(array) else 0
    cols: dict[str, list[Any]] = {}
    for name in array.dtype.names or ():
        col = array[name]
        cols[name] = (col - t0).tolist() if name.startswith("t_") else col.tolist()
    return {"t0_ns": t0, "count": len(array), "columns": cols}


def _untable(table: Any, dtype: np.dtype) -> np.ndarray:
    if not isinstance(table, dict) or "columns" not in table:
        return np.zeros(0, dtype=dtype)
    out = np.zeros(int(table.get("count") or 0), dtype=dtype)
    t0 = int(table.get("t0_ns", 0))
    for name, values in table["columns"].items():
        if name in (dtype.names or ()):
            out[name] = np.asarray(values)
            if name.startswith("t_"):
                out[name] += t0
    return out


def reports_of(d: dict[str, Any], n: int) -> np.ndarray:
    """The report rows of a result's dict, aligned with its ``n`` requests (every part
    missing where it kept none)."""
    table = d.get("reports")
    out = empty_reports(n)
    if not isinstance(table, dict) or int(table.get("count") or 0) != n:
        return out
    got = _untable(table, REPORT_DTYPE)
    for name in (table.get("columns") or {}):  # a column it lacks stays MISSING
        if name in (REPORT_DTYPE.names or ()):
            out[name] = got[name]
    return out


def _report_columns(reports: np.ndarray, n: int) -> dict[str, Any]:
    """The CSV's columns of what the server said: trace id, source, reported parts (ms; empty
    where not said), the server's token counts."""
    if len(reports) != n:
        reports = empty_reports(n)

    def ms(col: str) -> np.ndarray:
        v = reports[col].astype(np.float64)
        return np.where(v == MISSING, np.nan, v / 1e6)

    def count(col: str) -> np.ndarray:
        v = reports[col].astype(np.float64)
        return np.where(v == MISSING, np.nan, v)

    return {"trace_id": [trace_id_hex(h, lo) for h, lo in zip(
                reports["trace_hi"].tolist(), reports["trace_lo"].tolist(), strict=True)],
            "server_report": [SOURCE_NAMES.get(int(v), "?") for v in reports["source"]],
            "server_queue_ms": ms("queue_ns"), "server_prefill_ms": ms("prefill_ns"),
            "server_decode_ms": ms("decode_ns"), "server_inference_ms": ms("inference_ns"),
            "server_prompt_tokens": count("prompt_tokens"),
            "server_output_tokens": count("output_tokens"),
            "server_cached_tokens": count("cached_tokens"),
            # the client's own count of the reply (--tokenizer), beside the server's
            "client_counted_tokens": count("counted_tokens")}


def _split_columns(rows: np.ndarray, reports: np.ndarray, target: dict[str, Any]
                   ) -> dict[str, Any]:
    """The CSV's columns of each request's split (``analysis.server_split``, send-anchored,
    ms; empty for a request without a usable report) and where each part came from, in
    one column: 'network measured, queue derived, prefill reported, …'."""
    n = len(rows)
    if len(reports) != n:
        reports = empty_reports(n)
    sp = split_for(rows, reports, target)
    cols: dict[str, Any] = {}
    for part in SPLIT_PARTS:
        v = np.full(n, np.nan)
        v[sp.rows] = sp.parts[part] / 1e6
        cols[f"split_{part}_ms"] = v
    where = [""] * n
    for i in sp.rows.tolist():
        rule = SPLIT[int(reports["source"][i])]
        where[i] = ", ".join(f"{part} {rule[part]}" for part in SPLIT_PARTS)
    cols["split_provenance"] = where
    return cols
