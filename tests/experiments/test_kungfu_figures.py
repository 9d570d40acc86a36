"""KungFu's figure builders and verdicts on small hand-made summaries: what the notebooks
draw and conclude is computed here, so these tables are the notebooks' contract."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments import Status
from lab.experiments.evidence import protocol_run_dirs
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
    measured = {t.name: t for t in fig.data if not t.meta}
    hvd_a = measured["Horovod (MPI) · a"]
    assert list(hvd_a.x) == [2, 4] and list(hvd_a.y) == [180.0, 300.0]
    published = published_traces(fig)
    assert {t.meta["source"] for t in published} == set(fig9.published()["source"])
    # the paper's 32 workers in their own panel, named short, their source on hover
    assert {t.name for t in published} == {
        "KungFu · ResNet50 (paper)",
        "Horovod · ResNet50 (paper)",
    }
    assert all(t.xaxis == "x2" and "§3.2" in t.hovertemplate for t in published)
    assert hvd_a.xaxis in (None, "x")


def test_fig9_pytorch_systems_get_the_pytorch_ideal_and_stay_out_of_the_ratio() -> None:
    """A PyTorch system's efficiency is over one PyTorch worker alone, never over
    TensorFlow's; it has its own dashed ideal, and KungFu / Horovod stays TensorFlow's."""
    summary = pd.concat(
        [
            _fig9_summary(),
            pd.DataFrame(
                [
                    _row("torch-single", "a", 1, 50.0),
                    _row("torch-ddp", "a", 4, 160.0),
                    _row("horovod-torch", "a", 4, 190.0),
                ]
            ),
        ]
    )
    table = fig9.ideal_table(summary)
    by = table.set_index(["system", "model", "workers"])
    assert by.loc[("torch-ddp", "a", 4), "ideal"] == 200.0
    assert by.loc[("torch-ddp", "a", 4), "efficiency"] == pytest.approx(0.8)
    assert by.loc[("horovod-torch", "a", 4), "ideal_of"] == "torch-single"
    assert by.loc[("horovod-mpi", "a", 4), "ideal"] == 400.0
    ideals = fig9.ideal_traces(fig9.figure(table))
    assert set(ideals) == {"a", "b", "a (torch-single)"}
    assert list(ideals["a (torch-single)"].y) == [50.0, 200.0]
    assert ideals["a (torch-single)"].name == "ideal PyTorch · a"
    v = fig9.verdict(table, "smoke", runs=("r",), hardware="h")
    assert v.lab_value == pytest.approx(360.0 / 300.0)  # not over Horovod PyTorch's 190
    assert not fig9.is_horovod("horovod-torch") and fig9.is_horovod("horovod-mpi")
    points = fig9.points(fig9.DEFAULTS["smoke"], ["horovod-mpi", "torch-ddp"])
    assert [(q["system"], q["workers"]) for q in points][:2] == [
        ("single", 1),
        ("torch-single", 1),
    ]


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


def _fig9_protocol_table() -> pd.DataFrame:
    """run_protocol's table for single (100/s) and Horovod at 2 workers (150/s, speedup
    1.5 ± 0.1, resolved) and at 4 (speedup 2.0 ± 0.3 after 2 repeats: imprecise)."""
    single, h2, h4 = ("single", "m", 1), ("horovod-mpi", "m", 2), ("horovod-mpi", "m", 4)

    def row(kind, a, b, value, ci, repeats=3, precise=True, resolved=True):
        return {"kind": kind, "a": a, "b": b, "value": value, "ci": ci, "repeats": repeats} | {
            "precise": precise,
            "resolved": resolved,
            "reason": "budget",
            "seconds": 190.0,
        }

    table = pd.DataFrame(
        [
            row("throughput", single, None, 100.0, 2.0),
            row("throughput", h2, None, 150.0, 3.0),
            row("speedup", h2, single, 1.5, 0.1),
            row("throughput", h4, None, 200.0, 30.0, 2, False),
            row("speedup", h4, single, 2.0, 0.3, 2, False, True),
            row("speedup", ("mwms", "x", 2), ("single", "x", 1), 1.0, 0.1),  # no single: left out
        ]
    )
    table.attrs["runs"] = pd.DataFrame(
        {
            "point": [h2, h2, h4, single],
            "run_dir": ["/r/a", "/r/b", "", "/r/s"],
            "ok": [True, True, False, True],
        }
    )
    return table


def test_fig9_ideal_table_from_the_protocol_table() -> None:
    table = fig9.protocol_ideal_table(_fig9_protocol_table())
    assert list(table["workers"]) == [2, 4]
    two = table.iloc[0]
    assert two["ideal_rate"] == 100.0 and two["ideal"] == 200.0 and two["actual"] == 150.0
    assert two["efficiency"] == pytest.approx(0.75) and two["efficiency_ci"] == pytest.approx(0.05)
    assert two["run_dir"] == "/r/b" and two["repeats"] == 3 and bool(two["precise"])
    four = table.iloc[1]
    assert four["efficiency"] == pytest.approx(0.5) and pd.isna(four["run_dir"])
    assert not four["precise"] and four["repeats"] == 2
    assert "50% ± 8%" in fig9.efficiency_words(table)
    v = fig9.verdict(table, "smoke", runs=("r",), hardware="h")
    assert v.status is Status.NOT_MEASURED  # no KungFu point
    assert fig9.protocol_ideal_table(_fig9_protocol_table().iloc[0:0]).empty


def test_fig9_protocol_points_compare_each_point_with_single() -> None:
    p = fig9.DEFAULTS["smoke"] | {"models": ["m"], "workers": [2, 4]}
    points, keys, compared = fig9.protocol_points(p, ["horovod-mpi"])
    assert keys == [("single", "m", 1), ("horovod-mpi", "m", 2), ("horovod-mpi", "m", 4)]
    assert len(points) == 3 and points[2]["workers"] == 4
    assert [(c.kind, c.a, c.b) for c in compared] == [
        ("throughput", keys[0], None),
        ("throughput", keys[1], None),
        ("speedup", keys[1], keys[0]),
        ("throughput", keys[2], None),
        ("speedup", keys[2], keys[0]),
    ]
    # the efficiencies are context: min_rounds extends only what the verdict reads
    assert not any(c.decisive for c in compared)
    _, _, both = fig9.protocol_points(p, ["horovod-mpi", "kungfu-sync"])
    assert [(c.a[0], c.b[0]) for c in both if c.decisive] == [("kungfu-sync", "horovod-mpi")]
    assert fig9.target(p).budget_s == fig9.DEFAULTS["smoke"]["budget_s"]
    assert fig9.target(p).min_rounds == fig9.DEFAULTS["smoke"]["min_rounds"]


def test_fig9_verdict_takes_kungfu_over_horovod_round_by_round(tmp_path) -> None:
    """Rounds that run faster or slower as a whole (× 1.0, 1.3, 0.8), KungFu 1.2× Horovod
    in each: the quotient of the two throughputs' intervals holds 1, the ratio per round
    does not."""
    from lab.experiments.protocol_runner import run_protocol
    from lab.metrics.protocol import Target

    p = fig9.DEFAULTS["smoke"] | {"models": ["m"], "workers": [2]}
    points, keys, compared = fig9.protocol_points(p, ["horovod-mpi", "kungfu-sync"])
    pair = [(c.a, c.b) for c in compared if c.b and c.b[0] == "horovod-mpi"]
    assert pair == [(("kungfu-sync", "m", 2), ("horovod-mpi", "m", 2))]
    made: list[str] = []

    def run_one(point: dict) -> str:
        made.append(point["system"])
        scale = {1: 1.0, 2: 1.3, 3: 0.8}[made.count(made[-1])]
        rate = {"single": 60.0, "horovod-mpi": 100.0, "kungfu-sync": 120.0}[made[-1]] * scale
        path = tmp_path / f"run-{len(made)}"
        _steps_run(path, [rate * (1 + 0.01 * ((i % 3) - 1)) for i in range(12)])
        (path / "manifest.json").write_text('{"params": {}, "state": "succeeded"}')
        return str(path)

    three = Target(budget_s=1e9, min_repeats=3, max_repeats=3)
    measured = run_protocol(points, run_one, compared, three, keys=keys)
    table = fig9.protocol_ideal_table(measured)
    assert table["system"].tolist() == ["horovod-mpi", "kungfu-sync"]  # one row a point
    assert table["ideal"].tolist() == pytest.approx([2 * 60.0 * 1.033] * 2, rel=0.01)
    unpaired = fig9.verdict(table, "smoke", runs=("r",), hardware="h")
    paired = fig9.verdict(table, "smoke", runs=("r",), hardware="h", measured=measured)
    assert unpaired.status is Status.NOT_RESOLVED and unpaired.lab_ci > 0.3
    assert paired.status is Status.REPRODUCED and paired.lab_value == pytest.approx(1.2, rel=0.02)
    assert paired.lab_ci < 0.05 and "round by round over 3 rounds" in paired.why


def _steps_run(path, rates: list[float]):
    """A run directory whose rank 0 printed one step record per rate (samples/s)."""
    from lab.metrics.records import format_record

    path.mkdir(parents=True)
    lines = [
        format_record("step", rank=0, step=i, samples=32, seconds=32 / rate)
        for i, rate in enumerate(rates)
    ]
    (path / "rank-0.log").write_text("\n".join(lines) + "\n")
    return str(path)


def _protocol_row(setting: str, value: float, ci: float, resolved: bool, **kw) -> dict:
    """One overhead row of run_protocol's table, as Judgement leaves it."""
    return {
        "quantity": f"overhead({setting})",
        "kind": "overhead",
        "a": ("horovod-gloo", "m", setting),
        "b": ("horovod-gloo", "m", "baseline"),
        "value": value,
        "ci": ci,
        "low": value - ci,
        "high": value + ci,
        "rel_ci": ci / (1 - value),
        "repeats": kw.get("repeats", 3),
        "precise": kw.get("precise", resolved),
        "resolved": resolved,
        "direction": int(resolved),
        "reason": kw.get("reason", "precise"),
        "seconds": kw.get("seconds", 120.0),
        "target_rel_ci": 0.05,
        "budget_s": 300.0,
        "sentence": "",
    }


