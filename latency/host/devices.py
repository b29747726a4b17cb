"""Devices and dtypes: what exists here, and a clear error for what does not.

CUDA work is asynchronous: ``synchronize`` must run before any clock is read after device work,
or the forward time would measure only the kernel launch.
"""
from __future__ import annotations

import torch

from latency.core.errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def available_devices() -> list[str]:
    """``cpu`` plus ``cuda:N`` for every visible GPU."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return devices


def resolve_device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"unknown device {name!r}; available: "
                          f"{', '.join(available_devices())}") from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ConfigError(f"device {name!r} is not supported; available: "
                          f"{', '.join(available_devices())}")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} is not present on this machine (no CUDA); "
                          f"available: {', '.join(available_devices())}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r} is not present; available: "
                          f"{', '.join(available_devices())}")
    return torch.device("cuda", index)


def supported_dtypes(device: str) -> list[str]:
    """The dtypes this tool runs on ``device``: float16 on CPU is refused (slow emulation and
    missing kernels); bfloat16 on CUDA only where the GPU supports it."""
    dev = resolve_device(device)
    if dev.type == "cpu":
        return ["float32", "bfloat16"]
    out = ["float32", "float16"]
    with torch.cuda.device(dev):
        if torch.cuda.is_bf16_supported():
            out.insert(1, "bfloat16")
    return out


def check_device_dtype(device: str, dtype: str, pipeline_dtypes: tuple[str, ...]) -> None:
    """Raise ConfigError unless the pipeline can run in ``dtype`` on ``device``."""
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    ok = supported_dtypes(device)
    if dtype not in ok:
        raise ConfigError(f"dtype {dtype} is not supported on {device}; supported there: "
                          f"{', '.join(ok)}")
    if dtype not in pipeline_dtypes:
        raise ConfigError(f"this pipeline does not run in {dtype}; it supports: "
                          f"{', '.join(pipeline_dtypes)}")


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so the next clock reading includes it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
