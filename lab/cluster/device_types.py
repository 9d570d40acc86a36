"""Device types of a cluster profile: what makes one host's ranks compute other bits.

A profile may name kinds of devices and give each host one::

    device_types:
      fast: {threads: 2, isa: native}
      slow: {threads: 1, isa: avx2, cpu: 0.4}
    hosts: [{name: node1, slots: 2, device_type: fast}, ...]
    host_device_types: {h2: slow}      # by host name; also for emulated hosts

GPU kinds at paper scale name the accelerator and the GPU model the host carries::

    device_types:
      v100: {kind: cuda, gpu: V100}
      p100: {kind: cuda, gpu: P100, threads: 4}

Threads and ISA change the bits a CPU rank computes (as GPU models do); ``cpu`` is a share
of cores, applied as the emulated host's cgroup quota, and changes only speed. ``kind:
cuda`` puts a rank on its host's GPU (threads and ISA then govern only its CPU side);
``gpu`` is the model the hosts of that type carry, as the paper's figures name it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from lab.errors import HostSpecError

DEVICE_ISAS = ("native", "avx2", "avx512")
DEVICE_KINDS = ("cpu", "cuda")
_KEYS = {"threads", "isa", "cpu", "kind", "gpu"}


@dataclass(frozen=True)
class DeviceType:
    """A kind of device, as a CPU process can be one: the intra-op threads and instruction
    set its kernels use (these change the bits a step computes, as a V100 and a P100 differ)
    and the CPU share it gets (cgroup quota on emulated hosts; it changes only speed).

    Args:
        name: the name hosts refer to it by.
        threads: intra-op threads of each rank.
        isa: ``native``, ``avx2`` or ``avx512``: the ISA ATen and oneDNN may use.
        cpu: cores per host (emulated clusters), None for no limit.
        kind: ``cpu`` (ranks compute on the CPU) or ``cuda`` (each on a GPU of its host).
        gpu: the GPU model of a ``cuda`` type (``V100``), as the hosts carry it.
    """

    name: str
    threads: int = 1
    isa: str = "native"
    cpu: float | None = None
    kind: str = "cpu"
    gpu: str | None = None


def parse_device_types(raw: Any, where: str) -> dict[str, DeviceType]:
    """``device_types: {fast: {threads: 2, isa: native, cpu: 1.0}, ...}``, checked."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise HostSpecError(f"cluster profile {where}: device_types must be a mapping")
    out = {}
    for name, spec in raw.items():
        spec = spec or {}
        unknown = set(spec) - _KEYS if isinstance(spec, dict) else {spec}
        if unknown:
            raise HostSpecError(
                f"cluster profile {where}: device_types.{name}: unknown keys {sorted(unknown)}; "
                f"allowed: {', '.join(sorted(_KEYS))}"
            )
        kind = _choice(spec, "kind", "cpu", DEVICE_KINDS, f"device_types.{name}", where)
        gpu = spec.get("gpu")
        if gpu is not None and kind != "cuda":
            raise HostSpecError(
                f"cluster profile {where}: device_types.{name}.gpu={gpu!r} needs kind: cuda"
            )
        isa = _choice(spec, "isa", "native", DEVICE_ISAS, f"device_types.{name}", where)
        cpu = spec.get("cpu")
        if cpu is not None and not (isinstance(cpu, int | float) and cpu > 0):
            raise HostSpecError(f"cluster profile {where}: device_types.{name}.cpu must be > 0")
        threads = positive_int(spec.get("threads", 1), f"device_types.{name}.threads in {where}")
        share = None if cpu is None else float(cpu)
        gpu_name = None if gpu is None else str(gpu)
        out[str(name)] = DeviceType(str(name), threads, isa, share, kind, gpu_name)
    return out


def assign_device_types(
    hosts: Sequence[Any], by_host: Any, types: dict[str, DeviceType], where: str
) -> list[Any]:
    """Hosts with their device type (``host_device_types: {h1: fast}`` or per host), checked
    against the profile's types."""
    by_host = dict(by_host or {})
    stray = set(by_host) - {h.name for h in hosts}
    if stray:
        raise HostSpecError(f"cluster profile {where}: host_device_types names {sorted(stray)}")
    out = []
    for h in hosts:
        name = by_host.get(h.name, h.device_type)
        if name is not None and str(name) not in types:
            known = ", ".join(types) or "none"
            raise HostSpecError(
                f"cluster profile {where}: host {h.name!r} has device type {name!r}; "
                f"device_types defines: {known}"
            )
        out.append(h if name is None else replace(h, device_type=str(name)))
    return out


def emulated_with_cpu(
    emulated: dict[str, Any], hosts: Sequence[Any], types: dict[str, DeviceType]
) -> dict[str, Any]:
    """Give each emulated host its device type's CPU share unless its overrides name one."""
    overrides = {k: dict(v or {}) for k, v in (emulated.get("overrides") or {}).items()}
    for h in hosts:
        dt = types.get(h.device_type or "")
        if dt is not None and dt.cpu is not None and "cpu" not in overrides.get(h.name, {}):
            overrides.setdefault(h.name, {})["cpu"] = dt.cpu
    return {**emulated, "overrides": overrides} if overrides else emulated


def _choice(spec: dict, key: str, default: str, allowed: Sequence[str], at: str, where: str) -> str:
    """``spec[key]`` (lower-cased) if it is one of ``allowed``; HostSpecError otherwise."""
    value = str(spec.get(key, default)).lower()
    if value not in allowed:
        raise HostSpecError(
            f"cluster profile {where}: {at}.{key}={value!r}; allowed: {', '.join(allowed)}"
        )
    return value


def positive_int(value: Any, what: str) -> int:
    """``value`` as a whole number >= 1 (slots, threads); HostSpecError naming ``what``."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise HostSpecError(f"{what}: {value!r} is not a whole number") from None
    if n < 1:
        raise HostSpecError(f"{what}: {n} must be >= 1")
    return n