def _protocol_table() -> pd.DataFrame:
    """Noise scale resolved at the paper's value, variance/1 not resolved within the
    budget (interval holds 0 and the paper's 20%), variance/8 resolved far from it."""
    table = pd.DataFrame(
        [
            _protocol_row("noise scale", 0.05, 0.01, True),
            _protocol_row("variance interval 1", 0.10, 0.15, False, reason="budget", seconds=310),
            _protocol_row("variance interval 8", 0.30, 0.02, True),
            {"quantity": "throughput(x)", "kind": "throughput", "a": "x", "value": 9.0},
        ]
    )
    table.attrs["runs"] = pd.DataFrame(
        {"point": ["a", "b", "c"], "run_dir": ["/r/1", "/r/2", ""], "ok": [True, False, False]}
    )
    return table


def test_fig8_overheads_from_the_protocol_table_say_what_was_resolved() -> None:
    from lab.experiments.kungfu import fig8

    table = fig8.overheads(_protocol_table()).set_index("setting")
    assert list(table.index) == ["noise scale", "variance interval 1", "variance interval 8"]
    assert table.loc["noise scale", "overhead"] == pytest.approx(0.05)
    assert table.loc["noise scale", "overhead_ci"] == pytest.approx(0.01)
    paper = fig8.published().set_index("setting")["value"]
    assert table.loc["variance interval 8", "published"] == pytest.approx(
        paper["variance interval 8"]
    )
    status = table["status"].to_dict()
    assert status == {
        "noise scale": Status.REPRODUCED.value,
        "variance interval 1": Status.NOT_RESOLVED.value,
        "variance interval 8": Status.NOT_REPRODUCED.value,
    }
    found = table["finding"]
    assert "resolved; the published 4.6% lies inside" in found["noise scale"]
    assert "not resolved at this scale within 5 minutes" in found["variance interval 1"]
    assert "lies inside" in found["variance interval 1"]
    assert "lies outside" in found["variance interval 8"]
    fig = fig8.figure(table.reset_index(), caption="test", workers=2, batch_size=32)
    assert fig.data[0].name == "lab"
    assert len(published_traces(fig)) == 1
    assert protocol_run_dirs(_protocol_table()) == ["/r/1"]
    assert fig8.overheads(_protocol_table().iloc[3:]).empty


