"""Determinism levels and device types as process settings.

D0 keeps each EST's state apart (elasticity only). D1 adds deterministic kernels
(``torch.use_deterministic_algorithms``, the device type's fixed intra-op thread count, one
inter-op thread) and a gradient sum in EST-index order. D2 makes every device type compute
the same bits. What that takes was measured on this lab's CPU (AMD EPYC, AVX-512, torch
2.13): on a small CNN with biased convolutions, oneDNN capped at AVX2 with
``MKL_CBWR=AVX2,STRICT`` made 1- and 2-thread processes agree; on ``bn_cnn`` (bias-free
convolutions, BatchNorm) it does not: the 2-thread gradients differ in every parameter, and
ATen's vectorised kernels differ between AVX2 and AVX-512 too. So D2 here pins all three
ISA settings to AVX2 and the intra-op threads to 1, whatever the device type: the CPU
counterpart of forcing one kernel choice on every GPU model, and it costs speed. These
variables are read when torch loads its libraries, so ``process_env`` is applied before
``import torch``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from lab.bench.easyscale.config import DeviceSpec

D2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2,STRICT"}
_ISA_ENV = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
}
_ALL_KEYS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")


def effective_device(device: DeviceSpec, d2: bool) -> DeviceSpec:
    """The settings a process of this device type runs with: D2 overrides threads and ISA."""
    return DeviceSpec(device.name, 1, "avx2") if d2 else device


def process_env(device: DeviceSpec, d2: bool) -> dict[str, str]:
    """The variables that make this process the given device type at this level."""
    device = effective_device(device, d2)
    env = dict(D2_ENV) if d2 else dict(_ISA_ENV[device.isa])
    env["OMP_NUM_THREADS"] = str(device.threads)
    return env


def apply_env(env: dict[str, str]) -> None:
    """Set ``env`` for this process and drop inherited ISA settings it does not name.

    Raises:
        RuntimeError: torch is already imported, so the settings would not take effect.
    """
    if "torch" in sys.modules:
        raise RuntimeError("device settings must be applied before torch is imported")
    for key in _ALL_KEYS:
        os.environ.pop(key, None)
    os.environ.update(env)


def configure_torch(device: DeviceSpec, d1: bool) -> dict[str, Any]:
    """Thread counts and, at D1, deterministic kernels; returns what is now in effect."""
    import torch

    torch.set_num_threads(device.threads)
    with contextlib.suppress(RuntimeError):  # already set once in this process
        torch.set_num_interop_threads(1)
    if d1:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    return {
        "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "onednn_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "native"),
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
    }
