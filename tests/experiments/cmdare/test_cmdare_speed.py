"""CM-DARE's published MAPE rows reproduce exactly from the shipped data."""

from __future__ import annotations

import pytest

from lab.experiments.cmdare import data, speed
from lab.experiments.cmdare.published import PUBLISHED
from lab.experiments.verdicts import Status


@pytest.fixture(scope="module")
def reproduced():
    return speed.reproduce()


def test_every_published_mape_row_has_a_model(reproduced) -> None:
    mape_rows = {p.setting for p in PUBLISHED if p.quantity == "mape"}
    assert set(reproduced["setting"]) == mape_rows
    assert len(mape_rows) == 8


@pytest.mark.parametrize("model", speed.PUBLISHED_MODELS, ids=lambda m: m.setting)
def test_published_mape_reproduces_exactly(reproduced, model) -> None:
    row = reproduced.set_index("setting").loc[model.setting]
    published = next(p.value for p in PUBLISHED if p.setting == model.setting)
    assert round(row["reproduced"], 2) == published, model.setting


def test_reproduction_verdict_is_computed(reproduced) -> None:
    assert speed.reproduction_verdict(reproduced).status is Status.REPRODUCED
    broken = reproduced.assign(matches=[False] + [True] * (len(reproduced) - 1))
    assert speed.reproduction_verdict(broken).status is Status.NOT_REPRODUCED


def test_held_out_scores_whole_cnns() -> None:
    table = speed.held_out()
    assert (table["cnns"] == 20).all()
    assert (table[["random_split", "cnns_held_out", "group_kfold_mean"]] > 0).all().all()
    verdict = speed.held_out_verdict(table)
    ratio = (table["group_kfold_mean"] / table["random_split"]).median()
    assert verdict.lab_value == pytest.approx(ratio)
    assert (verdict.status is Status.REPRODUCED) == (ratio <= 1 + speed.HELD_OUT_TOLERANCE)


def test_speed_tables_are_the_artifacts() -> None:
    k80 = data.speed_table("K80")
    assert len(k80) == 260 and k80["cnn"].nunique() == 20
    assert len(data.speed_table("GPU-agnostic")) == 520
    assert len(data.checkpoint_table()) == 100


def test_mape_bars_draw_each_series_the_table_has() -> None:
    import pandas as pd

    from lab.experiments.cmdare.speed_figures import mape_bars

    table = pd.DataFrame({"setting": ["K80 LR", "K80 SVR"], "published": [19.06, 9.96],
                          "reproduced": [19.063, 9.958]})  # fmt: skip
    fig = mape_bars(table, {"published": "published", "lab": "reproduced", "x": "absent"}, "t")
    assert [d.name for d in fig.data] == ["published", "lab"]
    assert list(fig.data[1].y) == [19.063, 9.958]