def test_fig8_verdict_from_the_protocol_names_each_settings_finding() -> None:
    from lab.experiments.kungfu import fig8

    table = fig8.overheads(_protocol_table())
    v = fig8.verdict(table, "smoke", runs=("/r/1",), hardware="h")
    assert v.status is Status.NOT_REPRODUCED  # variance interval 8 lies far from the paper
    assert "variance interval 1" in v.claim  # the paper's largest overhead heads it
    assert v.lab_value == pytest.approx(10.0) and v.lab_ci == pytest.approx(15.0)
    assert "not resolved at this scale within 5 minutes" in v.why
    assert v.why.count("→") == 3


def test_fig8_protocol_points_compare_each_setting_with_its_baseline() -> None:
    from lab.errors import ParameterError
    from lab.experiments.kungfu import fig8

    p = fig8.DEFAULTS["smoke"] | {"models": ["m"], "settings": ["variance interval 8"]}
    points, keys, compared = fig8.protocol_points(p, ["s1", "s2"])
    assert keys == [
        ("s1", "m", "baseline"),
        ("s1", "m", "variance interval 8"),
        ("s2", "m", "baseline"),
        ("s2", "m", "variance interval 8"),
    ]
    assert points[1]["monitor"] == "variance" and points[1]["interval"] == 8
    assert [(c.kind, c.a, c.b) for c in compared] == [
        ("overhead", keys[1], keys[0]),
        ("overhead", keys[3], keys[2]),
    ]
    assert fig8.target(fig8.DEFAULTS["paper"]).rel_ci == 0.02
    with pytest.raises(ParameterError):
        fig8.protocol_points(p | {"settings": ["sometimes"]}, ["s1"])


