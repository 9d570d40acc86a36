"""Regression models of training speed (and checkpoint time), scored by MAPE.

CM-DARE (ICDCS'20) predicts a cluster's step time from features of the model (FLOPs), the
hardware (GPU TFLOPS) and, beyond the paper, the cluster (workers, parameter servers), with
scikit-learn's LinearRegression and SVR. This module fits, predicts and scores such models
on any feature table, and scores them two ways:

- the paper's protocol: ``shuffle(random_state=s)`` then an 80/20 ``train_test_split`` with
  ``random_state=s``. Every model has many repeated samples, so a row split puts the same
  model in train and test and measures interpolation between repeats;
- a grouped split (``GroupKFold``/``GroupShuffleSplit``) that holds whole models out, which
  measures what the paper's use needs: predicting a model never seen.

scikit-learn and pandas are imported where used, so importing this module is free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.errors import NothingMeasured, ParameterError

KINDS = ("lr", "svr")


@dataclass(frozen=True)
class ModelSpec:
    """Which regression, on which columns.

    Args:
        kind: ``"lr"`` (ordinary least squares) or ``"svr"`` (support vector regression).
        features: the input columns.
        target: the column to predict (e.g. ``"Step Time (s)"`` or ``"speed"``).
        params: keyword arguments of the estimator (SVR's kernel, C, epsilon, ...).
    """

    kind: str
    features: tuple[str, ...]
    target: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError("kind", self.kind, ", ".join(KINDS))
        if not self.features:
            raise ParameterError("features", self.features, "at least one column name")

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.features, self.target)

    def estimator(self) -> Any:
        """A fresh, unfitted scikit-learn estimator."""
        if self.kind == "lr":
            from sklearn.linear_model import LinearRegression

            return LinearRegression(**dict(self.params))
        from sklearn.svm import SVR

        return SVR(**dict(self.params))


def check_columns(table: Any, columns: Sequence[str], what: str = "table") -> None:
    """Refuse a table that lacks any of ``columns``, naming the missing ones."""
    have = set(getattr(table, "columns", ()))
    missing = [c for c in columns if c not in have]
    if missing:
        raise ParameterError(
            what, f"missing columns {missing}", "a table with columns " + ", ".join(columns)
        )


def mape(y_true: Any, y_pred: Any) -> float:
    """Mean absolute percentage error, in percent (as CM-DARE reports it)."""
    import numpy as np

    t = np.asarray(y_true, dtype=float).ravel()
    p = np.asarray(y_pred, dtype=float).ravel()
    if t.size == 0 or t.size != p.size:
        raise ParameterError("y_pred", f"{p.size} values", f"{t.size} values (one per truth)")
    if np.any(t == 0):
        raise ParameterError("y_true", "a zero", "non-zero values (MAPE divides by them)")
    return float(np.mean(np.abs((t - p) / t)) * 100.0)


@dataclass
class FittedModel:
    """A fitted estimator and the spec it was fitted to."""

    spec: ModelSpec
    estimator: Any
    n_train: int

    def predict(self, table: Any) -> Any:
        check_columns(table, self.spec.features)
        return self.estimator.predict(table[list(self.spec.features)])

    def score(self, table: Any) -> float:
        """MAPE (%) of this model's predictions on ``table``."""
        check_columns(table, self.spec.columns)
        return mape(table[self.spec.target], self.predict(table))


def fit(spec: ModelSpec, table: Any) -> FittedModel:
    """Fit ``spec`` on every row of ``table``."""
    check_columns(table, spec.columns)
    if len(table) < 2:
        raise NothingMeasured(f"cannot fit {spec.kind} on {len(table)} row(s)")
    est = spec.estimator()
    est.fit(table[list(spec.features)], table[spec.target].to_numpy(dtype=float))
    return FittedModel(spec, est, len(table))


def random_split_mape(
    spec: ModelSpec,
    table: Any,
    seed: int = 0,
    test_size: float = 0.2,
    shuffle_first: bool = True,
) -> float:
    """CM-DARE's protocol: (optionally) ``shuffle(random_state=seed)``, then
    ``train_test_split(test_size, random_state=seed)``; MAPE (%) on the test rows."""
    from sklearn.model_selection import train_test_split
    from sklearn.utils import shuffle

    check_columns(table, spec.columns)
    data = shuffle(table, random_state=seed) if shuffle_first else table
    train, test = train_test_split(data, test_size=test_size, random_state=seed)
    return fit(spec, train).score(test)


def grouped_split_mape(
    spec: ModelSpec,
    table: Any,
    group: str,
    n_splits: int = 5,
) -> Any:
    """Hold whole groups (e.g. CNNs) out: ``GroupKFold``; every group is tested once, by a
    model that never saw any of its rows.

    Returns:
        One row per fold: ``fold``, ``held_out`` (the groups tested), ``n_test``, ``mape``.
    """
    import pandas as pd
    from sklearn.model_selection import GroupKFold

    check_columns(table, (*spec.columns, group))
    groups = table[group]
    n_groups = groups.nunique()
    if not 2 <= n_splits <= n_groups:
        raise ParameterError("n_splits", n_splits, f"2..{n_groups} (the number of {group}s)")
    rows = []
    for k, (tr, te) in enumerate(GroupKFold(n_splits=n_splits).split(table, groups=groups)):
        train, test = table.iloc[tr], table.iloc[te]
        rows.append(
            {
                "fold": k,
                "held_out": ", ".join(sorted(map(str, test[group].unique()))),
                "n_test": len(test),
                "mape": fit(spec, train).score(test),
            }
        )
    return pd.DataFrame(rows)


def grouped_errors(spec: ModelSpec, table: Any, group: str, n_splits: int = 5) -> Any:
    """Each row's absolute percentage error when its whole group was held out
    (``GroupKFold``, as grouped_split_mape): per row, so two specs can be compared row by
    row on the same rows."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    check_columns(table, (*spec.columns, group))
    errors = np.full(len(table), np.nan)
    for tr, te in GroupKFold(n_splits=n_splits).split(table, groups=table[group]):
        test = table.iloc[te]
        truth = test[spec.target].to_numpy(dtype=float)
        errors[te] = np.abs((truth - fit(spec, table.iloc[tr]).predict(test)) / truth) * 100.0
    return errors


def grouped_holdout_mape(
    spec: ModelSpec,
    table: Any,
    group: str,
    test_size: float = 0.2,
    seed: int = 0,
) -> float:
    """One ``GroupShuffleSplit`` (test_size of the groups, random_state=seed): the paper's
    80/20 shape, but by model instead of by row; MAPE (%) on the held-out models."""
    from sklearn.model_selection import GroupShuffleSplit

    check_columns(table, (*spec.columns, group))
    split = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    tr, te = next(split.split(table, groups=table[group]))
    return fit(spec, table.iloc[tr]).score(table.iloc[te])


def compare_splits(
    specs: Mapping[str, ModelSpec],
    table: Any,
    group: str,
    seed: int = 0,
    n_splits: int = 5,
    shuffle_first: bool = True,
) -> Any:
    """Every spec scored by the random row split and by models held out (GroupKFold mean
    and one GroupShuffleSplit): one row per spec."""
    import pandas as pd

    rows = []
    for name, spec in specs.items():
        folds = grouped_split_mape(spec, table, group, n_splits=n_splits)
        rows.append(
            {
                "model": name,
                "kind": spec.kind,
                "features": ", ".join(spec.features),
                "random_split_mape": random_split_mape(
                    spec, table, seed=seed, shuffle_first=shuffle_first
                ),
                "group_holdout_mape": grouped_holdout_mape(spec, table, group, seed=seed),
                "group_kfold_mape": float(folds["mape"].mean()),
                "group_kfold_max": float(folds["mape"].max()),
            }
        )
    return pd.DataFrame(rows)
