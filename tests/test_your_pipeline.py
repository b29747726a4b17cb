"""Profiling your own model: a pipeline in a file or a module, a factory, an installed entry
point, your own inputs, the Python API, and one clear line for every bad input."""
import importlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import latency
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.records import COMPONENTS, component_ns
from latency.execution.engine import execute
from latency.execution.validate import validated
from latency.pipelines.registry import load_spec
from tests.cli_support import cli_here
from tests.timing_support import machine_note

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sentiment_pipeline.py"

#: a pipeline whose stages hold set times, as synthetic does (known answers)
TIMED = textwrap.dedent('''
    import time
    import torch
    from latency import ModelArg, Pipeline
    from latency.core.timing import hold_ns

    class Timed(Pipeline):
        name = "timed"
        description = "stages that hold set times"
        model_args = (ModelArg("pre_ms", float, 2.0), ModelArg("fwd_ms", float, 4.0),
                      ModelArg("post_ms", float, 1.0))
        #: how long each stage took by its own stopwatch (a busy machine stretches holds, and
        #: the first torch call after a hold runs cold); forward's counts from the collate
        held_ns = {"preprocess": [], "forward": [], "postprocess": []}
        def __init__(self, device="cpu", dtype=torch.float32, **args):
            super().__init__(device, dtype, **args)
        def _took(self, stage, t0):
            self.held_ns[stage].append(time.perf_counter_ns() - t0)
        def sample_inputs(self, n, seed):
            return [f"input {i}" for i in range(n)]
        def preprocess(self, raw):
            t0 = time.perf_counter_ns()
            if raw == "bad":
                raise ValueError("this input is bad")
            hold_ns(int(self.args["pre_ms"] * 1e6))
            item = torch.zeros(2)
            self._took("preprocess", t0)
            return item
        def collate(self, items):
            self._t_collate = time.perf_counter_ns()
            return super().collate(items)
        def forward(self, batch):
            hold_ns(int(self.args["fwd_ms"] * 1e6))
            self._took("forward", self._t_collate)
            return batch
        def postprocess(self, item):
            t0 = time.perf_counter_ns()
            hold_ns(int(self.args["post_ms"] * 1e6))
            self._took("postprocess", t0)
            return {"ok": True}

    def make_timed(device="cpu", dtype="float32", pre_ms: float = 1.0, fwd_ms: float = 2.0,
                   post_ms: float = 0.5):
        return Timed(device, dtype, pre_ms=pre_ms, fwd_ms=fwd_ms, post_ms=post_ms)

    def broken_factory():
        raise RuntimeError("the weights are missing")

    NOT_A_PIPELINE = 42

    class Plain:
        pass

    class NoInputs(Timed):
        name = "no-inputs"
        sample_inputs = Pipeline.sample_inputs
''')


@pytest.fixture(scope="module")
def pipe_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("userpkg")
    (d / "timed_pipeline.py").write_text(TIMED)
    return d / "timed_pipeline.py"


def _stage_ms(r, comp):
    return float(np.median(component_ns(r.measured())[comp])) / 1e6


def _held(spec):
    """The Timed class behind ``spec`` (imported once, so the run's own) and its stopwatch."""
    cls = load_spec(spec).cls or importlib.import_module(spec.split(":")[0]).Timed
    for times in cls.held_ns.values():
        times.clear()
    return cls.held_ns


def _measured_back(r, held, comp, set_ms):
    """The run reads a stage as at least its set time and as what the stage itself timed:
    both medians over the same requests, so a busy machine stretches both alike."""
    ms = _stage_ms(r, comp)
    own = float(np.median(held[comp])) / 1e6
    assert ms >= 0.98 * set_ms, (comp, ms, set_ms)
    assert ms == pytest.approx(own, rel=0.05, abs=0.05), (comp, ms, own)


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_a_pipeline_in_a_file_is_measured_back(pipe_file, mode):
    load = {"concurrency": 1} if mode == "closed" else {"rate": 40.0}
    held = _held(f"{pipe_file}:Timed")
    r = execute(RunConfig(pipeline=f"{pipe_file}:Timed", requests=120, warmup=5, **load))
    assert r.status == "completed", r.failure
    assert r.config.model == "timed" and r.config.pipeline == f"{pipe_file}:Timed"
    for comp, ms in (("preprocess", 2.0), ("forward", 4.0), ("postprocess", 1.0)):
        _measured_back(r, held, comp, ms)
    comps = component_ns(r.measured())
    assert np.array_equal(sum(comps[c] for c in COMPONENTS), comps["total"])


