"""KungFu's figure builders and verdicts on small hand-made summaries: what the notebooks
draw and conclude is computed here, so these tables are the notebooks' contract."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lab.errors import NothingMeasured
from lab.experiments import Status
from lab.experiments.kungfu import fig9
from lab.metrics.figures import published_traces


def _row(system: str, model: str, workers: int, total: float, ci: float = 1.0, **kw) -> dict:
    return {
        "system": system,
        "model": model,
        "workers": workers,
        "state": kw.get("state", "succeeded"),
        "throughput_total": total,
        "throughput_total_ci": ci,
        "throughput_per_rank": total / workers,
        "throughput_per_rank_ci": ci / workers,
        "run_dir": f"/runs/{system}-{model}-{workers}",
    }


def _fig9_summary() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _row("single", "a", 1, 100.0),
            _row("single", "b", 1, 10.0),
            _row("horovod-mpi", "a", 2, 180.0),
            _row("horovod-mpi", "a", 4, 300.0, ci=10.0),
            _row("kungfu-sync", "a", 4, 360.0, ci=10.0),
            _row("horovod-mpi", "b", 2, 19.0),
            _row("horovod-mpi", "b", 4, 30.0),
            _row("mwms", "b", 4, 0.0, state="failed"),
        ]
    )


def test_fig9_each_model_gets_its_own_ideal() -> None:
    table = fig9.ideal_table(_fig9_summary())
    assert len(table) == 5  # the failed point and the single runs are not system points
    by = table.set_index(["system", "model", "workers"])
    assert by.loc[("horovod-mpi", "a", 4), "ideal"] == 400.0
    assert by.loc[("horovod-mpi", "b", 4), "ideal"] == 40.0
    assert by.loc[("horovod-mpi", "b", 2), "efficiency"] == pytest.approx(0.95)
    assert by.loc[("kungfu-sync", "a", 4), "efficiency"] == pytest.approx(0.9)


def test_fig9_figure_and_table_agree() -> None:
    table = fig9.ideal_table(_fig9_summary())
    fig = fig9.figure(table, caption="test", batch_size=32)
    ideals = fig9.ideal_traces(fig)
    assert set(ideals) == {"a", "b"}
    assert list(ideals["a"].y) != list(ideals["b"].y)
    for r in table.itertuples():  # every table ideal is on its model's line
        line = dict(zip(ideals[r.model].x, ideals[r.model].y, strict=True))
        assert line[r.workers] == pytest.approx(r.ideal)
        assert line[1] == pytest.approx(r.ideal_rate)
    measured = {t.name: t for t in fig.data if t.name and "(measured)" in t.name}
    hvd_a = measured["Horovod (MPI) · a (measured)"]
    assert list(hvd_a.x) == [2, 4] and list(hvd_a.y) == [180.0, 300.0]
    assert {t.meta["source"] for t in published_traces(fig)} == set(fig9.published()["source"])


def test_fig9_verdict_reads_the_published_ratio() -> None:
    table = fig9.ideal_table(_fig9_summary())
    v = fig9.verdict(table, "smoke", runs=("r1",), hardware="here")
    pub = fig9.published().set_index("system")["value"]
    assert v.published_value == pytest.approx(pub["KungFu"] / pub["Horovod"])
    assert v.lab_value == pytest.approx(360.0 / 300.0)
    assert v.status is Status.REPRODUCED  # 1.2 ± ~0.05: above 1 with its CI
    assert "at 4 workers" in v.why and "Horovod (MPI) · a 75%" in v.why
    assert f"KungFu {pub['KungFu']:g} vs Horovod {pub['Horovod']:g}" in v.published_source


def test_fig9_verdict_statuses_follow_the_rule() -> None:
    from lab.metrics.stats import Estimate

    assert fig9.status_of(Estimate(1.2, 0.1)) is Status.REPRODUCED
    assert fig9.status_of(Estimate(0.8, 0.1)) is Status.NOT_REPRODUCED
    assert fig9.status_of(Estimate(1.05, 0.1)) is Status.NOT_RESOLVED
    assert fig9.status_of(Estimate(1.5, math.nan)) is Status.NOT_RESOLVED
    no_kungfu = _fig9_summary().query("system != 'kungfu-sync'")
    v = fig9.verdict(fig9.ideal_table(no_kungfu), "smoke", runs=("r",), hardware="h")
    assert v.status is Status.NOT_MEASURED and v.lab_value is None
    with pytest.raises(NothingMeasured):
        fig9.verdict(fig9.ideal_table(_fig9_summary().query("system == 'single'")), "smoke")
