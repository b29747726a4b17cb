"""The environment a result was measured in: without it a number is noise."""
from __future__ import annotations

import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latency.host.cores import usable_cores

#: CPU flags that change what a model's forward pass costs.
INTERESTING_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16",
                     "amx_int8", "amx_tile", "asimd", "sve")


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key and key not in info:
                info[key] = value.strip()
    except OSError:
        pass
    return info


def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    flags = set((_cpuinfo().get("flags") or _cpuinfo().get("Features") or "").split())
    return [f for f in INTERESTING_FLAGS if f in flags]


def git_commit() -> str | None:
    """The commit of the code being measured, if it lives in a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parent)
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5,
                               cwd=Path(__file__).resolve().parent).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def collect(device: torch.device, dtype: str, threads: int, replicas: int) -> dict[str, Any]:
    """Versions, CPU model and flags, cores, device, threads, dtype and git commit."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": usable_cores(),
        "device": str(device),
        "device_name": device_name(device),
        "dtype": dtype,
        "threads_per_replica": threads,
        "replicas": replicas,
        "torch_num_threads_default": torch.get_num_threads(),
        "git_commit": git_commit(),
        "pid": os.getpid(),
    }
    if device.type == "cuda":
        env["cuda"] = torch.version.cuda
    return env