def test_fig8_kungfus_monitor_pairs_each_setting_within_its_runs() -> None:
    """At smoke scale KungFu's own monitor switches off and on within a run: a monitored
    setting is two phases of one launch and has no separate baseline run; a system that
    cannot alternate keeps separate runs."""
    from lab.experiments.kungfu import fig8

    p = fig8.DEFAULTS["smoke"] | {"models": ["m"]}
    assert p["alternate"] > 0 and p["steps"] % (2 * p["alternate"]) == 0
    points, keys, compared = fig8.protocol_points(p, ["kungfu-monitor", "horovod-gloo"])
    on, off = keys[0], keys[1]
    assert on == ("kungfu-monitor", "m", "variance interval 1") and len(off) == 4
    assert {k: v for k, v in points[0].items() if k != "phase"} == {
        k: v for k, v in points[1].items() if k != "phase"
    }
    assert (points[0]["phase"], points[1]["phase"]) == ("on", "off")
    assert points[0]["alternate"] == p["alternate"] and points[0]["steps"] == p["steps"]
    assert keys[2:] == [("horovod-gloo", "m", "baseline"), ("horovod-gloo", "m", *on[2:])]
    assert all("phase" not in pt and "alternate" not in pt for pt in points[2:])
    assert [(c.a, c.b) for c in compared] == [(on, off), (keys[3], keys[2])]
    rows = pd.DataFrame(
        [_protocol_row("variance interval 1", 0.07, 0.02, True) | {"a": on, "b": off}]
    )
    out = fig8.overheads(rows)
    assert out.loc[0, "pairing"] == fig8.WITHIN_RUNS and out.loc[0, "system"] == "kungfu-monitor"
    assert "each with the monitor off and on" in out.loc[0, "finding"]
    assert fig8.DEFAULTS["paper"]["alternate"] == 0  # the artifact's separate runs


def test_fig8_overheads_from_protocol_runs_on_step_records(tmp_path) -> None:
    """run_protocol over run directories with known rates: 5% and 20% overheads found."""
    from lab.experiments.kungfu import fig8
    from lab.experiments.protocol_runner import run_protocol

    rates = {"baseline": 100.0, "noise scale": 95.0, "variance interval 1": 80.0}
    p = fig8.DEFAULTS["smoke"] | {"models": ["m"], "settings": list(rates)}
    points, keys, compared = fig8.protocol_points(p, ["horovod-gloo"])
    made = []

    def run_one(point: dict) -> str:
        made.append(point["setting"])
        rate = rates[point["setting"]] * (1 + 0.002 * (len(made) % 3))  # a little drift
        jitter = [rate - 1, rate + 1, rate, rate - 0.5, rate + 0.5] * 2
        path = tmp_path / f"run-{len(made)}"
        _steps_run(path, jitter)
        (path / "manifest.json").write_text('{"params": {}, "state": "succeeded"}')
        return str(path)

    table = run_protocol(points, run_one, compared, fig8.target(p), keys=keys)
    out = fig8.overheads(table).set_index("setting")
    assert out.loc["noise scale", "overhead"] == pytest.approx(0.05, abs=0.01)
    assert out.loc["variance interval 1", "overhead"] == pytest.approx(0.20, abs=0.01)
    # precise from the first round, yet measured until the scale's min_repeats, then stopped
    assert out["resolved"].all() and (out["repeats"] == p["min_repeats"]).all()
    assert p["min_repeats"] > 3
    assert len(protocol_run_dirs(table)) == len(made)


