"""``--model-file``: profile a model file without writing a Pipeline class.

- ``.onnx`` runs in **ONNX Runtime** (``pip install -r requirements-onnx.txt``): a second
  runtime, so "PyTorch eager vs ONNX Runtime" is a measured comparison of the same model.
- ``.pt2`` is a ``torch.export`` program, run by torch. Loading one unpickles Python objects, so
  it needs ``--trust-model-file`` (``trust=true``); ONNX and safetensors load without it.
- The sidecar ``<file>.json`` may name a pipeline whose stages serve the model. Without
  ``--trust-model-file`` only a built-in sample: a file exported from your own pipeline names
  that pipeline's code (``spec``), and a model file someone sent you must not run code by
  being profiled.

The stages around the model are stock (``latency.pipelines.stock``: ``--pre image|text|tensor``,
``--post topk|argmax|raw``, sizes and normalisation as model-args). A ``<file>.json`` beside the
model (``python -m latency export`` writes one) supplies their settings — and, when it names the
sample pipeline the model came from, that sample's own pre/postprocessing and inputs, so the
exported model serves exactly what the original does and only the runtime differs.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from latency.core.errors import PipelineError
from latency.pipelines.contract import ModelArg, Pipeline, parse_bool
from latency.pipelines.registry import SAMPLES
from latency.pipelines.stock import POST, PRE, ImagePre, Post, TextPre, tensor_pre

FORMATS = (".onnx", ".pt2")
#: the largest sizes a model-arg (or the sidecar) may set: each request's tensor is sized by
#: them (a 4,096² RGB crop is 200 MB in float32; 10**9 would ask for exabytes)
MAX_IMAGE_SIDE = 4096
MAX_TEXT_LEN = 65_536
MAX_TOP_K = 100_000
#: sidecar keys checked against the range of a model-arg (``crop`` is ``image_size``)
SIDECAR_SIZES = {"image_size": "image_size", "crop": "image_size", "resize": "resize",
                 "max_len": "max_len", "top_k": "top_k"}
NO_LEVERS = ("levers change a torch model in this process; a model file runs as exported "
             "(ONNX Runtime applies its own graph optimisations): compare runtimes instead — "
             "the sample pipeline against its exported file")


def _floats(text: str) -> list[float]:
    return [float(v) for v in str(text).split(",") if v.strip()]


def sidecar(path: str | Path) -> dict[str, Any]:
    """The settings beside a model file (``cnn.onnx.json``), or {}."""
    side = Path(f"{path}.json")
    if not side.is_file():
        return {}
    try:
        data = json.loads(side.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PipelineError(f"{side}: not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _check_named_code(path: Path, side: dict[str, Any], trusted: bool) -> None:
    """A sidecar that names code other than a built-in sample needs ``--trust-model-file``."""
    sample, spec = side.get("sample"), side.get("spec")
    if trusted or (spec is None and (sample is None or (sample in SAMPLES
                                                        and sample != "model-file"))):
        return
    named = f"the pipeline {spec}" if spec is not None else f"the pipeline {sample!r}"
    raise ValueError(f"--model-file {path}: its {path.name}.json names {named}, whose code "
                     "would run to serve the model; add --trust-model-file if you trust its "
                     "source (without it only the built-in samples' stages are used)")


def _onnx_session(path: str, device: torch.device, threads: int) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        raise PipelineError("an .onnx model runs in ONNX Runtime: pip install -r "
                            "requirements-onnx.txt") from None
    providers = ["CPUExecutionProvider"]
    if device.type == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise PipelineError("this ONNX Runtime has no CUDA provider (pip install "
                                "onnxruntime-gpu), so the model cannot run on " + str(device))
        providers = [("CUDAExecutionProvider", {"device_id": device.index or 0}),
                     "CPUExecutionProvider"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: a run's log is for the run
    try:
        return ort.InferenceSession(path, options, providers=providers)
    except Exception as exc:  # noqa: BLE001 - a corrupt or unsupported file: one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PipelineError(f"cannot load {path} in ONNX Runtime: {text[:300]}") from None


def _check_sidecar_sizes(path: Path, side: dict[str, Any], declared: dict[str, ModelArg]
                         ) -> None:
    """The sizes a sidecar sets lie in the range the model-arg of the same name allows."""
    for key, arg_name in SIDECAR_SIZES.items():
        value = side.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            dataclasses.replace(declared[arg_name], name=key).check(
                value, where=f"--model-file {path}: its {path.name}.json sets")


class _OnnxModel:
    """An ONNX Runtime session called like a module: tensors in, a tensor out."""

    def __init__(self, path: str, device: torch.device, threads: int) -> None:
        self.session = _onnx_session(path, device, threads)
        self.names = [i.name for i in self.session.get_inputs()]
        self.device = device

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor:
        feeds = {n: t.detach().cpu().numpy() for n, t in zip(self.names, tensors)}
        return torch.from_numpy(self.session.run(None, feeds)[0]).to(self.device)


def _load_pt2(path: str, device: torch.device) -> Any:
    try:
        program = torch.export.load(path)
    except Exception as exc:  # noqa: BLE001 - a corrupt file: one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PipelineError(f"cannot load {path} as a torch.export program: {text[:300]}") \
            from None
    return program.module().to(device)


class ModelFilePipeline(Pipeline):
    name = "model-file"
    description = ("an ONNX (ONNX Runtime) or torch.export .pt2 model file with stock "
                   "pre/postprocessing (--model-file FILE --pre image|text|tensor)")
    dtypes = ("float32",)
    model_kind = None
    no_levers_reason = NO_LEVERS
    model_args = (
        ModelArg("file", str, "", "the model: .onnx (ONNX Runtime) or .pt2 (torch.export)"),
        ModelArg("pre", str, "", "stock preprocessing: image, text or tensor (default: the "
                 "file's .json, else required)", ("",) + PRE),
        ModelArg("post", str, "", "stock postprocessing: topk, argmax or raw (default topk)",
                 ("",) + POST),
        ModelArg("image_size", int, 0, "image: side of the centre crop (default: .json or 224)",
                 low=1, high=MAX_IMAGE_SIDE),
        ModelArg("resize", int, 0, "image: shorter side before the crop (default: .json or "
                 "256)", low=1, high=MAX_IMAGE_SIDE),
        ModelArg("mean", str, "", "image: per-channel mean, e.g. 0.485,0.456,0.406"),
        ModelArg("std", str, "", "image: per-channel std, e.g. 0.229,0.224,0.225"),
        ModelArg("vocab", str, "", "text: vocabulary file, one token a line"),
        ModelArg("max_len", int, 0, "text: padded length (default: .json or 128)",
                 low=1, high=MAX_TEXT_LEN),
        ModelArg("labels", str, "", "label file, one a line (default: .json, else indices)"),
        ModelArg("top_k", int, 5, "topk: how many labels to return", low=1, high=MAX_TOP_K),
        ModelArg("trust", parse_bool, False, "load a .pt2 (it unpickles Python objects): only "
                 "files from a source you trust"),
    )

    @classmethod
    def check_args(cls, args: dict[str, Any]) -> None:
        super().check_args(args)  # the declared ranges
        path = Path(args.get("file") or "")
        if not args.get("file"):
            raise ValueError("model-file needs --model-file FILE (.onnx or .pt2)")
        if path.suffix.lower() not in FORMATS:
            raise ValueError(f"--model-file {path}: expected .onnx or .pt2, not "
                             f"{path.suffix or 'no suffix'}")
        if not path.is_file():
            raise ValueError(f"--model-file {path}: no such file")
        if path.suffix.lower() == ".pt2" and not args.get("trust"):
            raise ValueError(f"--model-file {path}: loading a .pt2 unpickles Python objects, "
                             "which can run code; add --trust-model-file if you trust its "
                             "source (ONNX files load without it)")
        side = sidecar(path)
        _check_named_code(path, side, bool(args.get("trust")))
        _check_sidecar_sizes(path, side, {a.name: a for a in cls.model_args})
        settings = {**side, **{k: v for k, v in args.items() if v}}
        if not settings.get("pre") and not settings.get("sample"):
            raise ValueError(f"--model-file {path}: say how to preprocess its inputs: --pre "
                             f"{'|'.join(PRE)} (no {path.name}.json beside it)")
        if path.suffix.lower() == ".onnx":
            _onnx_session(str(path), torch.device("cpu"), 1)  # a corrupt file fails here

    @classmethod
    def can_generate_inputs(cls, args: dict[str, Any]) -> bool:
        return bool(sidecar(args.get("file") or "").get("sample"))

    def __init__(self, device: torch.device | str = "cpu",
                 dtype: torch.dtype | str = torch.float32, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        path = str(args.get("file") or "")
        self.check_args({"file": path, **args})
        given = {k: v for k, v in args.items() if v not in ("", 0, None)}
        self.settings = s = {**sidecar(path), **given}
        if path.lower().endswith(".onnx"):
            self.model = _OnnxModel(path, self.device, torch.get_num_threads())
            self.runtime = "ONNX Runtime"
        else:
            self.model = _load_pt2(path, self.device)
            self.runtime = "torch.export"
        self.sample: Pipeline | None = None
        if s.get("sample") and not args.get("pre"):
            from latency.pipelines.registry import build_pipeline  # the sample's own stages

            self.sample = build_pipeline(s["sample"], self.device, self.dtype, {},
                                         spec=s.get("spec"))
            self.preprocess = self.sample.preprocess  # type: ignore[method-assign]
            self.collate = self.sample.collate  # type: ignore[method-assign]
            self.split = self.sample.split  # type: ignore[method-assign]
            if not args.get("post"):
                self.postprocess = self.sample.postprocess  # type: ignore[method-assign]
        else:
            self._pre = self._stock_pre(s)
        labels = s.get("labels") or []
        if isinstance(labels, str):
            labels = [w for w in Path(labels).read_text().splitlines() if w.strip()]
        self._post = Post(s.get("post") or "topk", labels, int(s.get("top_k") or 5))

    def _stock_pre(self, s: dict[str, Any]) -> Any:
        kind = s["pre"]
        if kind == "image":
            mean = _floats(s["mean"]) if isinstance(s.get("mean"), str) else s.get("mean")
            std = _floats(s["std"]) if isinstance(s.get("std"), str) else s.get("std")
            return ImagePre(int(s.get("image_size") or s.get("crop") or 224),
                            int(s.get("resize") or 256), mean or (0.485, 0.456, 0.406),
                            std or (0.229, 0.224, 0.225))
        if kind == "text":
            vocab = s.get("vocab") or []
            if isinstance(vocab, str):
                vocab = [w for w in Path(vocab).read_text().splitlines() if w]
            n_inputs = len(self.model.names) if isinstance(self.model, _OnnxModel) else 2
            return TextPre(vocab, int(s.get("max_len") or 128), with_mask=n_inputs > 1)
        return tensor_pre

    # ---- inputs and stages ------------------------------------------------------------------
    def sample_inputs(self, n: int, seed: int) -> list[Any]:
        if self.sample is None and self.settings.get("sample"):
            from latency.pipelines.registry import build_pipeline

            self.sample = build_pipeline(self.settings["sample"], self.device, self.dtype, {},
                                         spec=self.settings.get("spec"))
        if self.sample is not None:
            return self.sample.sample_inputs(n, seed)
        return super().sample_inputs(n, seed)

    def preprocess(self, raw: Any) -> Any:
        item = self._pre(raw)
        if isinstance(item, tuple):
            return tuple(t.to(self.device) for t in item)
        return item.to(self.device)

    def forward(self, batch: Any) -> Any:
        args = batch if isinstance(batch, tuple) else (batch,)
        return self.model(*args)

    def postprocess(self, item: Any) -> Any:
        return self._post(item)
