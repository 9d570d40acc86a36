"""What one EasyScale stage asks for, checked before any process starts.

Pure (no torch): each rank parses its flags with it (``Config.main_config``, its process
count from WORLD_SIZE), and the lab checks the same config before it launches anything
(``Config.from_values``, and the command through lab.bench.flags), so a placement that
cannot be made, an unknown determinism level or a malformed device type never reaches a
rank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lab.bench import vision_models
from lab.bench.config import WorkloadConfig, flag, given
from lab.errors import ParameterError

SYSTEMS = ("est", "ddp", "plain")
REDUCES = ("canonical", "vanilla")
ISAS = ("native", "avx2", "avx512")
SMOKE_MODELS = ("bn_cnn",)
MODELS = (*SMOKE_MODELS, *vision_models.NAMES)
DEVICES = ("cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")
_LEVELS = {"D0": (False, False), "D1": (True, False), "D2": (False, True)}
_LEVELS |= {"D0+D2": (False, True), "D1+D2": (True, True)}
LEVELS = ("D0", "D1", "D0+D2", "D1+D2")


@dataclass(frozen=True)
class DeviceSpec:
    """A device type as a rank sees it: intra-op threads and the CPU ISA its kernels use.

    Two processes that differ in either compute different bits for the same step (as a
    V100 and a P100 do); a CPU share (cgroup quota) changes only their speed and is applied
    by the cluster, not here.
    """

    name: str = "cpu"
    threads: int = 1
    isa: str = "native"

    def text(self) -> str:
        return f"{self.name}:{self.threads}:{self.isa}"

    @classmethod
    def from_text(cls, text: str) -> DeviceSpec:
        """The spec ``text()`` wrote (``parse_device``)."""
        return parse_device(text)


def parse_level(level: str) -> tuple[bool, bool]:
    """``(d1, d2)`` for a level name: D0, D1, D2 (= D0+D2), D0+D2 or D1+D2."""
    key = str(level).upper().replace(" ", "")
    if key not in _LEVELS:
        raise ParameterError("level", level, ", ".join(LEVELS))
    return _LEVELS[key]


def parse_device(text: str) -> DeviceSpec:
    """``NAME:THREADS:ISA`` (e.g. ``fast:2:native``, ``slow:1:avx2``) as a DeviceSpec."""
    parts = str(text).split(":")
    allowed = f"NAME:THREADS:ISA with THREADS >= 1 and ISA among {', '.join(ISAS)}"
    if len(parts) != 3 or not parts[0]:
        raise ParameterError("device", text, allowed)
    name, threads, isa = parts
    if not threads.isdigit() or int(threads) < 1 or isa.lower() not in ISAS:
        raise ParameterError("device", text, allowed)
    return DeviceSpec(name, int(threads), isa.lower())


def split_placement(ests: int, processes: int, placement: str | None = None) -> tuple[int, ...]:
    """ESTs per process: ``"2,1,1"`` as given, or an even split when None.

    Raises:
        ParameterError: more processes than ESTs, an even split that does not divide, or a
            placement whose length or sum does not match.
    """
    if not isinstance(ests, int) or ests < 1:
        raise ParameterError("ests", ests, "an integer >= 1")
    if not isinstance(processes, int) or processes < 1:
        raise ParameterError("np", processes, "an integer >= 1")
    if processes > ests:
        raise ParameterError("np", processes, f"at most ests={ests} processes (one EST each)")
    if placement is None or placement == "":
        if ests % processes:
            allowed = f"a number of ESTs divisible by np={processes}, or an explicit placement"
            raise ParameterError("ests", ests, allowed)
        return (ests // processes,) * processes
    try:
        counts = tuple(int(x) for x in str(placement).split(","))
    except ValueError:
        counts = ()
    if len(counts) != processes or sum(counts) != ests or min(counts, default=0) < 1:
        allowed = f"{processes} counts >= 1, comma-separated, summing to ests={ests}"
        raise ParameterError("placement", placement, allowed)
    return counts


@dataclass(frozen=True)
class Config(WorkloadConfig):
    """One stage of an EasyScale job (or of a baseline): its flags, and its process count.

    ``ests`` is the job's number of logical workers for life; ``processes`` how many hold
    them in this stage, which the launch sets (WORLD_SIZE, no flag); ``devices`` one device
    type per process (one entry: all alike); ``device`` where the ranks compute: ``cpu``
    (gloo) or ``cuda`` (each rank on its LOCAL_RANK's GPU, NCCL); ``backend`` ``auto``
    (gloo on the CPU, NCCL on GPUs unless ranks share one) or forced. ``model`` is
    ``bn_cnn`` or a torchvision paper model (lab.bench.vision_models). ``ddp_beside``: a
    one-process EST run also times a DDP step (one rank, its own model) after each of its
    steps, Fig 13's baseline in the same process.
    """

    MODULE = "lab.bench.easyscale"
    DESCRIPTION = "One stage of an EasyScaleThreads job, or a DDP / plain baseline (torch)."

    system: str = flag("est", ", ".join(SYSTEMS))
    ests: int = flag(4, "logical workers of the job, for life")
    processes: int = given(1, "WORLD_SIZE", "processes holding the ESTs in this stage")
    placement: str | None = flag(None, "ESTs per process, e.g. 2,1,1; none: an even split")
    level: str = flag("D1", ", ".join(LEVELS))
    devices: tuple[DeviceSpec, ...] = flag((DeviceSpec(),), "NAME:THREADS:ISA per process")
    reduce: str = flag("canonical", "DDP: " + " or ".join(REDUCES))
    switch: bool = flag(True, "switch each EST's context in (off, timing only: ESTs share one)")
    digest: bool = flag(False, "hash the parameters every step")
    model: str = flag("bn_cnn", ", ".join(MODELS))
    device: str = flag("cpu", f"{', '.join(DEVICES)}: where ranks compute")
    backend: str = flag("auto", ", ".join(BACKENDS))
    steps: int = flag(5, "mini-batches of this stage")
    start_step: int = flag(0, "the first mini-batch's number (after a resume)")
    batch_size: int = flag(8, "per-EST batch size")
    dataset_size: int = flag(512, "images of the synthetic data set")
    image_size: int = flag(16, "square input size")
    num_classes: int = flag(10, "classes of the random labels")
    lr: float = flag(0.05, "learning rate")
    seed: int = flag(1, "model, data and RNG seed")
    save: str = flag("", "checkpoint directory to write at the end")
    resume: str = flag("", "checkpoint directory to start from")
    stop_file: str = flag(
        "",
        "end early (and checkpoint with --save) after the step during which this file "
        "appears: how a scheduler rescales a running job",
    )
    ddp_beside: bool = flag(
        False, "est on one process: time a one-rank DDP step after each step (Fig 13)"
    )

    def checked(self) -> Config:
        """This config if it can run; ParameterError naming the first bad field if not."""
        if self.system not in SYSTEMS:
            raise ParameterError("system", self.system, ", ".join(SYSTEMS))
        if self.reduce not in REDUCES:
            raise ParameterError("reduce", self.reduce, ", ".join(REDUCES))
        if self.model not in MODELS:
            raise ParameterError("model", self.model, ", ".join(MODELS))
        if self.device not in DEVICES:
            raise ParameterError("device", self.device, ", ".join(DEVICES))
        if self.backend not in BACKENDS or (self.device == "cpu" and self.backend == "nccl"):
            raise ParameterError("backend", self.backend, "auto or gloo (cpu); auto, gloo, nccl")
        parse_level(self.level)
        for name in ("steps", "batch_size", "dataset_size", "image_size", "num_classes"):
            if getattr(self, name) < 1:
                raise ParameterError(name, getattr(self, name), "an integer >= 1")
        if self.model in vision_models.MODELS:
            vision_models.check_size(self.model, self.image_size)
        if self.start_step < 0:
            raise ParameterError("start_step", self.start_step, "an integer >= 0")
        if self.system == "ddp" and self.ests != self.processes:
            raise ParameterError("ests", self.ests, f"np={self.processes} for DDP (one each)")
        if self.system == "plain" and self.processes != 1:
            raise ParameterError("np", self.processes, "1 for plain training")
        if self.ddp_beside and (self.system != "est" or self.processes != 1):
            allowed = "only with system est on one process"
            raise ParameterError("ddp_beside", self.ddp_beside, allowed)
        self.counts()
        if len(self.devices) not in (1, self.processes):
            raise ParameterError(
                "devices", [d.text() for d in self.devices], f"1 or np={self.processes} types"
            )
        per_est = self.dataset_size // self.ests
        if per_est < self.batch_size:
            allowed = f">= ests * batch_size = {self.ests * self.batch_size}"
            raise ParameterError("dataset_size", self.dataset_size, allowed)
        return self

    def counts(self) -> tuple[int, ...]:
        """ESTs per process."""
        if self.system == "plain":
            return (self.ests,)
        return split_placement(self.ests, self.processes, self.placement)

    def device_of(self, rank: int) -> DeviceSpec:
        return self.devices[0] if len(self.devices) == 1 else self.devices[rank]

    def ests_of(self, rank: int) -> range:
        """The EST indices process ``rank`` holds (contiguous, in rank order)."""
        counts = self.counts()
        start = sum(counts[:rank])
        return range(start, start + counts[rank])

    def with_(self, **changes: object) -> Config:
        return replace(self, **changes)  # type: ignore[arg-type]
