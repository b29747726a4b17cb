"""``models``, ``new-pipeline`` and ``export``: the pipelines you can profile, a template for
your own, and a model written out as a file.

    python -m latency models [--pipeline examples/sentiment_pipeline.py:SentimentPipeline]
    python -m latency new-pipeline my_pipeline.py        # a commented template that runs as is
    python -m latency export --model image-cnn --to cnn.onnx        # or .pt2
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from latency.cli.args import EXIT_OK
from latency.cli.config_flags import add_config_flags
from latency.core.config import EXPORT
from latency.core.errors import ConfigError

TEMPLATE = Path(__file__).resolve().parent / "templates" / "my_pipeline.py.tmpl"


def add_parsers(sub: Any, fmt: Any) -> None:
    m = sub.add_parser("models", help="list the pipelines you can profile", formatter_class=fmt)
    m.add_argument("--pipeline", action="append", default=[], metavar="SPEC",
                   help="also list this pipeline (module.path:Name or file.py:Name; "
                        "repeatable)")
    n = sub.add_parser("new-pipeline", help="write a commented pipeline template that runs as "
                                            "is", formatter_class=fmt)
    n.add_argument("file", help="the .py file to write")
    n.add_argument("--force", action="store_true", help="overwrite an existing file")
    e = sub.add_parser("export", help="write a pipeline's torch model as ONNX or torch.export "
                                      "(.pt2), to profile with --model-file",
                       formatter_class=fmt,
                       description="Only a pipeline with a torch model can be exported: name "
                                   "one, e.g. --model image-cnn (the default, synthetic, has "
                                   "none).")
    add_config_flags(e, EXPORT)
    e.add_argument("--to", required=True, metavar="FILE", help="cnn.onnx or cnn.pt2")
    e.add_argument("--force", action="store_true", help="overwrite an existing file")


def cmd_new_pipeline(a: argparse.Namespace) -> int:
    from latency.storage.outputs import check_output, write_atomic

    path = Path(a.file)
    if path.suffix != ".py":
        raise ConfigError(f"{a.file}: a pipeline file ends in .py")
    check_output(path, "new-pipeline", force=a.force)
    write_atomic(path, TEMPLATE.read_text())
    print(f"wrote {path}: try it as it is, then make it yours —\n"
          f"  python -m latency run --pipeline {path}:MyPipeline --concurrency 4 "
          "--requests 500")
    return EXIT_OK


def cmd_export(a: argparse.Namespace) -> int:
    from latency.pipelines.export import export
    from latency.storage.outputs import check_output

    check_output(a.to, "--to", force=a.force)
    check_output(f"{a.to}.json", "--to (its .json)", force=a.force)
    out = export(a.model, a.to, a.pipeline)
    print(f"wrote {out['file']} ({out['seconds']:.1f} s) and {out['settings']} "
          f"(the pipeline's own pre/postprocessing, so `run --model-file {out['file']}` "
          f"serves what `run --model {out['pipeline']}` does); inputs "
          + ", ".join("×".join(map(str, s)) for s in out["inputs"]) + ", batch dimension "
          "dynamic")
    return EXIT_OK
