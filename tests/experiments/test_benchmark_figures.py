"""The benchmark room's builders and verdicts on small hand-made summaries."""

from __future__ import annotations

import pandas as pd
import pytest

from lab.errors import NothingMeasured
from lab.experiments import Status
from lab.experiments.benchmark import async_, sync
from lab.experiments.kungfu import fig9
from lab.metrics.figures import published_traces


def _row(system: str, workers: int, total: float, ci: float = 2.0, model: str = "m") -> dict:
    return {
        "system": system,
        "model": model,
        "workers": workers,
        "state": "succeeded",
        "throughput_total": total,
        "throughput_total_ci": ci,
        "throughput_per_rank": total / workers,
        "throughput_per_rank_ci": ci / workers,
        "run_dir": f"/runs/{system}-{workers}",
    }


def test_sync_table_figure_and_verdict() -> None:
    summary = pd.DataFrame(
        [
            _row("horovod-gloo", 1, 100.0),
            _row("horovod-gloo", 2, 150.0),
            _row("kungfu-sync", 1, 100.0),
            _row("kungfu-sync", 2, 190.0),
            {**_row("mwms", 2, 0.0), "state": "failed"},
        ]
    )
    table = sync.table(summary).set_index(["system", "workers"])
    assert table.loc[("horovod-gloo", 2), "efficiency"] == pytest.approx(0.75)
    assert table.loc[("kungfu-sync", 2), "efficiency"] == pytest.approx(0.95)
    assert ("mwms", 2) not in table.index
    fig = sync.figure(table.reset_index(), caption="test", batch_size=32)
    assert {t.meta["source"] for t in published_traces(fig)} == set(fig9.published()["source"])
    v = sync.verdict(table.reset_index(), "smoke", runs=("r",), hardware="h")
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(190 / 150)
    assert v.published_value == pytest.approx(fig9.published_ratio()[0])
    assert "Horovod (Gloo) · m 75%" in v.why
    no_kungfu = sync.table(summary.query("system != 'kungfu-sync'"))
    assert sync.verdict(no_kungfu, "smoke", runs=("r",), hardware="h").status is (
        Status.NOT_MEASURED
    )
    with pytest.raises(NothingMeasured):
        sync.verdict(sync.table(summary.iloc[0:0]), "smoke")


def test_async_says_no_number_is_published() -> None:
    assert async_.published().empty
    summary = pd.DataFrame(
        [_row("ps", 2, 100.0, ci=5.0), _row("pair-avg", 2, 103.0, ci=5.0), _row("ps", 2, 0.0)]
    )
    summary.loc[2, "state"] = "failed"
    table = async_.table(summary)
    assert len(table) == 2 and "pair averaging (lab, MPI one-sided)" in set(table["label"])
    fig = async_.figure(table, caption="test")
    assert not published_traces(fig) and len(fig.data) == 2
    v = async_.verdict(table, "smoke", runs=("r",), hardware="h")
    assert v.status is Status.NOT_RESOLVED  # 1.03 ± ~0.07 holds 1
    assert v.published_value is None and "publishes no number" in v.why
    faster = async_.table(pd.DataFrame([_row("ps", 2, 100.0), _row("pair-avg", 2, 150.0)]))
    assert async_.verdict(faster, "smoke", runs=("r",), hardware="h").status is (Status.REPRODUCED)
