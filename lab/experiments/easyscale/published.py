"""EasyScale (SC'23)'s published numbers for Figs 9–13, each with where it is published.

Sections follow the paper (Li et al., "EasyScale: Elastic Training with Consistent
Accuracy and Improved Utilization on GPUs", SC'23, doi:10.1145/3581784.3607054); the
artifact README points Figs 10–12 to §5.1.2 and Fig 13 to §5.1.3. These are facts to draw
beside the lab's numbers, never expectations of a measurement.
"""

from __future__ import annotations

from lab.metrics.published import Published

EASYSCALE_SC23 = "EasyScale (SC'23)"
_PAPER = "EasyScale (SC'23, doi:10.1145/3581784.3607054)"
_V100 = "1 NVIDIA V100"

_FIG9 = {
    "paper": EASYSCALE_SC23,
    "figure": "Fig 9",
    "quantity": "loss_difference",
    "unit": "loss (last EST − last DDP worker)",
    "value": 0.0,
    "workers": 4,
    "source": f"{_PAPER}, §5.1, Figure 9(a)/(b) (ResNet50, ShuffleNetV2); artifact README",
}
_FIG10 = {
    "paper": EASYSCALE_SC23,
    "figure": "Fig 10",
    "model": "ResNet50",
    "hardware": _V100,
    "source": f"{_PAPER}, §5.1.2, Figure 10(a)",
}
_FIG11 = {
    "paper": EASYSCALE_SC23,
    "figure": "Fig 11",
    "hardware": _V100,
    "source": f"{_PAPER}, §5.1.2, Figure 11",
}
_FIG13 = {
    "paper": EASYSCALE_SC23,
    "figure": "Fig 13",
    "quantity": "time_saving",
    "unit": "fraction of a DDP step",
    "hardware": _V100,
    "workers": 8,
    "source": f"{_PAPER}, §5.1.3, Figure 13",
}
_FIG12 = {
    "paper": EASYSCALE_SC23,
    "figure": "Fig 12",
    "quantity": "relative_time",
    "unit": "× non-deterministic training",
    "hardware": "V100, P100, T4 (one range over the device types)",
    "source": f"{_PAPER}, §5.1.2, Figure 12",
}

PUBLISHED: tuple[Published, ...] = (
    Published(**_FIG9, system="EasyScale D1", setting="stages 0-1 vs DDP homo"),
    Published(**_FIG9, system="EasyScale D1+D2", setting="stages 0-2 vs DDP heter"),
    Published(
        **_FIG10,
        quantity="memory_per_worker",
        value=4.69,
        unit="GiB per added worker",
        system="worker packing (DDP)",
        note="out of GPU memory at 8 packed workers",
    ),
    Published(
        **_FIG10,
        quantity="oom_workers",
        value=8,
        unit="workers",
        system="worker packing (DDP)",
        note="the first worker count that no longer fits a 32 GiB V100",
    ),
    Published(
        **_FIG10,
        quantity="memory",
        value=4.74,
        unit="GiB",
        system="EasyScale",
        workers=16,
        note="flat from 1 to 16 ESTs on one GPU",
    ),
    Published(
        **_FIG11,
        quantity="overhead",
        value=0.0042,
        unit="fraction",
        system="EasyScale",
        setting="context switching on vs off",
        note="mean over the 8 workloads of Table 1",
    ),
    Published(**_FIG13, value=0.282, system="EasyScale", setting="ESTs 0-6"),
    Published(**_FIG13, value=0.111, system="EasyScale", setting="last EST (syncs)"),
    Published(**_FIG12, value=1.07, system="EasyScale D1", setting="min"),
    Published(**_FIG12, value=1.10, system="EasyScale D1", setting="max"),
    Published(**_FIG12, value=1.64, system="EasyScale D1+D2", setting="min"),
    Published(
        **_FIG12, value=2.00, system="EasyScale D1+D2", setting="max", note="VGG19 is the worst"
    ),
)


def rows(figure: str) -> list[Published]:
    """The published rows of one figure (e.g. ``"Fig 12"``)."""
    return [p for p in PUBLISHED if p.figure == figure]


def value(figure: str, **match: object) -> Published:
    """The one published row of ``figure`` whose fields equal ``match``."""
    found = [p for p in rows(figure) if all(getattr(p, k) == v for k, v in match.items())]
    if len(found) != 1:
        raise LookupError(f"{len(found)} published rows of {figure} match {match}")
    return found[0]
