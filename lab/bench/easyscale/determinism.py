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

On CUDA (paper scale), D1 is ``torch.use_deterministic_algorithms(True)`` (the flag below),
``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (cuBLAS's split reductions in a fixed order; read when
cuBLAS starts, so it too is set before torch), cuDNN's deterministic algorithms and no
autotuning (``benchmark`` picks kernels by timing, which differs run to run). That makes a
GPU model repeat its own bits. D2 across GPU *types* is another matter: the paper made a
V100 and a P100 compute the same bits with its own kernels, which were never published.
cuDNN and cuBLAS choose their algorithms, tile sizes and split-K per architecture, and no
switch of theirs makes two architectures agree. What the lab does at D2 on CUDA is remove
the differences it can name: TF32 and reduced-precision reductions off (an Ampere or newer
GPU otherwise multiplies in TF32 where a V100 cannot), deterministic algorithms, no
autotuning. Within one GPU model D1+D2 is then bitwise repeatable; across models it is not
guaranteed, and Fig 9's verdict on such a stage is measured from the recorded loss bits,
not assumed.
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
_ALL_KEYS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "CUBLAS_WORKSPACE_CONFIG")
CUBLAS_D1 = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def effective_device(device: DeviceSpec, d2: bool) -> DeviceSpec:
    """The settings a process of this device type runs with: D2 overrides threads and ISA."""
    return DeviceSpec(device.name, 1, "avx2") if d2 else device


def process_env(
    device: DeviceSpec, d2: bool, d1: bool = False, kind: str = "cpu"
) -> dict[str, str]:
    """The variables that make this process the given device type at this level (on
    ``kind="cuda"`` with D1 also cuBLAS's fixed-order workspace)."""
    device = effective_device(device, d2)
    env = dict(D2_ENV) if d2 else dict(_ISA_ENV[device.isa])
    env["OMP_NUM_THREADS"] = str(device.threads)
    if kind == "cuda" and d1:
        env.update(CUBLAS_D1)
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


def deterministic_kernels(torch: Any) -> None:
    """Turn on deterministic eager kernels.

    ``torch.use_deterministic_algorithms`` also sets the flag of torch.compile's code
    generator, and importing that configuration loads the compiler stack: about 2 s of CPU
    in every rank, more than importing torch itself. The lab runs eager kernels only, so it
    sets the kernels' flag alone where torch exposes it (the same call the public function
    ends with), and falls back to the public function where it does not.
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(True)
    else:
        setter(True, warn_only=False)


def configure_torch(
    device: DeviceSpec, d1: bool, d2: bool = False, kind: str = "cpu"
) -> dict[str, Any]:
    """Thread counts and, at D1, deterministic kernels (on CUDA also cuDNN's); at D2 on CUDA
    TF32 and reduced-precision reductions off. Returns what is now in effect."""
    import torch

    torch.set_num_threads(device.threads)
    with contextlib.suppress(RuntimeError):  # already set once in this process
        torch.set_num_interop_threads(1)
    if d1:
        deterministic_kernels(torch)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    gpu = {}
    if kind == "cuda":
        if d2:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        gpu = {
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cublas_workspace": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
            "d2_scope": "one GPU model (vendor kernels differ across models)" if d2 else "",
        }
    return {
        "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "onednn_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "native"),
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        **gpu,
    }
