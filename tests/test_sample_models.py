"""The three real sample pipelines: stages fit together, answers are right, bad input fails.

Accuracy checks use the held-out stream with its true labels (``data.*_samples``), so they catch
a pipeline whose preprocess drifted from what the model was trained on, not just a crash.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from latency.core.errors import PipelineError
from latency.pipelines.contract import Pipeline
from sample_models import data
from sample_models.image_cnn import ImageCNNPipeline
from sample_models.tabular_mlp import TabularMLPPipeline
from sample_models.text_transformer import TextTransformerPipeline
from tests.timing_support import watched

CPU = torch.device("cpu")
PIPELINES: dict[str, tuple[type[Pipeline], Callable[..., list[tuple[Any, str]]]]] = {
    "image-cnn": (ImageCNNPipeline, data.shape_samples),
    "text-transformer": (TextTransformerPipeline, data.text_samples),
    "tabular-mlp": (TabularMLPPipeline, data.loan_samples),
}


class _Built(dict):
    """(name, dtype) → pipeline, built on first use: cheap, but not free 30 times over."""

    def __missing__(self, key: tuple[str, torch.dtype]) -> Pipeline:
        self[key] = PIPELINES[key[0]][0](CPU, key[1])
        return self[key]


@pytest.fixture(scope="module")
def built() -> _Built:
    return _Built()


def run(p: Pipeline, raws: list[Any]) -> list[Any]:
    """All stages for one batch, as the engine calls them."""
    items = [p.preprocess(r) for r in raws]
    outputs = p.split(p.forward(p.collate(items)), len(items))
    assert len(outputs) == len(raws)
    return [p.postprocess(o) for o in outputs]


def check_response(name: str, p: Pipeline, r: Any) -> None:
    json.dumps(r)  # JSON-able
    assert r["label"] in p.labels
    if name == "image-cnn":
        assert len(r["top5"]) == 5 and r["top5"][0]["label"] == r["label"]
        scores = [t["score"] for t in r["top5"]]
        assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
        assert 0 < sum(scores) <= 1.0001
    else:
        key = "confidence" if name == "text-transformer" else "probability"
        assert set(r) == {"label", key} and isinstance(r[key], float)
        assert 1 / len(p.labels) <= r[key] <= 1


@pytest.mark.timing
@pytest.mark.parametrize("name", PIPELINES)
def test_builds_fast(name: str) -> None:
    cls = PIPELINES[name][0]
    with watched() as machine:
        t = time.perf_counter()
        cls(CPU, torch.float32)
        took = time.perf_counter() - t
    assert took < 1.0, (f"{name} took {took:.2f} s to build", machine.note())


@pytest.mark.parametrize("name", PIPELINES)
def test_lists_dtypes_and_refuses_others(name: str) -> None:
    cls = PIPELINES[name][0]
    cls(CPU, torch.float32)
    assert cls.name == name and cls.dtypes == ("float32", "bfloat16", "float16")
    with pytest.raises(PipelineError, match="supports dtypes"):
        cls(CPU, torch.float64)


@pytest.mark.parametrize("name", PIPELINES)
@pytest.mark.parametrize("batch", [8, 1])
def test_stages_give_responses(built, name: str, batch: int) -> None:
    p = built[name, torch.float32]
    raws = p.sample_inputs(16, seed=123)
    assert len(raws) == 16 and raws == p.sample_inputs(16, seed=123)  # deterministic
    for r in run(p, raws[:batch]):
        check_response(name, p, r)


@pytest.mark.parametrize("name", PIPELINES)
def test_sample_inputs_are_held_out(built, name: str) -> None:
    p, samples = built[name, torch.float32], PIPELINES[name][1]
    raws = p.sample_inputs(4, seed=0)
    assert raws == [r for r, _ in samples(4, 0, "heldout")]
    assert set(raws).isdisjoint(r for r, _ in samples(50, 0, "train"))
    assert samples(3, 5, "test", start=2) == samples(5, 5, "test")[2:]  # chunkable streams


@pytest.mark.parametrize("name, n, floor", [("image-cnn", 64, 0.6),
                                            ("text-transformer", 64, 0.6),
                                            ("tabular-mlp", 256, 0.78)])
def test_accuracy_on_held_out(built, name: str, n: int, floor: float) -> None:
    """Chance is 10% (shapes) and 17% (topics); the loan majority class is about 67%."""
    p = built[name, torch.float32]
    samples = PIPELINES[name][1](n, 321)
    got = [r["label"] for r in run(p, [raw for raw, _ in samples])]
    acc = sum(g == label for g, (_, label) in zip(got, samples)) / n
    assert acc > floor, f"{name} held-out accuracy {acc:.2f}"


@pytest.mark.parametrize("name", PIPELINES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_matches_float32(built, name: str, dtype: torch.dtype) -> None:
    raws = built[name, torch.float32].sample_inputs(8, seed=7)
    p16 = built[name, dtype]
    x = p16.preprocess(raws[0])
    assert (x[0] if isinstance(x, tuple) else x).device == CPU
    if name != "text-transformer":  # text keeps long ids; its model runs in ``dtype``
        assert x.dtype == dtype
    low = run(p16, raws)
    for r in low:
        check_response(name, p16, r)
    full = run(built[name, torch.float32], raws)
    assert sum(a["label"] == b["label"] for a, b in zip(low, full)) >= 7


def test_image_truncated_or_garbage_jpeg_raises(built) -> None:
    p = built["image-cnn", torch.float32]
    raw = p.sample_inputs(1, seed=123)[0]
    with pytest.raises(ValueError, match="cannot decode image"):
        p.preprocess(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="cannot decode image"):
        p.preprocess(b"not a jpeg at all")


def test_text_preprocess_pads_and_masks(built) -> None:
    p = built["text-transformer", torch.float32]
    ids, mask = p.preprocess("The striker scored a late goal, zzqxv!")
    assert ids.dtype == torch.long and mask.dtype == torch.bool and ids.shape == (128,)
    assert int(mask.sum()) == 8 and ids[0] == p.index["[CLS]"]  # [CLS] + 7 words
    assert ids[7] == p.index["[UNK]"] and not ids[8:].any()
    ids, mask = p.preprocess("word " * 500)
    assert mask.all()  # truncated to max_len
    assert run(p, ["", "rain and snow"])[1]["label"] == "weather"  # empty text still answers


def test_tabular_rejects_bad_records(built) -> None:
    p = built["tabular-mlp", torch.float32]
    record = json.loads(p.sample_inputs(1, seed=123)[0])
    with pytest.raises(ValueError, match="not valid JSON"):
        p.preprocess('{"age": 30, "income": ')
    with pytest.raises(ValueError, match="missing field.*credit_score"):
        p.preprocess(json.dumps({k: v for k, v in record.items() if k != "credit_score"}))
    with pytest.raises(ValueError, match="must be a finite number"):
        p.preprocess(json.dumps({**record, "age": "thirty"}))
    with pytest.raises(ValueError, match="JSON object"):
        p.preprocess("[1, 2, 3]")
    # an unknown category is not an error: it one-hots to zeros and still gets an answer
    check_response("tabular-mlp", p, run(p, [json.dumps({**record, "home": "boat"})])[0])
