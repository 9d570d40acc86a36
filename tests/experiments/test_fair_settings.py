"""Default vs fair spin settings: each rank's CPU over its steady steps from a hand-made run
directory, the summary, figure and verdict rule."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments import Status, fair_settings
from lab.metrics.records import format_record

T0 = 1_795_000_000.0


def _run(root: Path, name: str, cores: dict[str, float], step_s: float = 0.2) -> Path:
    """Two ranks on h1/h2: 2 warm-up steps, then 10 steps of ``step_s`` from T0 + 5 s; each
    host's cgroup used ``cores`` of CPU throughout, sampled every 0.5 s."""
    run = root / name
    run.mkdir()
    slots = [{"rank": 0, "host": "h1"}, {"rank": 1, "host": "h2"}]
    (run / "manifest.json").write_text(json.dumps({"experiment": "t", "slots": slots}))
    for rank in (0, 1):
        lines = [format_record("step", rank=rank, step=s, samples=32, seconds=3.0,
                               warmup=True, time=T0 + 2 + s) for s in range(2)]  # fmt: skip
        lines += [
            format_record("step", rank=rank, step=2 + s, samples=32, seconds=step_s,
                          warmup=False, time=T0 + 5 + (s + 1) * step_s)
            for s in range(10)
        ]  # fmt: skip
        (run / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    samples = []
    for k in range(1, 21):
        t = 0.5 * k
        for host, c in cores.items():
            counts = {"nr_periods": 5 * k, "nr_throttled": 4 * k, "throttled_s": 0.1}
            samples.append({"t": t, "time": T0 + t, "host": host, "cpu_s": c * t, **counts})
        samples.append({"t": t, "time": T0 + t, "host": None, "outside_cores": 1.0})
    (run / "hosts.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return run


def test_rank_rows_set_host_cpu_beside_the_steady_steps(tmp_path: Path) -> None:
    rows = fair_settings.rank_rows(_run(tmp_path, "r", {"h1": 0.4, "h2": 0.2}))
    r = rows.set_index("rank")
    assert r["host"].tolist() == ["h1", "h2"]
    assert r["samples"].tolist() == [320, 320]  # warm-up steps left out
    assert r["seconds"].tolist() == pytest.approx([2.0, 2.0])
    assert r["cpu_s"].tolist() == pytest.approx([0.8, 0.4])  # 0.4 and 0.2 cores for 2 s
    assert r["samples_per_cpu_s"].tolist() == pytest.approx([400.0, 800.0])
    assert r["throughput"].tolist() == pytest.approx([160.0, 160.0])
    assert r["throttled"].tolist() == pytest.approx([0.8, 0.8])


def _rounds(pairs: list[tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """(default, fair) rank rows per round, interleaved as ``measure`` runs them."""
    return pd.concat(
        [frame.assign(setting=setting, round=r)
         for r, (d, f) in enumerate(pairs)
         for setting, frame in (("default", d), ("fair", f))],
        ignore_index=True,
    )  # fmt: skip


def test_verdict_rule_and_figure(tmp_path: Path) -> None:
    default = fair_settings.rank_rows(_run(tmp_path, "d", {"h1": 0.4, "h2": 0.4}))
    fair = fair_settings.rank_rows(_run(tmp_path, "f", {"h1": 0.2, "h2": 0.25}))
    table = _rounds([(default, fair)] * 3)
    s = fair_settings.summary(table)
    assert s["setting"].tolist() == ["default", "fair"]
    assert s["samples_per_cpu_s"].tolist() == pytest.approx([400.0, 720.0])
    v = fair_settings.verdict(table, "smoke")
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(1.8)
    assert v.why.startswith("Horovod (MPI): with the fair settings a rank trains 720.0 samples")
    assert "(ranks 640.0–800.0)" in v.why and len(v.runs) == 2
    assert v.precision.endswith("above every run of the other with chance 0.05")
    swapped = table.assign(setting=table["setting"].map({"default": "fair", "fair": "default"}))
    assert fair_settings.verdict(swapped, "smoke").status is Status.NOT_REPRODUCED
    mixed = _rounds([(default, default)] * 3)
    assert fair_settings.verdict(mixed, "smoke").status is Status.NOT_RESOLVED
    close = fair_settings.rank_rows(_run(tmp_path, "c", {"h1": 0.38, "h2": 0.37}))
    v = fair_settings.verdict(_rounds([(default, close)] * 3), "smoke")
    assert v.status is Status.NOT_RESOLVED and "within 10%" in v.why  # apart, by 1.07x only
    with pytest.raises(NothingMeasured):
        fair_settings.verdict(table[table["setting"] == "fair"], "smoke")
    fig = fair_settings.figure(table, caption="test")
    assert [t.name for t in fig.data][-1] == "Horovod (MPI)"
    assert sum(t.showlegend is True for t in fig.data[:-6]) == 2  # one legend entry per rank


def test_three_rounds_each_are_needed_and_one_overlapping_run_undoes_it(tmp_path: Path) -> None:
    """All fair runs above all default ones has chance 1/C(2n, n) with no effect: 1/6 at two
    rounds is not evidence, 1/20 at three is; a fair run inside the default range is
    not resolved however large the pooled ratio."""
    default = fair_settings.rank_rows(_run(tmp_path, "d", {"h1": 0.4, "h2": 0.4}))
    fair = fair_settings.rank_rows(_run(tmp_path, "f", {"h1": 0.2, "h2": 0.25}))
    same = fair_settings.rank_rows(_run(tmp_path, "s", {"h1": 0.41, "h2": 0.42}))
    two = fair_settings.verdict(_rounds([(default, fair)] * 2), "smoke")
    assert two.status is Status.NOT_RESOLVED and "fewer than 3 rounds each" in two.why
    assert two.precision == (
        "2 interleaved rounds; fair over default per round 1.80–1.80×; with no effect, every "
        "run of one setting would come out above every run of the other with chance 0.17"
    )
    table = _rounds([(default, fair), (default, fair), (default, same)])
    assert fair_settings.round_gains(table).tolist() == pytest.approx([1.8, 1.8, 0.964], 1e-3)
    assert fair_settings.summary(table)["rounds"].tolist() == [3, 3]
    v = fair_settings.verdict(table, "smoke")
    assert v.status is Status.NOT_RESOLVED and "the ranks' ranges overlap" in v.why
    assert fair_settings.verdict(_rounds([(default, fair)]), "smoke").precision == (
        "one run per setting: no spread over repeats"
    )


def test_setting_names_are_checked() -> None:
    with pytest.raises(ParameterError, match="default, fair"):
        fair_settings.with_setting(object(), "spinny")