def test_fig8_status_rule() -> None:
    from lab.experiments.kungfu import fig8

    assert fig8.status_of(0.05, 0.01, 0.046) is Status.REPRODUCED
    assert fig8.status_of(0.01, 0.02, 0.046) is Status.NOT_REPRODUCED  # published outside
    assert fig8.status_of(0.02, 0.05, 0.046) is Status.NOT_RESOLVED  # holds 0 and published
    assert fig8.status_of(0.05, math.nan, 0.046) is Status.NOT_RESOLVED
    assert fig8.combined([Status.REPRODUCED, Status.NOT_RESOLVED]) is Status.NOT_RESOLVED
    assert fig8.combined([Status.NOT_RESOLVED, Status.NOT_REPRODUCED]) is Status.NOT_REPRODUCED
    assert fig8.combined([Status.REPRODUCED]) is Status.REPRODUCED


def test_fig8_verdict_is_headed_by_the_largest_published_overhead() -> None:
    from lab.experiments.kungfu import fig8

    paper = fig8.published().set_index("setting")["value"]
    table = pd.DataFrame(
        [
            {
                "system": "s",
                "label": "S",
                "model": "m",
                "setting": name,
                "overhead": value,
                "overhead_ci": 0.01,
                "published": value,
            }
            for name, value in paper.items()
        ]
    )
    table["status"] = Status.REPRODUCED.value
    v = fig8.verdict(table, "smoke", runs=("r",), hardware="h")
    top = paper.idxmax()
    assert top in v.claim and v.published_value == pytest.approx(100 * paper[top])
    assert v.status is Status.REPRODUCED and v.why.count("published") == len(paper)
    with pytest.raises(NothingMeasured):
        fig8.verdict(table.iloc[0:0], "smoke", runs=("r",))


def _elastic_run(path, grow_after: float = 12.0, shrink_after: float = 0.5) -> str:
    """A resizing run's directory as the lab leaves it: rank logs and events.jsonl.

    Hosts change at t=0 (1 worker), t=10 (2) and t=30 (1); the first step at 2 workers
    ends ``grow_after`` s after its request, the first back at 1 ``shrink_after`` s after.
    """
    from lab.experiments.kungfu.scaling import write_events
    from lab.metrics.records import format_record

    t0 = 1_700_000_000.0
    path.mkdir(parents=True)
    (path / "manifest.json").write_text('{"params": {"model": "tiny_cnn", "batch_size": 32}}')
    plan = [(t0 + t, 1) for t in range(1, 10)]
    plan += [(t0 + 10 + grow_after + i, 2) for i in range(3)]
    plan += [(t0 + 30 + shrink_after + i, 1) for i in range(3)]
    logs: dict[int, list[str]] = {0: [], 1: []}
    for step, (when, size) in enumerate(plan):
        for rank in range(size):
            logs[rank].append(
                format_record(
                    "step", rank=rank, step=step, samples=32, seconds=0.5, size=size, time=when
                )
            )
    for rank, lines in logs.items():
        (path / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    events = [
        {"kind": "event", "name": "discovery", "slots": n, "time": t0 + at}
        for at, n in ((0.0, 1), (10.0, 2), (30.0, 1))
    ]
    write_events(path, events)
    return str(path)


def test_fig7_rebuilds_from_the_run_directory_alone(tmp_path) -> None:
    from lab.experiments.kungfu import fig7
    from lab.experiments.kungfu.scaling import read_events

    run = _elastic_run(tmp_path / "run")
    assert [e["slots"] for e in read_events(run)] == [1, 2, 1]
    table = fig7.resizes(run)
    assert table["resize"].tolist() == ["resize 1→2", "resize 2→1"]
    assert table["latency"].tolist() == pytest.approx([12.0, 0.5])
    paper = fig7.published().set_index("setting")["value"]
    assert table["published"].tolist() == [paper["resize 1→2"], paper["resize 2→1"]]
    fig = fig7.figure(run, caption="test")
    assert [s["x0"] for s in fig.layout.shapes] == [10.0, 30.0]  # a line at each change
    # both workers end one 32-sample step a second: 64 img/s (not the steps' rates, 2 x 64)
    assert max(fig.data[0].y) == pytest.approx(2 * 32 / 1.0)
    v = fig7.verdict(table, "smoke", runs=(run,), hardware="h")
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(12.0)
    assert v.published_value == paper["resize 1→2"] and "resize 2→1: 0.5 s" in v.why


def test_fig7_status_rule_and_missing_events(tmp_path) -> None:
    from lab.experiments.kungfu import fig7

    slow_shrink = fig7.resizes(_elastic_run(tmp_path / "a", grow_after=1.0, shrink_after=3.0))
    assert fig7.status_of(slow_shrink) is Status.NOT_REPRODUCED
    unserved = slow_shrink.assign(latency=[1.0, math.nan])
    assert fig7.status_of(unserved) is Status.NOT_RESOLVED
    assert fig7.status_of(slow_shrink.iloc[:1]) is Status.NOT_RESOLVED  # grew, never shrank
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "rank-0.log").write_text("")
    with pytest.raises(NothingMeasured, match=r"events\.jsonl"):
        fig7.figure(bare)


