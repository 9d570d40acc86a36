"""CM-DARE's published numbers, each with where it was published.

The MAPE rows are the values the artifact's notebooks print for the paper's speed and
checkpoint models (the paper reports them rounded to two decimals); every such row names
the notebook and cell. The PS-bottleneck, revocation and lifetime rows come from the
artifact's README and the published-results list that ships with its processed data.
"""

from __future__ import annotations

from lab.metrics.published import Published

PAPER = "CM-DARE (ICDCS'20)"
REPO = "github.com/cake-lab/CM-DARE @263b7f1"
_SPEED_NB = f"{REPO}, data/matplotlib_scripts/sigmetrics2020_speed_prediction_2.ipynb"
_CKPT_NB = f"{REPO}, data/matplotlib_scripts/Sigmetrics2020_checkpoint_overhead.ipynb"
_DATA_LIST = f"{REPO}, data/processed_data, published-results list of the data notes"

_SVR_POLY = "SVR(kernel='poly', degree=2, C=100, epsilon=0.01, coef0=1, gamma='auto')"
_SVR_RBF = "SVR(kernel='rbf', C=10, epsilon=0.14, gamma='auto')"
_SPEED = {
    "paper": PAPER,
    "figure": "speed model",
    "quantity": "mape",
    "unit": "%",
    "model": "step time ~ Normalized Model (min-max scaled model FLOPs)",
    "workers": 1,
}
_GPU_AGNOSTIC = {**_SPEED, "figure": "GPU-agnostic speed model", "hardware": "K80 + P100"}
_CKPT = {
    "paper": PAPER,
    "figure": "checkpoint model",
    "quantity": "mape",
    "unit": "%",
    "model": "checkpoint duration ~ Checkpoint Size (MB)",
    "hardware": "20 CNNs, Google Cloud Storage",
}
_PS = {
    "paper": PAPER,
    "figure": "PS bottleneck",
    "quantity": "speed",
    "unit": "steps/s",
    "model": "ResNet-15",
    "hardware": "P100 workers",
    "system": "TF parameter servers (async)",
    "source": f"{_DATA_LIST}; artifact README Fig 3 (ps_bot_p100_1)",
}
_REVOKE = {
    "paper": PAPER,
    "figure": "chief revocation",
    "quantity": "overhead",
    "unit": "s",
    "model": "ResNet-32",
    "source": _DATA_LIST,
    "note": "runs of 24k steps, ~1359 s; overhead grows with steps since the last checkpoint",
}

_PS_ONE = (20.9, 47.1, 62.1, 78.7, 93.3, 96.1, 97.5, 103.7)
_PS_TWO = (25.9, 46.6, 70.4, 98.8, 120.2, 145.7, 163.4, 176.7)
_REVOCATION = ((1500, 19.0), (2000, 88.0), (2500, 147.0), (3000, 197.0), (3500, 254.0))

PUBLISHED: tuple[Published, ...] = (
    Published(
        **_SPEED,
        value=19.06,
        hardware="K80",
        system="LinearRegression",
        setting="K80 LR",
        source=f"{_SPEED_NB}, cell 23 output (19.0631...)",
    ),
    Published(
        **_SPEED,
        value=9.96,
        hardware="K80",
        system="SVR",
        setting="K80 SVR",
        note=_SVR_POLY,
        source=f"{_SPEED_NB}, cell 24 output (9.9584...)",
    ),
    Published(
        **_SPEED,
        value=22.28,
        hardware="P100",
        system="LinearRegression",
        setting="P100 LR",
        source=f"{_SPEED_NB}, cell 28 output (22.2751...)",
    ),
    Published(
        **_SPEED,
        value=13.79,
        hardware="P100",
        system="SVR",
        setting="P100 SVR",
        note=_SVR_POLY,
        source=f"{_SPEED_NB}, cell 29 output (13.7866...)",
    ),
    Published(
        **{**_GPU_AGNOSTIC, "model": "step time ~ Model/GPU (model FLOPs per GPU FLOPS)"},
        value=38.24,
        system="LinearRegression",
        setting="GPU-agnostic LR, Model/GPU",
        source=f"{_SPEED_NB}, cell 37 output (38.2439...)",
    ),
    Published(
        **{**_GPU_AGNOSTIC, "model": "step time ~ Normalized Model + GPU TFLOPS"},
        value=48.18,
        system="LinearRegression",
        setting="GPU-agnostic LR, Normalized Model + GPU TFLOPS",
        source=f"{_SPEED_NB}, cell 38 output (48.1751...)",
    ),
    Published(
        **_CKPT,
        value=7.98,
        system="LinearRegression",
        setting="checkpoint LR",
        source=f"{_CKPT_NB}, cell 35 output (7.9795...)",
    ),
    Published(
        **_CKPT,
        value=5.38,
        system="SVR",
        setting="checkpoint SVR",
        note=_SVR_RBF,
        source=f"{_CKPT_NB}, cell 37 output (5.3819...)",
    ),
    *(Published(**_PS, value=v, workers=w, setting="1 PS") for w, v in enumerate(_PS_ONE, 1)),
    *(Published(**_PS, value=v, workers=w, setting="2 PS") for w, v in enumerate(_PS_TWO, 1)),
    *(
        Published(**_REVOKE, value=s, setting=f"{steps} steps since checkpoint")
        for steps, s in _REVOCATION
    ),
    Published(
        paper=PAPER,
        figure="lifetimes",
        quantity="instances",
        value=156,
        unit="servers",
        hardware="K80, 4 regions",
        setting="K80",
        source=f"{REPO}, README.md Fig 2 (lifetime CDF of transient K80 servers)",
    ),
)
