"""KungFu (OSDI'20): the numbers its artifact README prints for Figs 7, 8 and 9."""

from __future__ import annotations

from lab.metrics.published import Published

KUNGFU_OSDI20 = "KungFu (OSDI'20)"
_KUNGFU_README = (
    "KungFu artifact README osdi20/README.md, github.com/lsds/KungFu at commit "
    "f85878991fbf53dfc5c0297844caa0c0a2de80dd (osdi20-artifact branch)"
)


_FIG8 = {
    "paper": KUNGFU_OSDI20,
    "figure": "Fig 8",
    "quantity": "throughput",
    "unit": "img/s per GPU",
    "system": "KungFu",
    "model": "ResNet50",
    "workers": 4,
    "batch_size": 8,
    "hardware": "Azure VM, 4× NVIDIA K80 (the paper's figure used a DGX-1, 8× V100)",
    "per_worker": True,
    "source": f"{_KUNGFU_README}, §3.1 Monitoring Overhead (Figure 8)",
}
_FIG9 = {
    "paper": KUNGFU_OSDI20,
    "figure": "Fig 9",
    "quantity": "throughput",
    "unit": "img/s per GPU",
    "model": "ResNet50",
    "workers": 32,
    "batch_size": 32,
    "hardware": "32 Azure GPU VMs, 1 GPU each",
    "per_worker": True,
    "source": f"{_KUNGFU_README}, §3.2 Scalability (Figure 9)",
    "note": "± is the scripts' 1.96 × standard deviation over iterations on the master VM",
}
_FIG7 = {
    "paper": KUNGFU_OSDI20,
    "figure": "Fig 7",
    "quantity": "resize_time",
    "unit": "s",
    "system": "KungFu",
    "hardware": "2 Azure GPU VMs",
    "source": f"{_KUNGFU_README}, §3.3 Dynamic scaling (Figure 7)",
}

PUBLISHED: tuple[Published, ...] = (
    Published(**_FIG8, value=30.5, setting="baseline", note="sync-sgd, no monitoring"),
    Published(**_FIG8, value=29.1, setting="noise scale", note="gradient noise scale, interval 1"),
    Published(
        **_FIG8, value=24.3, setting="variance interval 1", note="gradient variance, interval 1"
    ),
    Published(
        **_FIG8, value=29.6, setting="variance interval 8", note="gradient variance, interval 8"
    ),
    Published(**_FIG9, value=43.4, error=1.2, system="KungFu", setting="sync-sgd"),
    Published(**_FIG9, value=12.7, error=0.7, system="Horovod", setting="Horovod 0.16.1"),
    Published(**_FIG7, value=20.39, workers=2, setting="resize 1→2"),
    Published(**_FIG7, value=0.04012, workers=1, setting="resize 2→1", note="printed as 40.12ms"),
)
