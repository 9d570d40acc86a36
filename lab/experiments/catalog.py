"""Every paper figure the lab covers, in one table: the README's figures table and the
reproduction report are both rendered from it, so they cannot disagree.

``figure`` must equal the ``Verdict.figure`` that the notebook concludes with; the report
finds its verdicts at ``results/verdicts/<room>/<scale>/<slug(figure)>.json``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureEntry:
    """One paper figure and where the lab reproduces it.

    Args:
        paper: as the published table names it, e.g. "KungFu (OSDI'20)".
        room: the paper's room under lab/experiments/ (where its verdicts are saved).
        figure: e.g. "Fig 8"; equals the notebook's ``Verdict.figure``.
        title: what the figure shows, in a few words.
        notebook: path under notebooks/, or None when no notebook exists yet.
        implementation: whose system is measured: the original, or the lab's version of
            its algorithm on an existing engine (named so).
        status: what runs today: "smoke" (end to end on a 2-core CPU machine in make run),
            with what it needs; or why it is not measured.
    """

    paper: str
    room: str
    figure: str
    title: str
    notebook: str | None
    implementation: str
    status: str
    in_report: bool = True  # False for the tour: it shows the lab, it claims nothing


KUNGFU = "KungFu (OSDI'20)"
BENCHMARK = "KungFu/Horovod/PS benchmark (seed 003)"
P3 = "P3 (SysML'19)"
EASYSCALE = "EasyScale (SC'23)"
CMDARE = "CM-DARE (ICDCS'20)"
LAB = "distlab"

FIGURES: tuple[FigureEntry, ...] = (
    FigureEntry(
        LAB,
        "lab",
        "Tour",
        "a tour of the lab: one live 2-rank run, read back",
        "00_tour.ipynb",
        "Horovod (Gloo)",
        "smoke",
        in_report=False,
    ),
    FigureEntry(
        LAB,
        "cluster",
        "Emulated cluster",
        "compute scaling over emulated hosts; allreduce time vs link bandwidth; Horovod (MPI)"
        " with default vs fair spin settings",
        "cluster/emulation.ipynb",
        "torch.distributed (gloo), Horovod (MPI), cgroups, tc",
        "smoke (needs root)",
    ),
    FigureEntry(
        BENCHMARK,
        "benchmark",
        "Sync SGD",
        "KungFu vs Horovod (Gloo, MPI) vs TF MultiWorkerMirrored",
        "benchmark/sync_sgd.ipynb",
        "KungFu itself where installed; Horovod (Gloo, MPI); TF MWMS at paper scale",
        "smoke",
    ),
    FigureEntry(
        BENCHMARK,
        "benchmark",
        "Async SGD",
        "pair averaging vs parameter servers",
        "benchmark/async_sgd.ipynb",
        "TF parameter servers; pair averaging (lab, MPI one-sided); KungFu itself where installed",
        "smoke",
    ),
    FigureEntry(
        KUNGFU,
        "kungfu",
        "Fig 4",
        "adaptive batch size: time to target loss",
        "kungfu/adaptive_batch.ipynb",
        "the lab's policy on Horovod",
        "smoke",
    ),
    FigureEntry(
        KUNGFU,
        "kungfu",
        "Fig 7",
        "dynamic scaling: resize latency",
        "kungfu/fig7_scaling.ipynb",
        "KungFu itself (kungfu-run -w, its config server); Horovod Elastic (the lab's resizing)",
        "smoke",
    ),
    FigureEntry(
        KUNGFU,
        "kungfu",
        "Fig 8",
        "monitoring overhead: noise scale, variance",
        "kungfu/fig8_monitoring_overhead.ipynb",
        "KungFu itself (its monitoring optimizers); the lab's monitors on Horovod and KungFu's "
        "artifact benchmark at paper scale",
        "smoke",
    ),
    FigureEntry(
        KUNGFU,
        "kungfu",
        "Fig 9",
        "scalability: ideal vs actual throughput",
        "kungfu/fig9_scalability.ipynb",
        "KungFu itself (sync SGD); Horovod (MPI); TF MWMS at paper scale",
        "smoke on 2 emulated hosts (needs root)",
    ),
    FigureEntry(
        EASYSCALE,
        "easyscale",
        "Fig 9",
        "accuracy consistency: loss bit for bit equal to DDP across rescaling and device types",
        "easyscale/fig9_accuracy_consistency.ipynb",
        "EasyScaleThreads (lab, torch.distributed gloo) vs DDP with a rank-order sum hook",
        "smoke (CPU device types: thread count, ISA)",
    ),
    FigureEntry(
        EASYSCALE,
        "easyscale",
        "Fig 10",
        "N workers on one device: worker packing vs ESTs, memory and throughput",
        "easyscale/fig10_gpu_sharing.ipynb",
        "EasyScaleThreads (lab, torch.distributed gloo); packing as DDP processes",
        "smoke (CPU memory, PSS, for GPU memory)",
    ),
    FigureEntry(
        EASYSCALE,
        "easyscale",
        "Fig 11",
        "context-switch overhead; EST time vs a DDP step (Fig 13)",
        "easyscale/fig11_13_est_overhead.ipynb",
        "EasyScaleThreads (lab, torch.distributed gloo)",
        "smoke (one CPU process)",
    ),
    FigureEntry(
        EASYSCALE,
        "easyscale",
        "Fig 12",
        "cost of determinism: D1 and D1+D2 vs non-deterministic, per device type",
        "easyscale/fig12_determinism_cost.ipynb",
        "EasyScaleThreads (lab, torch.distributed gloo)",
        "smoke (CPU device types)",
    ),
    FigureEntry(
        EASYSCALE,
        "easyscale",
        "Fig 14",
        "JCT and makespan of a 68-job trace: YARN-CS vs EasyScale homo/heter",
        "easyscale/fig14_15_trace.ipynb",
        "the lab's trace simulator on step times the lab measured (CPU quotas stand in for "
        "GPU types); a small real replay of EST jobs on emulated hosts",
        "smoke (needs root)",
    ),
    FigureEntry(
        EASYSCALE,
        "easyscale",
        "Fig 15",
        "devices allocated over time per policy",
        "easyscale/fig14_15_trace.ipynb",
        "the lab's trace simulator",
        "smoke (needs root)",
    ),
    FigureEntry(
        P3,
        "p3",
        "throughput vs bandwidth",
        "throughput vs link bandwidth: baseline PS, slicing, P3; P3's speedup",
        "p3/throughput_vs_bandwidth.ipynb",
        "the lab's PS with P3's schedules (lab, torch + TCP); MXNet 1.9.1 KVStore (baseline, "
        "slicing; one bandwidth at smoke); P3's MXNet fork where installed",
        "smoke on 2 emulated hosts (needs root)",
    ),
    FigureEntry(
        P3,
        "p3",
        "one iteration",
        "one iteration's timeline: slices overtaking the big FC layer",
        "p3/one_iteration.ipynb",
        "the lab's PS (lab, torch + TCP)",
        "smoke on 2 emulated hosts (needs root)",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "speed models",
        "published speed and checkpoint models' MAPE, re-fitted on the artifact's data",
        "cmdare/speed_model.ipynb",
        "scikit-learn on the artifact's measurements",
        "smoke",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "speed models, CNNs held out",
        "the same models scored with whole CNNs held out",
        "cmdare/speed_model.ipynb",
        "scikit-learn on the artifact's measurements",
        "smoke",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "speed models, lab data",
        "speed models fitted on the lab's own TF parameter-server runs",
        "cmdare/speed_model.ipynb",
        "TF parameter servers on emulated hosts",
        "smoke (needs root)",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "PS bottleneck",
        "speed vs workers with 1 and 2 parameter servers; the bottleneck named",
        "cmdare/ps_bottleneck.ipynb",
        "TF parameter servers on emulated hosts",
        "smoke (needs root)",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "worker revocation",
        "throughput timeline through a worker's revocation, cold and warm replacement",
        "cmdare/revocation.ipynb",
        "TF parameter servers; lab.cluster.faults on emulated hosts",
        "smoke (needs root)",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "chief revocation",
        "restart overhead vs steps since the last checkpoint",
        "cmdare/revocation.ipynb",
        "TF parameter servers; lab.cluster.faults on emulated hosts",
        "smoke (needs root)",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "checkpoint duration",
        "checkpoint duration vs size, lab checkpoints beside the published fit",
        "cmdare/revocation.ipynb",
        "TF parameter servers on emulated hosts",
        "smoke (needs root)",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "lifetimes",
        "transient-server lifetime CDFs per GPU type and region",
        "cmdare/lifetimes.ipynb",
        "the artifact's hour-binned CDFs",
        "smoke",
    ),
    FigureEntry(
        CMDARE,
        "cmdare",
        "what-if: transient vs on-demand",
        "a job's time and cost on transient vs on-demand servers (beyond the paper)",
        "cmdare/lifetimes.ipynb",
        "Monte Carlo over the lab's models fitted on the artifact's data",
        "smoke",
    ),
)


def entries(paper: str | None = None) -> list[FigureEntry]:
    """The catalog, or one paper's rows."""
    return [f for f in FIGURES if paper is None or f.paper == paper]


def readme_table() -> str:
    """The README's figures table (Markdown), rendered from the catalog."""
    lines = [
        "| paper | figure | notebook | implementation | status |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in FIGURES:
        nb = f"`notebooks/{f.notebook}`" if f.notebook else "—"
        lines.append(
            f"| {f.paper} | {f.figure}: {f.title} | {nb} | {f.implementation} | {f.status} |"
        )
    return "\n".join(lines)
