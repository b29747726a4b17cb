"""A finished run's files to download (CSV of its requests, JSON of its result, the report
to send), built once per run for every viewer who presses the button."""
from __future__ import annotations

import streamlit as st

from ui.server import run_manager


@st.cache_data(max_entries=8, show_spinner=False)
def downloads(run_id: str, version: int) -> tuple[bytes, str, bytes]:
    """CSV of requests, JSON of the result and its HTML report, once per finished run."""
    from latency.figures.report import report_html, run_report

    result = run_manager().get(run_id).result()  # type: ignore[union-attr]
    return (result.csv_bytes(), result.json_text(),
            report_html(run_report(result, repr(result))).encode())


__all__ = ["downloads"]
