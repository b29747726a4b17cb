"""Levers: each applies and the pipeline still answers; pruning changes shapes (or not) as it
claims; int8 keeps the trained models' answers; naive variants answer the same, slower; bad
levers fail with one line."""
import time

import pytest
import torch
from torch import nn

from latency.cli.main import main
from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.validate import validated
from latency.pipelines import levers as optimize
from latency.pipelines.registry import build_pipeline, parse_model_args
from tests.timing_support import watched

REAL = ("image-cnn", "text-transformer", "tabular-mlp")


def pipeline(name):
    return build_pipeline(name, torch.device("cpu"), torch.float32, parse_model_args(name, {}))


def answers(p, raws, batch=4):
    items = [p.preprocess(r) for r in raws]
    out = []
    with torch.inference_mode():
        for i in range(0, len(items), batch):
            part = items[i: i + batch]
            out += p.split(p.forward(p.collate(part)), len(part))
    return [p.postprocess(o) for o in out]


def shapes(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()
            if isinstance(v, torch.Tensor)}


def levers_for(name):
    out = ["int8", "prune_unstructured", "prune_structured"]
    if name == "image-cnn":
        out.append("channels_last")
    if optimize.bf16_unsupported_reason("cpu") is None:
        out.append("bf16")
    return out


@pytest.mark.parametrize("name", REAL)
def test_each_lever_applies_and_the_pipeline_still_answers(name):
    raws = pipeline(name).sample_inputs(6, 3)
    for lever in levers_for(name):
        p = pipeline(name)
        report = optimize.prepare(p, [lever], "fast", "fast", batch_size=4, check_inputs=16)
        assert [lv.name for lv in report.levers] == [lever]
        assert report.levers[0].backend
        assert report.agreement is not None and 0.0 <= report.agreement <= 1.0
        assert report.steady_ms > 0 and report.first_call_ms > 0
        responses = answers(p, raws)
        assert len(responses) == 6
        assert all(r["label"] in p.labels for r in responses), lever


def test_compile_applies_and_reports_compile_time_apart():
    p = pipeline("tabular-mlp")
    raws = p.sample_inputs(5, 1)
    before = [r["label"] for r in answers(p, raws)]
    report = optimize.prepare(p, ["compile"], "fast", "fast", batch_size=4, check_inputs=8)
    assert report.compile_s is not None and report.compile_s > 0
    # the first call paid the compilation; the steady call did not
    assert report.first_call_ms > report.steady_ms
    assert [r["label"] for r in answers(p, raws)] == before
    assert report.agreement == 1.0