def _kungfu_elastic_run(path, grow_after: float = 8.0, shrink_after: float = 0.1) -> str:
    """A KungFu resizing run's directory: no events.jsonl, rank 0 printed its requests
    (``discovery`` records, the first at the schedule's start) among its steps."""
    import json

    from lab.metrics.records import format_record

    run = _elastic_run(path, grow_after, shrink_after)
    (path / "events.jsonl").unlink()
    (path / "manifest.json").write_text(
        json.dumps({"params": {"system": "kungfu-elastic", "model": "tiny_cnn"}})
    )
    t0 = 1_700_000_000.0
    asks = [
        format_record("event", name="discovery", rank=0, slots=n, time=t0 + at)
        for at, n in ((0.5, 1), (10.0, 2), (30.0, 1))
    ]
    with (path / "rank-0.log").open("a") as f:
        f.write("\n".join(asks) + "\n")
    return run


def test_fig7_kungfus_run_reads_its_own_requests_and_heads_the_verdict(tmp_path) -> None:
    from lab.experiments.kungfu import fig7

    kf = _kungfu_elastic_run(tmp_path / "kf", grow_after=8.0, shrink_after=0.1)
    hvd = _elastic_run(tmp_path / "hvd", grow_after=1.0, shrink_after=3.0)  # not reproduced
    assert fig7.system_of(kf) == "kungfu-elastic" and fig7.system_of(hvd) == fig7.SYSTEM
    table = fig7.resizes_of([hvd, kf])
    assert table["system"].tolist() == [fig7.SYSTEM] * 2 + ["kungfu-elastic"] * 2
    assert table["latency"].tolist() == pytest.approx([1.0, 3.0, 8.0, 0.1])
    v = fig7.verdict(table, "smoke", runs=(hvd, kf), hardware="h")
    # KungFu's own run is judged (grow 8 s > shrink 0.1 s), the lab's is reported beside
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(8.0)
    assert v.why.startswith("KungFu elastic") and "Horovod Elastic (lab): resize 1→2: 1 s" in v.why
    fig = fig7.figure([kf, hvd], caption="test")
    assert [t.name for t in fig.data] == ["KungFu · tiny_cnn", "Horovod Elastic · tiny_cnn"]
    assert [s["x0"] for s in fig.layout.shapes] == [9.5, 29.5]  # KungFu's own requests


def _adaptive_run(path, policy: str, batch: int, to_target: list[float | None]) -> dict:
    """A run directory of lab.bench.adaptive as rank 0 leaves it (one seed per entry of
    ``to_target``), and its summary row."""
    from lab.metrics.records import format_record

    path.mkdir(parents=True)
    lines = []
    for seed, target in enumerate(to_target, 1):
        lines += [
            format_record(
                "step",
                rank=0,
                seed=seed,
                step=i,
                samples=batch // 2,
                batch_size=batch * (2 if policy == "adaptive" and i > 1 else 1),
                seconds=0.1,
                noise_scale=10.0 + i,
                eval_loss=1.0 / (i + 1),
            )
            for i in range(4)
        ]
        lines.append(
            format_record(
                "summary",
                rank=0,
                seed=seed,
                final_batch_size=batch,
                time_to_target=target,
                steps_to_target=None if target is None else 3,
                samples_to_target=None if target is None else 3 * batch,
                eval_loss=0.25,
                target_loss=0.3,
            )
        )
    (path / "rank-0.log").write_text("\n".join(lines) + "\n")
    return {"policy": policy, "batch": batch, "state": "succeeded", "run_dir": str(path)}


