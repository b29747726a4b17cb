"""Bad input is one line, before anything runs (hostile defect D26): a model-arg outside its
declared range, a user's model-arg conversion or ``check_args`` raising anything, a
``sample_inputs`` that is a generator, empty or not a list, and a history file that opens but
cannot be written."""
import json
import shutil
import sqlite3
import subprocess
import textwrap

import pytest

import latency
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.validate import validated
from latency.storage.store import RunStore, StoreError

HOSTILE = textwrap.dedent('''
    import itertools
    import sys
    from typing import Any

    import torch

    from latency import ModelArg, Pipeline


    class Base(Pipeline):
        name = "hostile-args"
        model_args = (ModelArg("n", int, 4, "unused"),)

        def __init__(self, device: Any = "cpu", dtype: Any = torch.float32, **args: Any):
            super().__init__(device, dtype, **args)

        def sample_inputs(self, n, seed):
            return [str(i) for i in range(n)]

        def preprocess(self, raw):
            return torch.ones(2)

        def forward(self, batch):
            return batch

        def postprocess(self, item):
            return {"y": float(item[0])}


    def _raise(exc):
        def convert(text):
            raise exc
        return convert


    class ConvRuntime(Base):
        model_args = (ModelArg("x", _raise(RuntimeError("typefail")), 1),)

    class ConvKey(Base):
        model_args = (ModelArg("x", _raise(KeyError("k")), 1),)

    class ConvExit(Base):
        model_args = (ModelArg("x", _raise(SystemExit(3)), 1),)

    class ConvKBI(Base):
        model_args = (ModelArg("x", _raise(KeyboardInterrupt()), 1),)

    class NotModelArgs(Base):
        model_args = ("x",)

    class CheckType(Base):
        @classmethod
        def check_args(cls, args):
            raise TypeError("check wants a str")

    class CheckKey(Base):
        @classmethod
        def check_args(cls, args):
            return args["missing"]

    class CheckRuntime(Base):
        @classmethod
        def check_args(cls, args):
            raise RuntimeError("check_args runtime error")

    class CheckExit(Base):
        @classmethod
        def check_args(cls, args):
            sys.exit(0)

    class CheckKBI(Base):
        @classmethod
        def check_args(cls, args):
            raise KeyboardInterrupt

    class CheckTwoLines(Base):
        @classmethod
        def check_args(cls, args):
            raise ValueError("first line\\nsecond line")

    class SampleGen(Base):
        def sample_inputs(self, n, seed):
            return (str(i) for i in range(n))

    class SampleTuple(Base):
        def sample_inputs(self, n, seed):
            return tuple(str(i) for i in range(n))

    class SampleEmpty(Base):
        def sample_inputs(self, n, seed):
            return []

    class SampleNone(Base):
        def sample_inputs(self, n, seed):
            return None

    class SampleInt(Base):
        def sample_inputs(self, n, seed):
            return 42

    class SampleStr(Base):
        def sample_inputs(self, n, seed):
            return "one input"

    class SampleEndless(Base):
        def sample_inputs(self, n, seed):
            return (str(i) for i in itertools.count())

    class SampleGenRaises(Base):
        def sample_inputs(self, n, seed):
            yield "a"
            raise KeyError("half way")

    class SampleExit(Base):
        def sample_inputs(self, n, seed):
            sys.exit(0)

    class CanGenRaises(Base):
        @classmethod
        def can_generate_inputs(cls, args):
            raise RuntimeError("cannot tell")
''')


RANGED = HOSTILE + textwrap.dedent('''
    class Ranged(Base):
        model_args = (ModelArg("size", int, 0, "0: automatic", low=1, high=64),)
''')


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "args_pipelines.py"
    path.write_text(HOSTILE)
    path.with_name("ranged_pipelines.py").write_text(RANGED)
    return path


