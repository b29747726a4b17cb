"""Every sample pipeline runs end to end through the engine on its own raw inputs, and bad raw
input fails alone."""
import pytest

from latency.core.config import RunConfig
from latency.execution.engine import execute
from latency.pipelines.registry import build_pipeline, list_pipelines


@pytest.mark.parametrize("model", ["image-cnn", "text-transformer", "tabular-mlp"])
def test_real_pipeline_runs_under_load_with_batching(model):
    r = execute(RunConfig(model=model, concurrency=8, batch_size=4, max_batch_delay_ms=2,
                          threads=1, requests=120, warmup=8, input_pool=16))
    s = r.summary
    assert r.status == "completed" and s.errors == 0 and s.requests == 120
    assert s.batch_size_mean > 1
    for comp in ("preprocess", "forward", "postprocess"):
        assert s.components_ms[comp].p50 > 0
    assert r.environment["torch"] and r.timings.model_load_s < 10


def test_a_truncated_jpeg_fails_alone_and_the_run_goes_on():
    import torch

    good = build_pipeline("image-cnn", torch.device("cpu"), torch.float32,
                          {}).sample_inputs(4, seed=5)
    inputs = good + [good[0][: len(good[0]) // 2]]  # every fifth request is corrupt
    r = execute(RunConfig(model="image-cnn", concurrency=2, requests=100, warmup=0),
                inputs=inputs)
    s = r.summary
    assert r.status == "completed"
    assert s.errors == 20 and s.successful == 80
    (message, count), = s.error_messages.items()
    assert count == 20 and message.startswith("preprocess:") and "decode" in message


def test_registry_lists_every_pipeline_with_a_description():
    names = {i.name: i for i in list_pipelines()}
    assert set(names) == {"image-cnn", "text-transformer", "tabular-mlp", "synthetic", "model-file",
                          "synthetic-lm", "tiny-lm"}
    assert all(len(i.description) > 20 for i in names.values())
    # the generative ones say so (they are run as generations, not one request at a time)
    assert {n for n, i in names.items() if i.generative} == {"synthetic-lm", "tiny-lm"}