def test_adaptive_builders_read_the_runs(tmp_path) -> None:
    from lab.experiments.kungfu import adaptive

    summary = pd.DataFrame(
        [
            _adaptive_run(tmp_path / "a", "adaptive", 8, [1.0, 1.2]),
            _adaptive_run(tmp_path / "f8", "fixed", 8, [None, None]),
            _adaptive_run(tmp_path / "f128", "fixed", 128, [2.0, 2.2]),
        ]
    )
    curves = adaptive.curves(summary)
    assert set(curves["run"]) == {"adaptive (start 8)", "fixed (start 8)", "fixed (start 128)"}
    assert curves["img_per_s"].max() == pytest.approx(128 / 0.1)  # the whole batch per step
    one = curves[(curves["run"] == "fixed (start 8)") & (curves["seed"] == 2)]
    assert one["elapsed"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])  # per seed's clock
    fig = adaptive.figure(curves, caption="test", workers=2)
    assert len(fig.data) == 3 * 2 * len(adaptive.PANELS)  # runs x seeds x panels
    assert sum(bool(t.showlegend) for t in fig.data) == 3
    assert {t.yaxis for t in fig.data} == {"y", "y2", "y3", "y4"}
    finals = adaptive.finals(summary).set_index(["policy", "start batch", "seed"])
    assert finals.loc[("fixed", 128, 2), "time_to_target"] == 2.2
    assert math.isnan(finals.loc[("fixed", 8, 1), "time_to_target"])
    t = adaptive.times(finals.reset_index()).set_index(["policy", "start batch"])
    assert t.loc[("adaptive", 8), "time_to_target"] == pytest.approx(1.1)
    assert t.loc[("adaptive", 8), "ci"] == pytest.approx(12.706 * 0.1, rel=1e-3)  # t(1) x s/√2
    assert (t.loc[("fixed", 8), "reached"], t.loc[("fixed", 8), "seeds"]) == (0, 2)


def test_adaptive_arms_of_one_launch_are_told_apart_by_their_records(tmp_path) -> None:
    """The sweep's one launch trains every arm; the records, not the point, name each arm."""
    from lab.bench.adaptive import Config as AdaptiveConfig
    from lab.experiments.kungfu import adaptive
    from lab.metrics.records import format_record

    p = {"start_batch": 8, "fixed_batches": [8, 128], "max_batch": 128, "workers": 2,
         "features": 64, "steps": 50, "seeds": 2}  # fmt: skip
    (point,) = adaptive.points(p)
    assert point["arms"] == "adaptive:8,fixed:8,fixed:128"
    cmd = adaptive.argv(point)  # what the ranks parse, read back with their own config
    assert cmd[:3] == ["python", "-m", "lab.bench.adaptive"]
    cfg = AdaptiveConfig.from_argv(cmd[3:])
    assert cfg.arm_list == [("adaptive", 8), ("fixed", 8), ("fixed", 128)]
    assert (cfg.features, cfg.seeds, cfg.max_batch_size, cfg.until_target) == (64, 2, 128, True)
    cmd = adaptive.argv({**point, "arms": None, "policy": "fixed", "batch": 8})
    assert AdaptiveConfig.from_argv(cmd[3:]).arm_list == [("fixed", 8)]  # the controls' run
    with pytest.raises(ParameterError) as err:  # refused in the lab, named by its field
        adaptive.argv({**point, "steps": 0})
    assert err.value.name == "steps"

    run = tmp_path / "run"
    run.mkdir()
    lines = []
    for seed, order in ((1, [("adaptive", 8, 1.0), ("fixed", 128, 2.0)]),
                        (2, [("fixed", 128, 2.5), ("adaptive", 8, 1.5)])):  # fmt: skip
        for policy, batch, to_target in order:
            mark = {"rank": 0, "seed": seed, "policy": policy, "start_batch": batch}
            step = {"samples": batch // 2, "batch_size": batch, "seconds": 0.5, "noise_scale": 1.0,
                    "eval_loss": 1.0}  # fmt: skip
            lines += [format_record("step", **mark, step=i, **step) for i in range(2)]
            lines.append(format_record("summary", **mark, final_batch_size=batch,
                                       time_to_target=to_target))  # fmt: skip
    (run / "rank-0.log").write_text("\n".join(lines) + "\n")
    summary = pd.DataFrame([{**point, "state": "succeeded", "run_dir": str(run)}])
    curves = adaptive.curves(summary)
    assert set(curves["run"]) == {"adaptive (start 8)", "fixed (start 128)"}
    assert curves.groupby(["run", "seed"])["elapsed"].max().tolist() == [1.0] * 4
    finals = adaptive.finals(summary).set_index(["policy", "start batch", "seed"])
    assert finals.loc[("fixed", 128, 2), "time_to_target"] == 2.5
    assert adaptive.seed_differences(finals.reset_index(), 8, 128).mean == pytest.approx(-1.0)


