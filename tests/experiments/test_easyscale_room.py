"""The EasyScale room: published rows, figure builders and verdicts computed from data."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from lab.experiments.easyscale import fig9, overhead, published, sharing
from lab.experiments.easyscale.runs import EST_LABEL
from lab.experiments.verdicts import Status


def test_every_published_row_names_the_paper_and_its_figure() -> None:
    assert len(published.rows("Fig 12")) == 4
    for row in published.PUBLISHED:
        assert "EasyScale (SC'23" in row.source and row.figure.split()[1] in row.source
    assert published.value("Fig 11", system="EasyScale").value == pytest.approx(0.0042)
    with pytest.raises(LookupError):
        published.value("Fig 13")  # two rows: ambiguous


def diff_frame(d0_equal: bool, d1_stage2_equal: bool, d12_equal: bool) -> pd.DataFrame:
    rows = []
    refs = (
        ("EasyScale D0", "DDP homo"),
        ("EasyScale D1", "DDP homo"),
        ("EasyScale D1+D2", "DDP heter"),
    )
    for config, ref in refs:
        for step in range(6):
            stage = step // 2
            equal = {
                "EasyScale D0": d0_equal or step == 0,
                "EasyScale D1": stage < 2 or d1_stage2_equal,
                "EasyScale D1+D2": d12_equal,
            }[config]
            rows.append(
                {
                    "config": config,
                    "reference": ref,
                    "step": step,
                    "stage": stage,
                    "loss": 2.0,
                    "loss_ddp": 2.0 if equal else 2.0 + 1e-7,
                    "difference": 0.0 if equal else 1e-7,
                    "bits_equal": equal,
                    "params_equal": equal,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("d0_equal", "d12_equal", "status"),
    [
        (False, True, Status.REPRODUCED),
        (True, True, Status.NOT_REPRODUCED),
        (False, False, Status.NOT_REPRODUCED),
    ],
)
def test_fig9_verdict_follows_the_bits(d0_equal: bool, d12_equal: bool, status: Status) -> None:
    diff = diff_frame(d0_equal, d1_stage2_equal=False, d12_equal=d12_equal)
    assert fig9.verdict(diff, "smoke", "test").status is status
    assert isinstance(fig9.figure(diff), go.Figure)
    table = fig9.stage_table(diff)
    assert table.loc[table["config"] == "EasyScale D1", "losses_bit_equal"].tolist() == [2, 2, 0]


def test_fig9_verdict_without_d0_is_not_measured() -> None:
    diff = diff_frame(False, False, True)
    partial = diff[diff["config"] != "EasyScale D0"]
    assert fig9.verdict(partial, "smoke", "t").status is Status.NOT_MEASURED


def test_fig12_verdict_and_figure() -> None:
    table = pd.DataFrame(
        {
            "device_type": ["fast"] * 3 + ["slow"] * 3,
            "level": ["D0", "D1", "D1+D2"] * 2,
            "step_seconds": [1.0, 1.05, 1.8, 2.0, 2.1, 2.4],
        }
    )
    first = table.groupby("device_type")["step_seconds"].transform("first")
    table["relative_time"] = table["step_seconds"] / first
    assert overhead.levels_verdict(table, "smoke", "t").status is Status.REPRODUCED
    flipped = table.assign(level=table["level"].replace({"D1": "D1+D2", "D1+D2": "D1"}))
    assert overhead.levels_verdict(flipped, "smoke", "t").status is Status.NOT_REPRODUCED
    assert isinstance(overhead.levels_figure(table), go.Figure)


def test_fig11_verdict_and_figure() -> None:
    numbers = {
        "switch_share": 0.004,
        "switch_overhead": -0.01,
        "switch_us": 120.0,
        "saving_other_ests": 0.2,
        "saving_last_est": 0.05,
    }
    assert overhead.switching_verdict(numbers, "smoke", "t").status is Status.REPRODUCED
    numbers["switch_share"] = 0.08
    assert overhead.switching_verdict(numbers, "smoke", "t").status is Status.NOT_REPRODUCED
    assert isinstance(overhead.switching_figure(numbers), go.Figure)


def test_fig10_slopes_and_verdict() -> None:
    table = pd.DataFrame(
        {
            "system": [sharing.PACKED] * 3 + [EST_LABEL] * 3,
            "workers": [1, 2, 4] * 2,
            "pss_gib": [0.3, 0.6, 1.2, 0.3, 0.31, 0.33],
            "rss_peak_gib": [0.3] * 6,
            "samples_per_s": [100.0] * 6,
        }
    )
    s = sharing.slopes(table)
    assert s[sharing.PACKED] == pytest.approx(0.3) and s[EST_LABEL] == pytest.approx(0.01)
    assert sharing.verdict(table, "smoke", "t").status is Status.REPRODUCED
    same = table.assign(pss_gib=[0.3, 0.6, 1.2] * 2)
    assert sharing.verdict(same, "smoke", "t").status is Status.NOT_REPRODUCED
    assert isinstance(sharing.figure(table), go.Figure)