def test_by_module_and_as_a_factory_with_model_args(pipe_file, monkeypatch):
    monkeypatch.syspath_prepend(str(pipe_file.parent))
    held = _held("timed_pipeline:make_timed")
    r = execute(RunConfig(pipeline="timed_pipeline:make_timed", requests=60, warmup=2,
                          model_args=["fwd_ms=3"]))
    assert r.status == "completed", r.failure
    assert r.config.model_args == {"pre_ms": 1.0, "fwd_ms": 3.0, "post_ms": 0.5}
    _measured_back(r, held, "forward", 3.0)


@pytest.fixture(scope="module")
def own_process_runs(pipe_file):
    """The user's pipeline run in a run process of its own, in-process and over HTTP."""
    return {transport: latency.run(RunConfig(pipeline=f"{pipe_file}:Timed", requests=40,
                                             warmup=2, transport=transport,
                                             model_args={"fwd_ms": 1.0}), timeout=180)
            for transport in ("in-process", "http")}


def test_a_user_pipeline_in_its_own_process_and_over_http(own_process_runs):
    for transport, r in own_process_runs.items():
        assert r.status == "completed", (transport, r.failure)
        assert r.summary.requests == 40 and r.summary.errors == 0, transport
        assert _stage_ms(r, "forward") >= 0.98, transport  # the stage slept, its time is read


@pytest.mark.timing
def test_a_user_pipeline_in_its_own_process_is_measured_back(own_process_runs):
    for transport, r in own_process_runs.items():
        assert r.status == "completed", (transport, r.failure)
        fwd = _stage_ms(r, "forward")
        assert fwd == pytest.approx(1.0, rel=0.2), (transport, fwd, machine_note(r))


def test_per_request_failures_are_counted_and_the_run_goes_on(pipe_file, tmp_path):
    inputs = tmp_path / "in.txt"
    inputs.write_text("\n".join(["fine"] * 4 + ["bad"]) + "\n")
    r = execute(RunConfig(pipeline=f"{pipe_file}:Timed", inputs=str(inputs), requests=100,
                          warmup=0, model_args={"pre_ms": 0, "fwd_ms": 0, "post_ms": 0}))
    assert r.status == "completed" and r.summary.errors == 20 and r.summary.successful == 80
    assert list(r.summary.error_messages) == ["preprocess: ValueError: this input is bad"]


def test_inputs_from_a_directory_a_jsonl_and_a_text_file_in_order_or_shuffled(tmp_path):
    from latency.pipelines.inputs import read_inputs

    d = tmp_path / "files"
    d.mkdir()
    for i in range(3):
        (d / f"{i}.bin").write_bytes(bytes([i]) * (i + 1))
    (d / ".hidden").write_bytes(b"x")
    assert read_inputs(str(d)) == [b"\x00", b"\x01\x01", b"\x02\x02\x02"]
    jl = tmp_path / "in.jsonl"
    jl.write_text('{"text": "a"}\n\n"b"\n[1, 2]\n')
    assert read_inputs(str(jl)) == [{"text": "a"}, "b", [1, 2]]
    txt = tmp_path / "in.txt"
    txt.write_text("".join(f"line {i}\n" for i in range(50)))
    ordered = read_inputs(str(txt))
    shuffled = read_inputs(str(txt), "shuffle", seed=3)
    assert ordered[0] == "line 0" and sorted(shuffled) == sorted(ordered) and \
        shuffled != ordered and shuffled == read_inputs(str(txt), "shuffle", seed=3)


def test_the_sample_pipelines_take_your_inputs_too(tmp_path):
    from sample_models import data

    d = tmp_path / "jpegs"
    d.mkdir()
    for i, (raw, _) in enumerate(data.shape_samples(6, 11, split="heldout")):
        (d / f"{i}.jpg").write_bytes(raw)
    r = execute(RunConfig(model="image-cnn", inputs=str(d), requests=24, warmup=2))
    assert r.status == "completed" and r.summary.errors == 0


