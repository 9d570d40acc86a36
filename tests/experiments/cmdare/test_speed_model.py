"""Speed models: fitting, MAPE, refusing incomplete tables, and grouped splits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lab.errors import ParameterError
from lab.experiments.cmdare.speed_model import (
    ModelSpec,
    check_columns,
    compare_splits,
    fit,
    grouped_holdout_mape,
    grouped_split_mape,
    mape,
    random_split_mape,
)


def _table(models: int = 8, repeats: int = 6, seed: int = 1) -> pd.DataFrame:
    """Step time = a per-model offset (unseen by any feature) + 0.5 x flops, with noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(models):
        flops, offset = 1.0 + m, rng.uniform(0.5, 2.0)
        for _ in range(repeats):
            rows.append({"flops": flops, "cnn": f"m{m}", "t": offset + 0.5 * flops})
    df = pd.DataFrame(rows)
    df["t"] *= rng.normal(1.0, 0.01, len(df))
    return df


def test_mape_is_percent_of_truth() -> None:
    assert mape([1.0, 2.0], [1.1, 1.8]) == pytest.approx(10.0)
    with pytest.raises(ParameterError, match="y_true"):
        mape([0.0, 1.0], [1.0, 1.0])


def test_a_table_with_missing_columns_is_refused_naming_them() -> None:
    spec = ModelSpec("lr", ("flops", "gpu_tflops"), "t")
    table = _table().drop(columns=["t"])
    with pytest.raises(ParameterError, match=r"missing columns \['gpu_tflops', 't'\]"):
        fit(spec, table)
    with pytest.raises(ParameterError, match="cnn"):
        check_columns(_table().drop(columns=["cnn"]), ["flops", "cnn"])
    fitted = fit(ModelSpec("lr", ("flops",), "t"), _table())
    with pytest.raises(ParameterError, match="flops"):
        fitted.predict(pd.DataFrame({"t": [1.0]}))


def test_bad_kind_and_empty_features_fail_at_construction() -> None:
    with pytest.raises(ParameterError, match="kind"):
        ModelSpec("forest", ("flops",), "t")
    with pytest.raises(ParameterError, match="features"):
        ModelSpec("lr", (), "t")


def test_fit_predict_score_recovers_a_linear_law() -> None:
    df = pd.DataFrame({"x": np.arange(1.0, 21.0)})
    df["y"] = 3.0 + 2.0 * df["x"]
    fitted = fit(ModelSpec("lr", ("x",), "y"), df)
    assert fitted.predict(pd.DataFrame({"x": [30.0]}))[0] == pytest.approx(63.0)
    assert fitted.score(df) == pytest.approx(0.0, abs=1e-9)


def test_holding_models_out_exposes_what_a_row_split_hides() -> None:
    """Each model's offset is invisible to the features: a row split sees every model in
    training (SVR memorises its level), a grouped split cannot."""
    table = _table()
    spec = ModelSpec("svr", ("flops",), "t", {"kernel": "rbf", "C": 100, "epsilon": 0.01})
    row = random_split_mape(spec, table, seed=0)
    folds = grouped_split_mape(spec, table, "cnn", n_splits=4)
    assert len(folds) == 4
    held = set()
    for names in folds["held_out"]:
        held |= set(names.split(", "))
    assert held == set(table["cnn"])  # every model tested once, by a model that never saw it
    assert folds["mape"].mean() > 3 * row
    assert grouped_holdout_mape(spec, table, "cnn") > 3 * row


def test_grouped_split_checks_its_folds() -> None:
    spec = ModelSpec("lr", ("flops",), "t")
    with pytest.raises(ParameterError, match="n_splits"):
        grouped_split_mape(spec, _table(models=3), "cnn", n_splits=5)
    with pytest.raises(ParameterError, match="missing columns"):
        grouped_split_mape(spec, _table(), "gpu")


def test_compare_splits_has_one_row_per_spec() -> None:
    specs = {"lr": ModelSpec("lr", ("flops",), "t"), "svr": ModelSpec("svr", ("flops",), "t")}
    out = compare_splits(specs, _table(), "cnn", n_splits=4)
    assert list(out["model"]) == ["lr", "svr"]
    assert (out[["random_split_mape", "group_kfold_mape"]] > 0).all().all()