def _main(*args) -> subprocess.CompletedProcess:
    """``python -m latency ARGS`` in this process (``latency.cli.main``, what ``python -m
    latency`` runs, without a fresh interpreter's imports per case): its exit code (a
    ``SystemExit`` that escapes it too, as the interpreter would exit), stdout and stderr."""
    import contextlib
    import io

    from latency.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _cli(*args):
    return _main("run", "--requests", "5", "--warmup", "0", "--no-save", "--quiet", *args)


def _one_line(proc):
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(err.splitlines()) == 1, proc.stderr
    return err


# ---- 1. a model-arg outside its declared range ------------------------------------------------
@pytest.fixture(scope="module")
def pt2(tmp_path_factory):
    """A .pt2 file that passes model-file's checks before it is loaded (trusted, --pre given)."""
    path = tmp_path_factory.mktemp("model") / "m.pt2"
    path.write_bytes(b"not loaded: the checks refuse the run first")
    path.with_name("inputs.txt").write_text("a\nb\n")  # so only the range can refuse it
    return path


@pytest.mark.parametrize("pair,says", [
    ("image_size=-5", "image_size=-5 is out of range: it must be from 1 to 4,096 (or 0"),
])
def test_a_model_file_size_out_of_range_is_one_line_exit_2(pair, says, pt2):
    """These were accepted, and then every request failed (or asked for gigabytes)."""
    err = _one_line(_cli("--model-file", pt2, "--trust-model-file", "--model-arg", "pre=image",
                         "--inputs", pt2.with_name("inputs.txt"), "--model-arg", pair))
    assert says in err, err


@pytest.mark.parametrize("pair,says", [
    ("image_size=1000000000", "image_size=1000000000 is out of range"),
    ("resize=-1", "resize=-1 is out of range: it must be from 1 to 4,096 (or 0"),
    ("max_len=1000000000", "max_len=1000000000 is out of range: it must be from 1 to 65,536"),
    ("top_k=0", "top_k=0 is out of range: it must be from 1 to 100,000"),
])
def test_model_file_declares_its_ranges(pair, says, pt2):
    config = RunConfig(model="model-file", inputs=str(pt2.with_name("inputs.txt")),
                       model_args=[f"file={pt2}", "trust=true", "pre=image", pair])
    with pytest.raises(ConfigError) as info:
        validated(config)
    assert says in str(info.value) and "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize("pair,says", [
    ("stall_after=0", "stall_after=0 is out of range: it must be from 1 to 10,000,000"),
    ("forward_ms=-5", "forward_ms=-5.0 is out of range: it must be from 0 to 10,000"),
    ("stall_ms=1e12", "stall_ms=1000000000000.0 is out of range"),
    ("forward_ms=inf", "must be a finite number"),
    ("sigma=0", "sigma=0.0 is out of range: it must be from 0.001 to 5"),
])
def test_synthetic_declares_its_ranges(pair, says):
    with pytest.raises(ConfigError, match="^model-arg .*") as info:
        validated(RunConfig(model="synthetic", model_args=[pair]))
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_default_is_allowed_outside_the_range_and_a_given_value_is_not(hostile):
    """``0`` means "automatic" beside ``low=1``: the dashboard sends every default back."""
    spec = f"{hostile.with_name('ranged_pipelines.py')}:Ranged"
    assert validated(RunConfig(pipeline=spec, model_args={"size": 0})).model_args == {"size": 0}
    assert validated(RunConfig(pipeline=spec, model_args=["size=64"])).model_args["size"] == 64
    inputs = hostile.with_name("inputs.txt")
    inputs.write_text("a\nb\n")
    config = RunConfig(model="model-file", inputs=str(inputs),
                       model_args={"file": str(hostile.with_suffix(".pt2")), "trust": True,
                                   "pre": "text", "max_len": 0, "image_size": 0})
    hostile.with_suffix(".pt2").write_bytes(b"x")
    assert validated(config).model_args["max_len"] == 0  # 0: from the .json, else 128
    for bad in ("size=65", "size=-1"):
        with pytest.raises(ConfigError, match=r"size=-?6?\d* is out of range: it must be from "
                                              r"1 to 64 \(or 0, the default\)"):
            validated(RunConfig(pipeline=spec, model_args=[bad]))