def test_unstructured_pruning_zeroes_weights_but_changes_no_shape():
    p = pipeline("image-cnn")
    before = shapes(p.model)
    report = optimize.prepare(p, ["prune_unstructured"], "fast", "fast", check_inputs=8)
    assert shapes(p.model) == before
    convs = [m for m in p.model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    zero = sum(int((m.weight == 0).sum()) for m in convs)
    total = sum(m.weight.numel() for m in convs)
    assert zero / total == pytest.approx(optimize.PRUNE_AMOUNT, abs=0.02)
    assert report.params_after == report.params_before


@pytest.mark.parametrize("name", REAL)
def test_structured_pruning_really_removes_units(name):
    p = pipeline(name)
    before = shapes(p.model)
    report = optimize.prepare(p, ["prune_structured"], "fast", "fast", check_inputs=8)
    after = shapes(p.model)
    changed = [k for k in before if k in after and before[k] != after[k]]
    assert changed, "no layer got smaller"
    assert all(sum(after[k]) < sum(before[k]) for k in changed)
    assert report.params_after < 0.8 * report.params_before
    assert all(r["label"] in p.labels for r in answers(p, p.sample_inputs(4, 2)))


@pytest.mark.parametrize("name", REAL)
def test_int8_keeps_top1_agreement_high_on_the_trained_models(name):
    p = pipeline(name)
    report = optimize.prepare(p, ["int8"], "fast", "fast", batch_size=8)
    assert report.inputs == optimize.CHECK_INPUTS
    assert report.agreement >= 0.95, report.lines()
    assert report.max_abs_diff < 0.3


def _best_of(fn, raws, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for r in raws:
            fn(r)
        best = min(best, time.perf_counter() - t)
    return best


def _fast_and_naive(name):
    p = pipeline(name)
    q = pipeline(name)
    optimize.prepare(q, [], "naive", "naive", check_inputs=4)
    return p, q


@pytest.mark.parametrize("name", REAL)
def test_naive_pre_and_post_give_the_same_answers(name):
    p, q = _fast_and_naive(name)
    raws = p.sample_inputs(24, 11)
    assert [r["label"] for r in answers(q, raws)] == [r["label"] for r in answers(p, raws)]


@pytest.mark.timing
@pytest.mark.parametrize("name", REAL)
def test_naive_pre_is_slower(name):
    p, q = _fast_and_naive(name)
    raws = p.sample_inputs(8, 11)
    with watched() as machine, torch.inference_mode():
        t_fast = _best_of(p.preprocess, raws)
        t_naive = _best_of(q.preprocess, raws)
    # measured side by side: 10-600x here
    assert t_naive > 2 * t_fast, (t_naive, t_fast, machine.note())


def test_naive_postprocess_serialises_every_class():
    p = pipeline("image-cnn")
    with torch.inference_mode():
        out = p.forward(p.collate([p.preprocess(r) for r in p.sample_inputs(1, 0)]))[0]
    naive = p.postprocess_naive(out)
    assert set(naive["scores"]) == set(p.labels)
    assert sum(naive["scores"].values()) == pytest.approx(1.0)
    assert naive["label"] == p.postprocess(out)["label"]


def test_bf16_refuses_without_native_support_with_the_reason():
    reason = optimize.bf16_unsupported_reason("cpu", flags={"avx2", "fma"})
    assert reason and "AVX512-BF16" in reason and "\n" not in reason
    assert optimize.bf16_unsupported_reason("cpu", flags={"avx512_bf16"}) is None
    assert optimize.bf16_unsupported_reason("cpu", flags={"amx_bf16"}) is None


@pytest.mark.parametrize("args, needle", [
    (["--model", "tabular-mlp", "--optimize", "warp"], "unknown lever"),
    (["--model", "text-transformer", "--optimize", "channels_last"], "convolutional"),
    (["--model", "synthetic", "--optimize", "int8"], "no torch model"),
    (["--model", "synthetic", "--pre", "naive"], "no naive preprocessing"),
    (["--model", "tabular-mlp", "--post", "slow"], "--post must be one of"),
    (["--model", "tabular-mlp", "--optimize", "int8", "--dtype", "bfloat16"], "float32"),
    (["--model", "tabular-mlp", "--optimize", "int8,bf16"], "choose one"),
])
def test_cli_bad_levers_fail_with_one_line(capsys, args, needle):
    assert main(["run", *args, "--requests", "5", "--no-save"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bf16_on_a_cpu_without_support_is_refused_before_it_runs(monkeypatch):
    """The run process validates the levers (the CLI refuses what it refuses in one line,
    exit 2: tests/test_run_process_isolation.py); a CPU without bf16 maths is such a refusal.
    Checked where the check runs, since a CPU's flags cannot be patched across processes."""
    monkeypatch.setattr(optimize, "cpu_flags", lambda: {"avx2"})
    with pytest.raises(ConfigError) as err:
        validated(RunConfig(model="tabular-mlp", optimize="bf16", requests=5))
    assert len(str(err.value).splitlines()) == 1
    assert "neither AVX512-BF16 nor AMX" in str(err.value)


def test_cli_run_with_levers_prints_their_effect_on_the_answers(capsys):
    code = main(["run", "--model", "tabular-mlp", "--optimize", "int8,prune_structured",
                 "--pre", "naive", "--requests", "30", "--warmup", "3", "--quiet",
                 "--no-save"])
    out = capsys.readouterr().out
    assert code == 0
    assert "lever int8: torch.ao.quantization.quantize_dynamic" in out
    assert "lever prune_structured" in out and "layer 0: 64→32 neurons" in out
    assert "top-1 agreement" in out and "variants: preprocess naive" in out


def test_config_keeps_levers_in_order_and_normalised():
    c = validated(RunConfig(model="image-cnn", optimize="int8, channels-last,int8"))
    assert c.optimize == ["int8", "channels_last"]
    with pytest.raises(ConfigError):
        validated(RunConfig(model="image-cnn", optimize=["fast"]))


def test_int8_backend_choice_is_measured_and_torchao_failure_is_said(monkeypatch):
    assert optimize.fastest({"torch.ao": 2.0, "torchao": 1.5}) == "torchao"
    assert optimize.fastest({"torch.ao": 1.5, "torchao": 1.5}) == "torch.ao"
    import sys
    import types

    fake = types.ModuleType("torchao.quantization")

    def quantize_(model, config):
        raise RuntimeError("no kernel for this CPU")

    fake.quantize_ = quantize_
    fake.Int8DynamicActivationInt8WeightConfig = lambda: None
    monkeypatch.setitem(sys.modules, "torchao", types.ModuleType("torchao"))
    monkeypatch.setitem(sys.modules, "torchao.quantization", fake)
    p = pipeline("tabular-mlp")
    report = optimize.prepare(p, ["int8"], "fast", "fast", check_inputs=8)
    lv = report.levers[0]
    assert lv.backend.startswith("torch.ao.quantization.quantize_dynamic")
    assert any("torchao failed: RuntimeError: no kernel for this CPU" in n for n in lv.notes)