def _finals(times: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    rows = [
        {"policy": p, "start batch": b, "seed": i, "time_to_target": x}
        for (p, b), xs in times.items()
        for i, x in enumerate(xs)
    ]
    return pd.DataFrame(rows)


def test_adaptive_verdict_says_the_paper_publishes_no_number(tmp_path) -> None:
    from lab.experiments.kungfu import adaptive

    nan = math.nan
    assert adaptive.published().empty  # the artifact prints no number for Fig 4
    finals = _finals({("adaptive", 8): [1.0, 1.1, 0.9], ("fixed", 8): [nan] * 3,
                      ("fixed", 128): [2.0, 2.1, 1.9]})  # fmt: skip
    v = adaptive.verdict(finals, "smoke", runs=("r",), hardware="h")
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(1.0)
    assert v.lab_ci == pytest.approx(4.303 * 0.1 / math.sqrt(3), rel=1e-3)
    assert v.published_value is None and "publishes no number for Fig 4" in v.why
    assert "(3/3 seeds)" in v.why and "fastest fixed batch (128)" in v.why
    overlap = _finals({("adaptive", 8): [1.0, 2.0, 3.0], ("fixed", 128): [2.0, 2.1, 1.9]})
    assert adaptive.status_of(overlap)[0] is Status.NOT_RESOLVED
    # a make run's seeds: the policies' intervals overlap, yet every seed was faster
    paired = _finals({("adaptive", 32): [0.95, 0.79, 0.81], ("fixed", 1024): [1.26, 1.0, 1.1]})
    status, words = adaptive.status_of(paired)
    assert status is Status.REPRODUCED and "adaptive − fixed = -0.27 ± 0.13 s" in words
    shuffled = _finals({("adaptive", 32): [0.95, 0.79, 0.81], ("fixed", 1024): [1.0, 1.1, 1.26]})
    assert adaptive.status_of(shuffled)[0] is Status.NOT_RESOLVED  # seeds pair, not ranks
    slower = _finals({("adaptive", 8): [3.0, 3.1, 2.9], ("fixed", 128): [2.0, 2.1, 1.9]})
    assert adaptive.status_of(slower)[0] is Status.NOT_REPRODUCED
    missed = _finals({("adaptive", 8): [1.0, nan, 1.0], ("fixed", 128): [2.0, 2.1, 1.9]})
    status, words = adaptive.status_of(missed)
    assert status is Status.NOT_REPRODUCED and "2/3" in words
    only_adaptive = _finals({("adaptive", 8): [1.0, 1.1], ("fixed", 8): [nan, 2.0]})
    assert adaptive.status_of(only_adaptive)[0] is Status.REPRODUCED
    one_seed = _finals({("adaptive", 8): [1.0], ("fixed", 128): [2.0]})
    assert adaptive.status_of(one_seed)[0] is Status.NOT_RESOLVED
    nobody = _finals({("adaptive", 8): [nan], ("fixed", 128): [nan]})
    assert adaptive.status_of(nobody)[0] is Status.NOT_RESOLVED
    with pytest.raises(NothingMeasured):
        adaptive.verdict(finals.iloc[0:0], "smoke", runs=("r",))
