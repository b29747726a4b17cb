"""The command line, as a user runs it: output, files, exit codes, one-line errors."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import cli_here
from tests.timing_support import machine_note

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "latency", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_models_lists_every_pipeline_with_a_description():
    out = cli_here("models")
    assert out.returncode == 0
    for name in ("image-cnn", "text-transformer", "tabular-mlp", "synthetic"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(name))
        assert len(line.split(None, 1)[1]) > 20  # a real one-line description


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    """One ``latency run`` writing its JSON and CSV: (its output, the JSON, the CSV)."""
    tmp_path = tmp_path_factory.mktemp("run")
    j, c = tmp_path / "run.json", tmp_path / "run.csv"
    out = cli("run", "--model", "synthetic", "--model-arg", "forward_ms=3", "--rate", "150",
              "--arrival", "poisson", "--requests", "400", "--seed", "1", "--warmup", "10",
              "--json", str(j), "--csv", str(c), "--quiet")
    return out, j, c


def test_run_writes_summary_json_and_csv(run_files):
    out, j, c = run_files
    assert out.returncode == 0, out.stderr
    assert "verdict:" in out.stdout and "p99" in out.stdout and "throughput" in out.stdout
    d = json.loads(j.read_text())
    assert d["status"] == "completed"
    s = d["summary"]
    assert s["requests"] == 400 and s["warmup_requests"] == 10 and s["errors"] == 0
    assert s["throughput_rps"] > 0 and s["duration_s"] > 0
    keys = {"mean", "p50", "p90", "p95", "p99", "p999", "max", "p99_ci95"}
    assert keys <= set(s["latency_ms"])
    assert set(s["components_ms"]) == {"network", "queue", "preprocess", "forward",
                                       "postprocess", "overhead"}
    for comp in s["components_ms"].values():
        assert keys <= set(comp)
    assert {"p50", "p99"} <= set(s["schedule_lag_ms"]) and isinstance(s["warnings"], list)
    series = d["series"]
    assert len(series["t_s"]) >= 2 and sum(series["throughput_rps"]) > 0
    assert len(series["p50_ms"]) == len(series["p99_ms"]) == len(series["t_s"])
    env = d["environment"]
    for key in ("torch", "cpu_model", "cpu_flags", "cores", "device", "threads_per_replica",
                "dtype", "git_commit"):
        assert key in env
    rows = c.read_text().splitlines()
    assert len(rows) == 1 + 410  # header + measured + warm-up
    header = rows[0].split(",")
    for col in ("network_ms", "queue_ms", "preprocess_ms", "forward_ms", "postprocess_ms",
                "overhead_ms", "total_ms", "batch_id", "batch_size", "warmup"):
        assert col in header


@pytest.mark.timing
def test_run_measures_the_set_forward_time_back(run_files):
    out, j, _ = run_files
    assert out.returncode == 0, out.stderr
    d = json.loads(j.read_text())
    fwd = d["summary"]["components_ms"]["forward"]["p50"]
    assert fwd == pytest.approx(3.0, rel=0.05), (fwd, machine_note(d))


@pytest.mark.parametrize("args,needle", [
    (["--batch-size", "0"], "batch-size"),
    (["--rate", "-1"], "rate"),
    (["--concurrency", "0"], "concurrency"),
    (["--model", "nope"], "unknown model"),
    (["--device", "tpu"], "device"),
    (["--device", "cuda:7"], "cuda:7"),
    (["--dtype", "int3"], "dtype"),
    (["--model-arg", "forward_ms"], "model-arg"),
    (["--model-arg", "forward_ms=fast"], "forward_ms"),
    (["--model-arg", "colour=red"], "colour"),
    (["--duration", "100000"], "duration"),
    (["--batch-size", "many"], "batch-size"),
    (["--concurrency", "2", "--rate", "5"], "not allowed with"),
    (["--model-arg", "forward_ms=-1"], "forward_ms"),
    (["--model-arg", "error_rate=1.5"], "error_rate"),
    (["--arrival", "constant"], "--rate"),
])
def test_bad_input_is_one_line_exit_2_nothing_run(args, needle):
    out = cli_here("run", *args)  # refused before anything runs: no model, no run process
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_oversubscription_warns_in_summary_and_json(tmp_path):
    j = tmp_path / "r.json"
    out = cli_here("run", "--model-arg", "forward_ms=1", "--model-arg", "preprocess_ms=0",
                   "--model-arg", "postprocess_ms=0", "--replicas", "2", "--threads", "64",
                   "--requests", "50", "--warmup", "0", "--json", str(j), "--quiet")
    assert out.returncode == 0
    assert "oversubscribed" in out.stdout
    assert any("oversubscribed" in w for w in json.loads(j.read_text())["summary"]["warnings"])


def test_simulate_prints_the_summary_and_the_closed_form(tmp_path):
    j = tmp_path / "sim.json"
    out = cli_here("simulate", "--rate", "150", "--service-ms", "5", "--requests", "50000",
                   "--json", str(j))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("SIMULATED") and "closed form M/M/1" in out.stdout
    d = json.loads(j.read_text())
    s = d["summary"]
    assert d["simulated"] and s["utilisation"] == pytest.approx(0.75)
    assert s["components_ms"]["queue"]["mean"] == pytest.approx(15.0, rel=0.15)
    assert s["closed_form"]["wait_mean_ms"] == pytest.approx(15.0)


def test_simulate_unstable_and_bad_input():
    out = cli_here("simulate", "--rate", "300", "--service-ms", "5", "--requests", "20000")
    assert out.returncode == 0 and "unstable" in out.stdout and "nan" not in out.stdout.lower()
    bad = cli_here("simulate", "--rate", "10", "--service-dist", "weibull")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_simulate_from_a_recorded_run_json_and_csv(tmp_path):
    j, c = tmp_path / "run.json", tmp_path / "run.csv"
    out = cli_here("run", "--model", "synthetic", "--model-arg", "forward_ms=3",
                   "--model-arg", "preprocess_ms=0", "--model-arg", "postprocess_ms=0",
                   "--rate", "100", "--requests", "300", "--json", str(j), "--csv", str(c),
                   "--no-save")
    assert out.returncode == 0, out.stderr
    assert json.loads(j.read_text())["requests"]["count"] == 320  # 20 warm-up + 300
    # the utilisation is 200 req/s × the service this run measured (3 ms as set, or longer
    # on a busy machine), not the nominal 3 ms
    comps = json.loads(j.read_text())["summary"]["components_ms"]
    service_ms = comps["forward"]["mean"] + comps["postprocess"]["mean"]
    for source in (j, c):
        sim = cli_here("simulate", "--from-run", str(source), "--rate", "200", "--requests",
                       "20000")
        assert sim.returncode == 0, sim.stderr
        assert "resampled from" in sim.stdout, sim.stdout
        shown = re.search(r"utilisation (\d+(?:\.\d+)?)", sim.stdout)
        assert shown and float(shown.group(1)) == pytest.approx(200 * service_ms / 1000,
                                                                abs=0.05), \
            (sim.stdout.splitlines()[0], service_ms)
    replay = cli_here("simulate", "--from-run", str(j), "--arrival", "recorded", "--requests",
                      "20000")
    assert replay.returncode == 0 and " recorded, " in replay.stdout
    summary_only = tmp_path / "s.json"
    summary_only.write_text(json.dumps({"summary": {}}))
    for bad in (["--from-run", str(tmp_path / "missing.json")], ["--from-run", str(summary_only)],
                ["--arrival", "recorded", "--rate", "5"], []):
        err = cli_here("simulate", *bad)
        assert err.returncode == 2 and len(err.stderr.strip().splitlines()) == 1, err.stderr


def test_simulate_unstable_shows_the_queue_growing():
    out = cli_here("simulate", "--rate", "300", "--service-ms", "5", "--requests", "20000")
    assert "queue length over the simulated horizon" in out.stdout
    line = out.stdout.split("queue length over the simulated horizon")[1].splitlines()[1]
    lengths = [int(x.split(":")[1]) for x in line.split()]
    assert lengths == sorted(lengths) and lengths[-1] > 4 * lengths[0] > 0


def test_simulate_from_a_run_takes_its_batching_and_replicas(tmp_path):
    """A batch-8 run replays as batch 8 (not batch 1, and not "unstable"); a flag overrides."""
    j = tmp_path / "batched.json"
    out = cli_here("run", "--model", "synthetic", "--model-arg", "forward_ms=4",
                   "--model-arg", "preprocess_ms=0", "--model-arg", "postprocess_ms=0",
                   "--batch-size", "8", "--max-batch-delay-ms", "5", "--replicas", "2",
                   "--concurrency", "16", "--requests", "800", "--json", str(j), "--no-save")
    assert out.returncode == 0, out.stderr
    sim = cli_here("simulate", "--from-run", str(j), "--requests", "20000")
    assert sim.returncode == 0, sim.stderr
    assert "2 replica(s), batch ≤ 8 / 5 ms" in sim.stdout and "unstable" not in sim.stdout
    # a closed-loop run replays as a closed loop of its clients (open-loop arrivals at a
    # saturated closed loop's throughput would put its server at ρ ≈ 1)
    assert "closed 16 clients" in sim.stdout
    one = cli_here("simulate", "--from-run", str(j), "--replicas", "1", "--requests", "20000")
    assert "1 replica(s), batch ≤ 8 / 5 ms" in one.stdout
    at_rate = cli_here("simulate", "--from-run", str(j), "--rate", "500", "--requests", "5000")
    assert "open 500 req/s poisson" in at_rate.stdout


def test_simulate_a_closed_loop_known_answer():
    """4 clients on one replica of constant 10 ms: each request waits for the 3 ahead of it,
    40 ms, at 100 req/s."""
    out = cli_here("simulate", "--clients", "4", "--service-ms", "10", "--service-dist",
                   "constant", "--requests", "5000")
    assert out.returncode == 0, out.stderr
    assert "closed 4 clients" in out.stdout
    served = float(out.stdout.split("throughput ")[1].split()[0])
    assert served == pytest.approx(100.0, rel=0.01)
    total = next(line for line in out.stdout.splitlines() if line.startswith("total"))
    assert total.split()[1] == "40.0"  # the mean
    both = cli_here("simulate", "--clients", "4", "--rate", "10")
    assert both.returncode == 2 and "exclude each other" in both.stderr