def test_the_example_pipeline_runs_from_the_command_line(capsys):
    from latency.cli.main import main  # the command line's code, in this process

    code = main(["run", "--pipeline", f"{EXAMPLE}:SentimentPipeline", "--inputs",
                 str(ROOT / "examples" / "reviews.jsonl"), "--concurrency", "4",
                 "--batch-size", "4", "--max-batch-delay-ms", "2", "--requests", "400",
                 "--no-save", "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith("run completed: sentiment") and "errors 0" in out.out
    code = main(["models", "--pipeline", f"{EXAMPLE}:make_pipeline"])
    models = capsys.readouterr().out
    assert code == 0 and "make_pipeline" in models
    assert "--model-arg threshold=0.5" in models


def test_the_example_model_is_trained_and_agrees_with_its_labels():
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import sentiment_pipeline as ex
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    import torch

    pipe = ex.SentimentPipeline()
    held = ex.reviews(400, 30_000)
    with torch.inference_mode():
        hits = sum(pipe.postprocess(pipe.forward(pipe.collate([pipe.preprocess(x)]))[0])
                   ["label"] == ex.LABELS[y] for x, y in held)
    assert hits / len(held) > 0.85  # chance: 0.5


def test_a_new_pipeline_template_runs_as_it_is(tmp_path):
    path = tmp_path / "mine.py"
    assert cli_here("new-pipeline", str(path)).returncode == 0
    again = cli_here("new-pipeline", str(path))
    assert again.returncode == 2 and "exists" in again.stderr
    r = execute(RunConfig(pipeline=f"{path}:MyPipeline", concurrency=2, requests=100,
                          warmup=5, batch_size=4, max_batch_delay_ms=1))
    assert r.status == "completed" and r.summary.errors == 0
    assert r.summary.batch_size_mean > 1


def test_an_installed_entry_point_is_listed_and_runs_by_name(pipe_file, tmp_path):
    site = tmp_path / "site"
    (site / "echopkg").mkdir(parents=True)
    (site / "echopkg" / "__init__.py").write_text(TIMED.replace('name = "timed"',
                                                               'name = "echo"'))
    dist = site / "echopkg-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echopkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[latency_lab.pipelines]\necho = echopkg:Timed\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    listed = subprocess.run([sys.executable, "-m", "latency", "models"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("echo "))
    assert "entry point echo" in line
    ran = subprocess.run([sys.executable, "-m", "latency", "run", "--model", "echo",
                          "--model-arg", "fwd_ms=0.5", "--requests", "30", "--no-save",
                          "--quiet"], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 0 and ran.stdout.startswith("run completed: echo"), ran.stderr


def test_profile_from_python_returns_a_result_that_prints_its_summary(pipe_file):
    code = ("import sys, latency\n"
            "assert 'torch' not in sys.modules\n"
            f"r = latency.profile({str(pipe_file) + ':Timed'!r}, requests=80, warmup=2,\n"
            "                     model_args={'pre_ms': 0.5, 'fwd_ms': 1, 'post_ms': 0.2})\n"
            "print(repr(r))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("run completed: timed") and "verdict:" in out.stdout


def test_profile_of_an_object_and_of_a_class_here_and_compare(pipe_file):
    sys.path.insert(0, str(pipe_file.parent))
    try:
        import timed_pipeline as tp
    finally:
        sys.path.remove(str(pipe_file.parent))
    obj = tp.Timed(pre_ms=0.2, fwd_ms=1.0, post_ms=0.1)
    a = latency.profile(obj, inputs=["x", "y"], requests=60, warmup=2)
    b = latency.profile(tp.Timed, requests=60, warmup=2, in_process=True,
                        model_args={"pre_ms": 0.2, "fwd_ms": 3.0, "post_ms": 0.1})
    assert a.status == b.status == "completed"
    comps = component_ns(a.measured())
    assert np.array_equal(sum(comps[c] for c in COMPONENTS), comps["total"])
    text = repr(a.compare(b))
    assert "B vs A: p50" in text and "forward" in text and "model_args.fwd_ms: 1 → 3" in \
        text
    assert b.summary.components_ms["forward"].p50 > 2 * a.summary.components_ms["forward"].p50


def test_simulate_from_python():
    sim = latency.simulate(rate=100, service_ms=5, requests=20_000)
    assert sim.utilisation == pytest.approx(0.5)
    assert repr(sim).startswith("SIMULATED (no model ran): 100 req/s")


# ---- model files ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from tests.conftest import require_extra

    why = "ONNX model files are an optional extra (pip install -r requirements-onnx.txt)"
    require_extra("onnxruntime", why)
    require_extra("onnxscript", why)
    from latency.pipelines.export import export

    d = tmp_path_factory.mktemp("models")
    return {s: export("image-cnn", d / f"cnn{s}")["file"] for s in (".onnx", ".pt2")}


@pytest.mark.parametrize("suffix,pre", [(".onnx", ""), (".onnx", "image"), (".pt2", "")])
def test_the_exported_cnn_agrees_with_pytorch(exported, suffix, pre):
    import torch

    from latency.pipelines.registry import build_pipeline, parse_model_args

    ref = build_pipeline("image-cnn", torch.device("cpu"), torch.float32, {})
    args = parse_model_args("model-file", {"file": exported[suffix], "pre": pre,
                                           "trust": suffix == ".pt2"})
    mf = build_pipeline("model-file", torch.device("cpu"), torch.float32, args)
    raws = ref.sample_inputs(300, 4242)
    with torch.inference_mode():
        for size in (1, 8):
            a = [ref.postprocess(o)["label"] for k in range(0, len(raws), size)
                 for o in ref.split(ref.forward(ref.collate(
                     [ref.preprocess(r) for r in raws[k: k + size]])), size)]
            b = [mf.postprocess(o)["label"] for k in range(0, len(raws), size)
                 for o in mf.split(mf.forward(mf.collate(
                     [mf.preprocess(r) for r in raws[k: k + size]])), size)]
            assert np.mean([x == y for x, y in zip(a, b)]) >= 0.99


def test_a_model_file_runs_from_the_command_line_and_refuses_levers(exported, tmp_path,
                                                                   capsys):
    from latency.cli.main import main  # the command line's code, in this process

    code = main(["run", "--model-file", exported[".onnx"], "--concurrency", "2",
                 "--batch-size", "4", "--max-batch-delay-ms", "2", "--requests", "100",
                 "--no-save", "--quiet", "--json", str(tmp_path / "r.json")])
    assert code == 0, capsys.readouterr().err
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["summary"]["errors"] == 0 and d["config"]["model"] == "model-file"
    capsys.readouterr()
    code = main(["run", "--model-file", exported[".onnx"], "--optimize", "int8",
                 "--requests", "5"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "model file runs as exported" in err


@pytest.mark.parametrize("names", [{"spec": "PAYLOAD:X"}, {"sample": "not-a-sample"}])
def test_a_model_files_sidecar_runs_no_code_without_consent(exported, tmp_path, names):
    """A model file someone sent you runs no code by being profiled: its .json may name only a
    built-in sample's stages unless --trust-model-file."""
    import shutil

    from latency.cli.main import main

    model = tmp_path / "model.onnx"
    shutil.copy(exported[".onnx"], model)
    payload = tmp_path / "payload.py"
    payload.write_text(f"import pathlib\npathlib.Path({str(tmp_path / 'PWNED')!r}).write_text("
                       "'ran')\nfrom sample_models.image_cnn import ImageCNNPipeline as X\n")
    side = json.loads(Path(f"{exported['.onnx']}.json").read_text())
    side.update({k: v.replace("PAYLOAD", str(payload)) for k, v in names.items()})
    Path(f"{model}.json").write_text(json.dumps(side))
    args = ["run", "--model-file", str(model), "--requests", "5", "--min-requests", "5",
            "--warmup", "0", "--quiet", "--no-save"]
    assert main(args) == 2
    assert not (tmp_path / "PWNED").exists()
    if "spec" in names:  # consent given: the pipeline it names serves the model
        assert main([*args, "--trust-model-file"]) == 0
        assert (tmp_path / "PWNED").read_text() == "ran"


# ---- bad input: one line, exit 2 -------------------------------------------------------------
def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _bad_cases(pipe_file, tmp_path):
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"this is not an onnx model")
    pt2 = tmp_path / "model.pt2"
    pt2.write_bytes(b"whatever")
    empty = tmp_path / "empty"
    empty.mkdir()
    f = str(pipe_file)
    return [
        (["--pipeline", str(tmp_path / "nope.py") + ":X"], "no such file"),
        (["--pipeline", "no_such_module_xyz:X"], "no module named 'no_such_module_xyz'"),
        (["--pipeline", f"{tmp_path / 'raises.py'}:X"], "importing"),
        (["--pipeline", f"{f}:NOT_A_PIPELINE"], "neither a Pipeline subclass nor a factory"),
        (["--pipeline", f"{f}:Plain"], "not a latency.Pipeline subclass"),
        (["--pipeline", f"{f}:Missing"], "has no 'Missing'"),
        (["--pipeline", "nocolon"], "expected module.path:Name"),
        (["--pipeline", f"{f}:Timed", "--inputs", str(tmp_path / "none.txt")],
         "no such file or directory"),
        (["--pipeline", f"{f}:Timed", "--inputs", str(empty)], "holds no files"),
        (["--pipeline", f"{f}:NoInputs"], "has no sample_inputs"),
        (["--pipeline", f"{f}:Timed", "--model-arg", "fwd_ms=nan"], "finite"),
        (["--model-file", str(corrupt), "--pre", "image"],
         "cannot load" if _has("onnxruntime") else "requirements-onnx.txt"),
        (["--model-file", str(pt2)], "--trust-model-file"),
        (["--model-file", str(tmp_path / "x.onnx")], "no such file"),
        (["--model-file", str(tmp_path / "x.bin")], "expected .onnx or .pt2"),
    ]


def test_every_bad_input_is_one_line_and_exit_2(pipe_file, tmp_path, capsys):
    from latency.cli.main import main

    (tmp_path / "raises.py").write_text("import nonexistent_dependency_abc\n")
    for args, needle in _bad_cases(pipe_file, tmp_path):
        assert main(["run", *args, "--requests", "5", "--no-save"]) == 2, args
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, (args, err)
    assert "nonexistent_dependency_abc" in _first_err(
        main, ["run", "--pipeline", f"{tmp_path / 'raises.py'}:X"], capsys)


def _first_err(main, args, capsys):
    main([*args, "--requests", "5", "--no-save"])
    return capsys.readouterr().err


def test_a_factory_that_raises_fails_the_run_with_its_reason(pipe_file):
    r = execute(RunConfig(pipeline=f"{pipe_file}:broken_factory", requests=5,
                          inputs=str(EXAMPLE)))
    assert r.status == "failed" and "the weights are missing" in r.failure
    assert "RuntimeError" in r.traceback


def test_a_pipeline_that_hangs_can_still_be_stopped(tmp_path, monkeypatch):
    """A forward pass that never returns: Stop ends the run after a bounded drain (shortened
    here from 10 s), keeping what was measured, and the server's threads are let go."""
    from latency.loadgen import generator

    monkeypatch.setattr(generator, "DRAIN_S", 2.0)
    path = tmp_path / "hangs.py"
    path.write_text(TIMED + textwrap.dedent('''
        import time as _t
        class Hangs(Timed):
            name = "hangs"
            def forward(self, batch):
                _t.sleep(120)
                return batch
    '''))
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()
    t = time.monotonic()
    r = execute(RunConfig(pipeline=f"{path}:Hangs", concurrency=2, duration_s=60, warmup=0),
                cancel=cancel)
    assert r.status == "stopped" and time.monotonic() - t < 20


def test_validated_config_names_the_pipeline_by_itself(pipe_file):
    c = validated(RunConfig(pipeline=f"{pipe_file.parent}/../{pipe_file.parent.name}/"
                                     f"{pipe_file.name}:Timed"))
    assert c.model == "timed" and c.pipeline == f"{pipe_file.resolve()}:Timed"
    with pytest.raises(ConfigError, match="no model-arg"):
        validated(RunConfig(pipeline=f"{pipe_file}:Timed", model_args={"nope": 1}))


def test_a_run_thread_is_not_left_behind(pipe_file):
    before = threading.active_count()
    execute(RunConfig(pipeline=f"{pipe_file}:Timed", requests=10, warmup=0,
                      model_args={"pre_ms": 0, "fwd_ms": 0, "post_ms": 0}))
    deadline = time.monotonic() + 0.5  # the same 0.5 s as ever, no longer always all of it
    while threading.active_count() > before + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= before + 1


def test_levers_and_ab_apply_to_your_pipeline(tmp_path, capsys):
    spec = f"{EXAMPLE}:SentimentPipeline"
    r = execute(RunConfig(pipeline=spec, optimize=["int8"], requests=200, warmup=5,
                          concurrency=2))
    assert r.status == "completed", r.failure
    opt = r.environment["optimization"]
    assert opt["levers"][0]["name"] == "int8" and opt["agreement"] >= 0.9
    from latency.cli.main import main  # the command line's code, in this process

    code = main(["ab", "--pipeline", spec, "--inputs", str(ROOT / "examples" / "reviews.jsonl"),
                 "--b-optimize", "int8", "--duration", "0.5", "--pairs", "1", "--warmup", "5",
                 "--json", str(tmp_path / "ab.json")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "A = baseline · B = levers int8 (A: none)" in out.out
    assert json.loads((tmp_path / "ab.json").read_text())["B"]["config"]["model"] == \
        "sentiment"
