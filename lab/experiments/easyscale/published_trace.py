"""EasyScale's published trace-experiment numbers (Fig 14), as data with their source.

The paper (§5.2, Fig 14) reports the average job completion time and the makespan of a
68-job trace on 32 V100 + 16 P100 + 16 T4 under YARN-CS, EasyScale-homo and
EasyScale-heter; the artifact's plot data hold the same numbers unrounded. The ratios the
paper states (13.2×, 2.76×; 1.58×, 1.12×) are derived here from these rows, not typed.
"""

from __future__ import annotations

import pandas as pd

from lab.metrics.published import Published, to_frame

EASYSCALE_SC23 = "EasyScale (SC'23)"
_SOURCE = (
    "EasyScale (SC'23) §5.2, Fig 14; values from the artifact's "
    "simulator/plot/jct_makespan.csv (github.com/sUntvoOk/EasyScale_info_for_SC23, "
    "commit c5ff7b6892645dfdef837b5b63cb98087379ef64)"
)
_COMMON = {
    "paper": EASYSCALE_SC23,
    "figure": "Fig 14",
    "unit": "s",
    "workers": 64,
    "hardware": "simulated cluster of 32 V100 + 16 P100 + 16 T4 GPUs, 68-job trace",
    "source": _SOURCE,
}
POLICIES = ("YARN-CS", "EasyScale-homo", "EasyScale-heter")

PUBLISHED: tuple[Published, ...] = (
    Published(**_COMMON, quantity="mean_jct", value=8904.9685, system="YARN-CS"),
    Published(**_COMMON, quantity="makespan", value=16560.0, system="YARN-CS"),
    Published(**_COMMON, quantity="mean_jct", value=1070.5008, system="EasyScale-homo"),
    Published(**_COMMON, quantity="makespan", value=6720.0, system="EasyScale-homo"),
    Published(**_COMMON, quantity="mean_jct", value=676.7497, system="EasyScale-heter"),
    Published(**_COMMON, quantity="makespan", value=6000.0, system="EasyScale-heter"),
)

# The ratios the verdict compares: (numerator policy, denominator policy).
RATIOS = (("YARN-CS", "EasyScale-heter"), ("EasyScale-homo", "EasyScale-heter"))


def published_frame() -> pd.DataFrame:
    """The rows above as a DataFrame (``lab.metrics.published`` columns)."""
    return to_frame(PUBLISHED)


def published_value(policy: str, quantity: str) -> Published:
    """The one published row of ``policy`` (``YARN-CS`` ...) and ``quantity``
    (``mean_jct`` or ``makespan``)."""
    rows = [p for p in PUBLISHED if p.system == policy and p.quantity == quantity]
    if len(rows) != 1:
        raise KeyError(f"no published {quantity} of {policy}; policies: {', '.join(POLICIES)}")
    return rows[0]


def published_ratios() -> pd.DataFrame:
    """Published ratios, one row per (numerator, denominator, quantity), computed from
    the published rows: columns numerator, denominator, quantity, ratio, source."""
    rows = []
    for num, den in RATIOS:
        for quantity in ("mean_jct", "makespan"):
            a, b = published_value(num, quantity), published_value(den, quantity)
            rows.append(
                {
                    "numerator": num,
                    "denominator": den,
                    "quantity": quantity,
                    "ratio": a.value / b.value,
                    "source": f"derived from {a.source}",
                }
            )
    return pd.DataFrame(rows)
