"""The lesson "a 40% faster model, the same latency", as runnable plans (no figures in here).

The preset is a real pipeline written the way a beginner would write it: image-cnn with the
naive preprocessing (pixel loops in Python), batching on, eight clients keeping the server
saturated. Step one quantises the model (``int8``): the forward pass gets much faster, the
requests barely do, because the forward pass was a small share of the time and the queue in
front of the slow preprocessing does not care. Step two applies the levers that do help.
Everything the lesson shows is measured when it runs; this module only says what to run.
"""
from __future__ import annotations

from latency.core.config import RunConfig
from latency.execution.ab import ABPlan, variant_config

#: the saturated beginner's server: naive pre/postprocessing on one worker thread, batches
#: of up to 8 (40 ms to fill: preprocessed requests trickle in, and int8 pays off from batches
#: of two up), eight clients always waiting.
LESSON_SETTINGS = dict(model="image-cnn", pre="naive", post="naive", batch_size=8,
                       max_batch_delay_ms=40.0, replicas=1, threads=1, preprocess_workers=1,
                       concurrency=8, warmup=8)


def lesson_baseline(duration_s: float = 2.0) -> RunConfig:
    return RunConfig(duration_s=duration_s, **LESSON_SETTINGS)  # type: ignore[arg-type]


def quantise_plan(duration_s: float = 2.0, pairs: int = 2) -> ABPlan:
    """Step 1: the same server with an int8 model."""
    base = lesson_baseline(duration_s)
    return ABPlan(base, variant_config(base, optimize=["int8"]), pairs)


def helping_plan(duration_s: float = 2.0, pairs: int = 2) -> ABPlan:
    """Step 2: keep int8 and fix what the bars point at — vectorised pre/postprocessing and
    a second preprocess worker."""
    base = lesson_baseline(duration_s)
    return ABPlan(base, variant_config(base, optimize=["int8"], pre="fast", post="fast",
                                       preprocess_workers=4), pairs)