def test_a_sidecar_size_out_of_range_is_refused_too(tmp_path):
    model = tmp_path / "m.pt2"
    model.write_bytes(b"x")
    (tmp_path / "m.pt2.json").write_text(json.dumps({"pre": "image", "crop": -5}))
    (tmp_path / "inputs.txt").write_text("a\n")
    with pytest.raises(ConfigError, match=r"m.pt2.json sets crop=-5 is out of range"):
        validated(RunConfig(model="model-file", inputs=str(tmp_path / "inputs.txt"),
                            model_args=[f"file={model}", "trust=true"]))


def test_a_synthetic_pipeline_built_directly_checks_the_same_ranges():
    from sample_models.synthetic import SyntheticPipeline

    with pytest.raises(ValueError, match="forward_ms=-1.0 is out of range"):
        SyntheticPipeline("cpu", "float32", forward_ms=-1)


# ---- 2. a user's conversion or check_args raising anything ------------------------------------
@pytest.mark.parametrize("name,arg,says", [
    ("CheckType", None, "CheckType.check_args raised TypeError: check wants a str"),
    ("CheckExit", None, "CheckExit.check_args raised SystemExit"),
    ("ConvRuntime", "x=3", "model-arg x='3': hostile-args's conversion (convert) raised "
                           "RuntimeError: typefail"),
])
def test_user_code_raising_a_non_value_error_is_one_line_exit_2(name, arg, says, hostile):
    """Was a full traceback (and, for sys.exit(0) in check_args, exit 0)."""
    err = _one_line(_cli("--pipeline", f"{hostile}:{name}",
                         *(("--model-arg", arg) if arg else ())))
    assert says in err, err


@pytest.mark.parametrize("name,arg,says", [
    ("CheckKey", None, "CheckKey.check_args raised KeyError: 'missing'"),
    ("CheckRuntime", None, "CheckRuntime.check_args raised RuntimeError: check_args runtime"),
    ("ConvKey", ["x=1"], "raised KeyError: 'k'"),
    ("ConvExit", ["x=3"], "raised SystemExit: 3"),
    ("NotModelArgs", None, "model_args must be a tuple of latency.ModelArg, not str"),
    ("CheckTwoLines", None, "CheckTwoLines.check_args refused the model-args: ValueError: "
                            "first line"),
])
def test_validation_wraps_user_code_in_one_config_error_line(name, arg, says, hostile):
    with pytest.raises(ConfigError) as info:
        validated(RunConfig(pipeline=f"{hostile}:{name}", model_args=arg))
    assert says in str(info.value) and "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize("name,arg", [("CheckKBI", None), ("ConvKBI", ["x=1"])])
def test_ctrl_c_in_user_code_stays_ctrl_c(name, arg, hostile):
    with pytest.raises(KeyboardInterrupt):
        validated(RunConfig(pipeline=f"{hostile}:{name}", model_args=arg))


# ---- 3. sample_inputs that is not a list --------------------------------------------------
def test_sample_inputs_may_be_a_generator(hostile, tmp_path):
    """It was a client-thread traceback per request and a run completed/INVALID."""
    out = tmp_path / "r.json"
    proc = _cli("--pipeline", f"{hostile}:SampleGen", "--requests", "40", "--json", out)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    d = json.loads(out.read_text())
    assert d["status"] == "completed"
    assert d["summary"]["requests"] == 40 and d["summary"]["errors"] == 0


@pytest.mark.parametrize("name", ["SampleGen", "SampleTuple"])
def test_sample_inputs_may_be_any_finite_iterable(name, hostile):
    result = latency.profile(f"{hostile}:{name}", in_process=True, requests=20, warmup=0)
    assert result.status == "completed" and result.summary.requests == 20
    assert result.summary.errors == 0 and not result.errors


