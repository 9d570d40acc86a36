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


def test_sync_draws_the_pytorch_systems_and_judges_kungfu_against_horovod_on_tensorflow() -> None:
    """Horovod's PyTorch API, faster than KungFu here, is a line of the figure and a part of
    the why, not the Horovod of the paper's KungFu / Horovod ratio."""
    summary = pd.DataFrame(
        [
            _row("horovod-gloo", 2, 150.0),
            _row("kungfu-sync", 2, 190.0),
            _row("horovod-torch", 2, 400.0),
            _row("torch-ddp", 2, 380.0),
        ]
    )
    table = sync.table(summary)
    names = {t.name for t in sync.figure(table).data}
    assert {"Horovod PyTorch (MPI) · m", "PyTorch DDP, beyond papers · m"} <= names
    v = sync.verdict(table, "smoke", runs=("r",), hardware="h")
    assert v.lab_value == pytest.approx(190 / 150)
    assert "Horovod PyTorch (MPI) · m" in v.why and "PyTorch DDP, beyond papers · m" in v.why
    assert {"horovod-torch", "torch-ddp"} <= set(sync.DEFAULTS["smoke"]["systems"])


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


def _rate_run(path, rate: float, ranks: int) -> str:
    """A run directory whose every rank printed steps at ``rate`` samples/s (±1%)."""
    from lab.metrics.records import format_record

    path.mkdir(parents=True)
    for r in range(ranks):
        rates = [rate * (1 + 0.01 * ((i % 3) - 1)) for i in range(12)]
        lines = [
            format_record("step", rank=r, step=i, samples=32, seconds=32 / x)
            for i, x in enumerate(rates)
        ]
        (path / f"rank-{r}.log").write_text("\n".join(lines) + "\n")
    (path / "manifest.json").write_text('{"params": {}, "state": "succeeded"}')
    return str(path)


def test_sync_runs_interleaved_rounds_and_its_interval_is_over_rounds(tmp_path) -> None:
    """Two rounds whose KungFu/Horovod ratio differs (1.5×, then 0.9×): every run is tight
    inside, but the interval over rounds holds 1, so the verdict is not resolved."""
    from lab.experiments.protocol_runner import run_protocol

    p = sync.DEFAULTS["smoke"] | {"systems": ["horovod-gloo", "kungfu-sync"], "budget_s": 0.0}
    assert sync.target(p).min_rounds == sync.DEFAULTS["smoke"]["min_rounds"] > 3
    p["min_rounds"] = 0  # below: the budget alone, spent after one round
    points, keys, compared = sync.protocol_points(p, p["systems"])
    assert len(points) == len(keys) == 4
    assert [c.kind for c in compared] == ["throughput"] * 4 + ["speedup"]
    made: list[tuple[str, int]] = []

    def run_one(point: dict) -> str:
        made.append((point["system"], point["workers"]))
        second = made.count((point["system"], point["workers"])) == 2
        kungfu = point["system"] == "kungfu-sync" and point["workers"] == 2
        rate = 150.0 if kungfu and not second else 90.0 if kungfu else 100.0
        return _rate_run(tmp_path / f"run-{len(made)}", rate, point["workers"])

    from lab.metrics.protocol import Target

    two_rounds = Target(budget_s=1e9, min_repeats=2, max_repeats=2)
    measured = run_protocol(points, run_one, compared, two_rounds, keys=keys)
    assert len(made) == 8 and made[:4] != made[4:]  # two rounds, the second rotated
    summary = sync.protocol_summary(measured)
    assert set(summary["repeats"]) == {2} and summary["run_dir"].notna().all()
    table = sync.table(summary)
    v = sync.verdict(table, "smoke", runs=("r",), hardware="h")
    assert v.lab_value == pytest.approx(240 / 200, rel=0.02)  # the mean over rounds
    assert v.status is Status.NOT_RESOLVED and v.lab_ci is not None and v.lab_ci > 0.3
    one = run_protocol(points, run_one, compared, sync.target(p), keys=keys)  # one round
    lone = sync.verdict(sync.table(sync.protocol_summary(one)), "smoke", hardware="h")
    assert lone.status is Status.NOT_RESOLVED and "1 round(s) per point" in lone.precision


def test_sync_verdict_takes_the_ratio_round_by_round(tmp_path) -> None:
    """Rounds that run faster or slower as a whole (× 1.0, 1.3, 0.8) with KungFu 1.3× Horovod
    in each: the quotient of the two throughputs' intervals holds 1, the ratio per round
    does not."""
    from lab.experiments.protocol_runner import run_protocol
    from lab.metrics.protocol import Target

    p = sync.DEFAULTS["smoke"] | {"systems": ["horovod-gloo", "kungfu-sync"]}
    points, keys, compared = sync.protocol_points(p, p["systems"])
    made: list[tuple[str, int]] = []

    def run_one(point: dict) -> str:
        made.append((point["system"], point["workers"]))
        round_scale = {1: 1.0, 2: 1.3, 3: 0.8}[made.count(made[-1])]
        kungfu = point["system"] == "kungfu-sync" and point["workers"] == 2
        rate = (130.0 if kungfu else 100.0) * round_scale
        return _rate_run(tmp_path / f"run-{len(made)}", rate, point["workers"])

    three = Target(budget_s=1e9, min_repeats=3, max_repeats=3)
    measured = run_protocol(points, run_one, compared, three, keys=keys)
    table = sync.table(sync.protocol_summary(measured))
    unpaired = sync.verdict(table, "smoke", runs=("r",), hardware="h")
    paired = sync.verdict(table, "smoke", runs=("r",), hardware="h", measured=measured)
    assert unpaired.status is Status.NOT_RESOLVED and unpaired.lab_ci > 0.3
    assert paired.status is Status.REPRODUCED and paired.lab_value == pytest.approx(1.3, rel=0.02)
    assert paired.lab_ci < 0.05 and "round by round over 3 rounds" in paired.why
