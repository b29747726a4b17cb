"""A report you can send (``run --html``, ``sweep --html``): one self-contained HTML file of a
run or a sweep, its charts drawn offline.

The file is read as a reader's browser would: Debian's Chromium opens it from disk with every
request that is not the file itself refused, and every chart must draw. Its text is the
command's own output (the verdict, the machine line, the validity), and a server's text in it
is escaped, never markup.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_support import cli_here


def _figures(html: str) -> int:
    return len(re.findall(r'<div id="figure-\d+" class="plotly-graph-div"', html))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A one-shot run's report and a generation's, written by ``run --html``."""
    tmp = tmp_path_factory.mktemp("reports")
    db = str(tmp / "h.sqlite")
    out: dict = {}
    for kind, args in (("one-shot", ("--model", "synthetic", "--requests", "40")),
                       ("generation", ("--model", "synthetic-lm", "--requests", "30",
                                       "--concurrency", "3", "--output-tokens", "12",
                                       "--slo-ttft-ms", "200", "--slo-tpot-ms", "20"))):
        path = tmp / f"{kind}.html"
        r = cli_here("run", *args, "--warmup", "2", "--quiet", "--db", db, "--html", str(path))
        assert r.returncode == 0, r.stdout + r.stderr
        out[kind] = (path, r.stdout)
    return out


@pytest.mark.parametrize("kind, charts", [("one-shot", 4), ("generation", 6)])
def test_a_runs_report_holds_its_charts_text_and_settings_and_needs_no_network(reports, kind,
                                                                               charts):
    path, stdout = reports[kind]
    html = path.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert _figures(html) == charts
    # plotly.js is inside, and nothing is fetched from anywhere
    assert "plotly.js" in html[:20000] and len(html) > 3_000_000
    assert not re.search(r"<script[^>]+src=", html) and "<link" not in html
    # the run as the command line printed it, its id, its verdict first
    run_id = re.search(r"saved as run (\w+)", stdout).group(1)
    assert f"Latency Lab run {run_id}" in html
    verdict = next(ln for ln in stdout.splitlines() if ln.startswith("verdict: "))
    import html as h
    assert f"<p class='headline'>{h.escape(verdict[len('verdict: '):], quote=True)}</p>" in html
    for line in stdout.splitlines():
        if line.startswith(("validity: ", "machine while measuring: ")):
            assert h.escape(line, quote=True) in html
    model = "synthetic-lm" if kind == "generation" else "synthetic"
    assert f"<tr><th>model</th><td>{model}</td></tr>" in html


@pytest.mark.browser
def test_the_report_draws_every_chart_offline_in_a_browser(reports):
    for kind, charts in (("one-shot", 4), ("generation", 6)):
        drawn, traces, asked, errors = _open_offline(reports[kind][0], charts)
        assert drawn == charts and traces >= charts, (kind, drawn, traces)
        assert not asked and not errors, (asked, errors)


def _open_offline(path: Path, charts: int) -> tuple[int, int, list[str], list[str]]:
    """Open ``path`` in Chromium with no network (every request but the file refused), wait
    for ``charts`` charts to draw: (charts drawn, their traces, what it asked for, its page
    errors)."""
    from tests.browser import chromium_page

    asked: list[str] = []
    errors: list[str] = []

    def refuse(route):
        asked.append(route.request.url)
        route.abort()
    with chromium_page(1280, 800) as page:
        page.route(re.compile(r"^(?!file:).*"), refuse)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(Path(path).as_uri())
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
            timeout=30_000)
        return (page.locator(".js-plotly-plot").count(),
                page.locator(".js-plotly-plot .trace").count(), asked, errors)


def test_a_servers_text_in_a_report_is_text_not_markup():
    from latency.figures.report import Report, Section, report_html

    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    html = report_html(Report(evil, evil, evil, [Section(evil, text=evil, rows=[(evil, evil)])]))
    assert "<script>alert" not in html and "<img src=x" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5


def test_an_existing_html_file_is_refused_before_anything_runs(tmp_path):
    path = tmp_path / "r.html"
    path.write_text("mine")
    r = cli_here("run", "--model", "synthetic", "--requests", "5", "--html", str(path),
                 "--db", str(tmp_path / "h.sqlite"))
    assert r.returncode == 2 and "--html" in r.stderr and path.read_text() == "mine", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_run_from_python_writes_the_same_report(tmp_path):
    import latency

    result = latency.run(latency.RunConfig(model="synthetic", requests=30, warmup=2))
    page = latency.report(result, tmp_path / "r.html")
    html = page.read_text()
    assert _figures(html) == 4 and "Latency Lab run" in html
    assert "verdict: " in html  # its repr, as the CLI prints it


def test_a_servers_report_has_its_split_labelled_and_its_metrics(tmp_path):
    """A run against a server of yours (ours stands in): the client's five charts (the
    waterfall as the server's account places it), then the server's account of TTFT and of
    the whole request — each part labelled where it came from — and its /metrics beside the
    client's requests in flight; no scheduler chart (its scheduling is its own)."""
    from latency.core.config import RunConfig
    from latency.serve.http_server import ServerProcess

    server = ServerProcess(RunConfig(model="synthetic-lm", max_running=4).checked()).start()
    try:
        path = tmp_path / "server.html"
        r = cli_here("run", "--target", f"{server.url}/v1", "--api", "completions",
                     "--tokenizer", "server", "--scrape-metrics", "--output-tokens", "12",
                     "--requests", "30", "--concurrency", "3", "--warmup", "2", "--quiet",
                     "--no-save", "--html", str(path))
    finally:
        server.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    html = path.read_text()
    assert _figures(html) == 8
    for label in ("network (measured)", "queue (reported)", "prefill (reported)",
                  "decode (reported)", "client: requests in flight", "server: running"):
        assert label in html, label
    assert "The scheduler over the run" not in html