@pytest.mark.parametrize("name,says", [
    ("SampleEmpty", "SampleEmpty.sample_inputs returned no inputs"),
    ("SampleNone", "SampleNone.sample_inputs returned NoneType, not a list of inputs"),
    ("SampleInt", "SampleInt.sample_inputs returned int, which is not iterable"),
    ("SampleStr", "SampleStr.sample_inputs returned str, not a list of inputs"),
    ("SampleEndless", "SampleEndless.sample_inputs returned more than 100,000 inputs"),
    ("SampleGenRaises", "SampleGenRaises.sample_inputs raised KeyError: 'half way'"),
    ("SampleExit", "SampleExit.sample_inputs raised SystemExit"),
])
def test_sample_inputs_that_cannot_be_used_fail_the_run_in_one_line(name, says, hostile):
    result = latency.profile(f"{hostile}:{name}", in_process=True, requests=5, warmup=0)
    assert result.status == "failed", result
    assert result.failure.startswith(f"PipelineError: {says}"), result.failure


def test_a_failed_sample_inputs_fails_the_cli_run_without_a_client_traceback(hostile, tmp_path):
    out = tmp_path / "r.json"
    proc = _cli("--pipeline", f"{hostile}:SampleInt", "--json", out)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "failure: PipelineError: SampleInt.sample_inputs returned int" in proc.stdout
    assert json.loads(out.read_text())["status"] == "failed"


# ---- 4. a history file that opens but cannot be written -----------------------------------
def _chattr(flag, path):
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_an_immutable_history_is_refused_before_the_run(tmp_path):
    """``chattr +i``: SQLite opens the file read-only, so the old check (BEGIN and ROLLBACK)
    passed, the run measured, and then it was "not saved", exit 1."""
    db = tmp_path / "h.sqlite"
    RunStore(db).check_writable()
    if not _chattr("+i", db):
        pytest.skip("chattr +i does not work here (not root, or a file system without it); "
                    "test_a_read_only_history_is_refused covers the same path")
    try:
        err = _one_line(_main("run", "--model", "synthetic", "--requests", "5", "--warmup",
                              "0", "--quiet", "--db", db))
        assert f"cannot write the run history {db}" in err and "readonly" in err, err
    finally:
        _chattr("-i", db)


def test_a_read_only_history_is_refused(tmp_path, monkeypatch):
    """The same without chattr: the history opened read-only (``mode=ro``), as SQLite opens
    a file it cannot open for writing (immutable, read-only mount)."""
    db = tmp_path / "h.sqlite"
    RunStore(db).check_writable()
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda path, **kw: connect(
        f"file:{path}?mode=ro", uri=True, **kw))
    with pytest.raises(StoreError, match="cannot write the run history .*readonly"):
        RunStore(db).check_writable()


def test_checking_a_new_history_leaves_only_the_empty_history(tmp_path):
    db = tmp_path / "new" / "h.sqlite"
    store = RunStore(db)
    store.check_writable()
    store.check_writable()
    assert sorted(p.name for p in db.parent.iterdir()) == ["h.sqlite"]
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "runs" in tables and not any("probe" in t for t in tables), tables
    assert store.count() == 0


def test_a_can_generate_inputs_that_raises_is_one_line_exit_2(hostile):
    err = _one_line(_cli("--pipeline", f"{hostile}:CanGenRaises"))
    assert "CanGenRaises.can_generate_inputs raised RuntimeError: cannot tell" in err


def test_a_run_name_too_long_for_the_history_is_refused_before_the_run(tmp_path):
    """It used to measure, then fail to rename and save nothing useful; now one line."""
    proc = _main("run", "--requests", "5", "--warmup", "0", "--quiet", "--db",
                 tmp_path / "r.sqlite", "--name", "x" * 201)
    assert "at most 200 characters" in _one_line(proc)
    assert proc.stdout == ""
