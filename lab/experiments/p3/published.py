"""P3's published numbers, each with where it was published.

The gains are the abstract's "as much as" figures: peak throughput gains of P3 over the
MXNet KVStore baseline on 4 GPU machines (one worker and one server each, batch 32 per
worker) with the bandwidth limited by hand. The slice size has two published values: the
authors' code and the paper's text disagree, and the lab uses the code's.
"""

from __future__ import annotations

from lab.metrics.published import Published

P3_SYSML19 = "P3 (SysML'19)"
_ABSTRACT = (
    "Jayarajan, Wei, Gibson, Fedorova, Pekhimenko: Priority-based Parameter Propagation for "
    "Distributed DNN Training, SysML 2019 (proceedings.mlsys.org, arXiv:1905.03960), abstract: "
    '"P3 can improve the training throughput of ResNet-50, Sockeye and VGG-19 by as much as '
    '25%, 38% and 66% respectively on clusters with realistic network bandwidth"'
)
_CODE = (
    "github.com/anandj91/p3, commit 4b06f407eb229cef683afdc45cecc84046250e04, "
    "src/kvstore/kvstore_dist.h: bigarray_bound_ = "
    'dmlc::GetEnv("MXNET_KVSTORE_BIGARRAY_BOUND", 40 * 1000)'
)
_GAIN = {
    "paper": P3_SYSML19,
    "figure": "abstract",
    "quantity": "peak_gain",
    "unit": "fraction",
    "source": _ABSTRACT,
    "system": "P3",
    "workers": 4,
    "batch_size": 32,
    "hardware": "4 GPU machines, one worker and one server each, bandwidth limited by hand",
    "setting": "P3 vs MXNet KVStore baseline, peak over the bandwidths measured",
}
_SLICE = {
    "paper": P3_SYSML19,
    "figure": "slice size",
    "quantity": "slice_elements",
    "unit": "elements",
    "system": "P3",
}

PUBLISHED: tuple[Published, ...] = (
    Published(**_GAIN, value=0.25, model="ResNet-50"),
    Published(**_GAIN, value=0.38, model="Sockeye"),
    Published(**_GAIN, value=0.66, model="VGG-19"),
    Published(**_SLICE, value=40_000, source=_CODE, setting="authors' code (used by the lab)"),
    Published(
        **_SLICE,
        value=50_000,
        source="Jayarajan et al., SysML 2019, paper text on parameter slicing (section not pinned)",
        setting="paper text",
    ),
)

# which published gain a lab model is compared with
COMPARED_WITH = {"vgg_like": "VGG-19", "vgg19": "VGG-19", "resnet_like": "ResNet-50",
                 "resnet50": "ResNet-50"}  # fmt: skip


def gain_row(model: str) -> Published | None:
    """The published peak gain the lab's ``model`` is compared with, if any."""
    name = COMPARED_WITH.get(model)
    return next((p for p in PUBLISHED if p.quantity == "peak_gain" and p.model == name), None)
