"""KungFu Fig 7 (throughput around resizes) and Fig 4 (adaptive batch) as a reader sees
them: Fig 7's axis against the samples the ranks logged, Fig 4's panels against one wild
noise-scale estimate and a run whose loss rises, and both figures at their 900×520 size."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lab.metrics.records import format_record

T0 = 1_700_000_000.0


# -- Fig 7 --------------------------------------------------------------------------------


def step_table() -> pd.DataFrame:
    """Two ranks' steps by hand, on a clock whose zero is T0: rank 0 ends a 32-sample step
    every 0.25 s from 0.25 s to 4 s; rank 1 joins with 16-sample steps of 0.1 s ending at
    2.05, 2.15, ... 3.95 s."""
    rows = [
        {"rank": 0, "time": T0 + 0.25 * i, "seconds": 0.25, "samples": 32} for i in range(1, 17)
    ]
    rows += [
        {"rank": 1, "time": T0 + 2.05 + 0.1 * i, "seconds": 0.1, "samples": 16} for i in range(19)
    ]
    return pd.DataFrame(rows)


def test_a_bin_holds_the_samples_of_the_steps_that_ended_in_it() -> None:
    from lab.experiments.kungfu.fig7 import binned_throughput

    steps = step_table()
    line = binned_throughput(steps, T0).set_index("t")
    # the first step began at 0 and the last ended at 4: whole bins [0,1) .. [3,4)
    assert line.index.tolist() == [0.5, 1.5, 2.5, 3.5]
    for mid in line.index:
        ended = steps[(steps["time"] - T0 >= mid - 0.5) & (steps["time"] - T0 < mid + 0.5)]
        assert line.loc[mid, "samples"] == ended["samples"].sum()
        assert line.loc[mid, "throughput"] == pytest.approx(ended["samples"].sum() / 1.0)
        assert line.loc[mid, "steps"] == len(ended)
    # [2,3): rank 0 ends 4 steps (128 samples), rank 1 ends 10 (160): 288 img/s, which is
    # what the two ranks' own rates add up to (128/s + 160/s), not the sum of the 14 steps'
    # rates (4 x 128 + 10 x 160 = 2112), which the figure drew before
    assert line.loc[2.5, "throughput"] == pytest.approx(288.0)
    rates = steps["samples"] / steps["seconds"]
    per_rank = rates.groupby(steps["rank"]).mean()
    assert line.loc[2.5, "throughput"] == pytest.approx(per_rank.sum())


def test_a_pause_reads_zero_and_bins_follow_their_width() -> None:
    from lab.experiments.kungfu.fig7 import binned_throughput

    steps = pd.DataFrame(
        [{"time": T0 + t, "seconds": 0.2, "samples": 10} for t in (0.2, 0.9, 1.4, 4.2, 4.6, 5.9)]
    )
    line = binned_throughput(steps, T0, width=2.0).set_index("t")
    assert line.index.tolist() == [1.0, 3.0]  # bins [0,2) and [2,4); [4,6) is not whole
    assert line["throughput"].tolist() == pytest.approx([30 / 2.0, 0.0])
    assert binned_throughput(steps.iloc[0:0], T0).empty


def elastic_run(path: Path, step_s: float = 0.0015, batch: int = 32) -> str:
    """A Horovod Elastic run as tiny_cnn leaves it on a 2-core machine: ranks at ~1.5 ms a
    step (~21 k img/s each), hosts changing at 0 s (1 worker), 4 s (2) and 9 s (1), the
    new worker's first step 2.5 s after the grow, the shrink served at once."""
    from lab.experiments.kungfu.scaling import write_events

    path.mkdir(parents=True)
    (path / "manifest.json").write_text(
        json.dumps({"params": {"model": "tiny_cnn", "batch_size": batch}})
    )
    rng = np.random.default_rng(0)
    logs: dict[int, list[str]] = {0: [], 1: []}
    for rank, start, end in ((0, 0.8, 12.0), (1, 6.5, 9.0)):
        t, step = start, 0
        while t < end:
            seconds = step_s * (1 + 0.2 * rng.random())
            t += seconds
            logs[rank].append(
                format_record(
                    "step",
                    rank=rank,
                    step=step,
                    samples=batch,
                    seconds=round(seconds, 6),
                    size=2 if 6.5 <= t < 9 else 1,
                    time=T0 + t,
                )
            )
            step += 1
    for rank, lines in logs.items():
        (path / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    write_events(
        path,
        [
            {"kind": "event", "name": "discovery", "slots": n, "time": T0 + at}
            for at, n in ((0.0, 1), (4.0, 2), (9.0, 1))
        ],
    )
    return str(path)


def _logged(run: str) -> pd.DataFrame:
    """The step records read straight from the rank logs (not through the lab's store)."""
    rows = []
    for log in Path(run).glob("rank-*.log"):
        for line in log.read_text().splitlines():
            rec = json.loads(line.split("@lab ", 1)[1])
            rows.append(rec)
    return pd.DataFrame(rows)


def test_fig7_axis_agrees_with_the_ranks_logged_samples(tmp_path) -> None:
    from lab.experiments.kungfu import fig7

    run = elastic_run(tmp_path / "run")
    fig = fig7.figure(run, caption="test")
    (trace,) = fig.data
    logged = _logged(run)
    for mid, total in zip(trace.x, trace.y, strict=True):
        ended = logged[(logged["time"] - T0 >= mid - 0.5) & (logged["time"] - T0 < mid + 0.5)]
        assert total == pytest.approx(ended["samples"].sum())  # 1-s bins: samples = img/s
    # two workers at ~1.5-1.8 ms a step: at most ~2 x 21 k img/s, nowhere near millions
    per_rank = (logged["samples"] / logged["seconds"]).groupby(logged["rank"]).median()
    assert max(trace.y) <= 1.05 * per_rank.sum()
    assert max(trace.y) > 1.5 * per_rank.min()  # the grown job did more than one worker
    assert trace.name == "Horovod Elastic · tiny_cnn"


def test_fig7_footnote_gives_each_runs_latencies_beside_the_published(tmp_path) -> None:
    from lab.experiments.kungfu import fig7

    run = elastic_run(tmp_path / "run")
    fig = fig7.figure(run, caption="Lab: measured at scale 'smoke'.")
    (note,) = [a for a in fig.layout.annotations if a.name == "caption"]
    text = note.text.replace("<br>", " ")
    assert "Horovod Elastic resize 1→2: 2.5" in text and "resize 2→1" in text
    assert "published (KungFu artifact): resize 1→2" in text and text.endswith("'smoke'.")
    assert all(len(line) <= 130 for line in note.text.split("<br>"))


# -- Fig 4 --------------------------------------------------------------------------------


def adaptive_run(path: Path, seeds: int = 3) -> dict[str, Any]:
    """One launch of lab.bench.adaptive as rank 0 leaves it, shaped like a smoke run:
    arms adaptive from 32 (doubling every 10 steps to 1024, reaching the target at step
    60), fixed 32 (its loss rising from 3.6 to 6.5 over 300 steps: it diverges at lr 1)
    and fixed 1024 (the target at step 90); the noise scale grows from ~1.6 k to ~30 k,
    with one estimate of -4·10^7 early in the first seed."""
    path.mkdir(parents=True)
    rng = np.random.default_rng(1)
    lines = [format_record("header", rank=0, target_loss=1.19, optimum_loss=1.08, lr=1.0)]
    arms = (("adaptive", 32, 60), ("fixed", 32, None), ("fixed", 1024, 90))
    for seed in range(1, seeds + 1):
        for policy, start, reach in arms:
            n = reach or 300
            for i in range(n):
                batch = min(start * 2 ** (i // 10), 1024) if policy == "adaptive" else start
                frac = (i + 1) / n
                loss = 3.47 - (3.47 - 1.18) * frac if reach else 3.6 + 2.9 * frac
                noise = 1600 * 20**frac * (1 + 0.3 * rng.standard_normal())
                if seed == 1 and policy == "fixed" and i == 2:
                    noise = -4e7
                lines.append(
                    format_record(
                        "step",
                        rank=0,
                        seed=seed,
                        policy=policy,
                        start_batch=start,
                        step=i,
                        samples=batch // 2,
                        batch_size=batch,
                        seconds=0.0015 + batch * 4e-6,
                        eval_loss=round(loss, 4),
                        noise_scale=noise,
                    )
                )
            secs = None if reach is None else n * 0.002
            lines.append(
                format_record(
                    "summary",
                    rank=0,
                    seed=seed,
                    policy=policy,
                    start_batch=start,
                    final_batch_size=batch,
                    time_to_target=secs,
                    steps_to_target=reach,
                    samples_to_target=None,
                    eval_loss=round(loss, 4),
                    target_loss=1.19,
                )
            )
    (path / "rank-0.log").write_text("\n".join(lines) + "\n")
    return {"arms": "adaptive:32,fixed:32,fixed:1024", "state": "succeeded", "run_dir": str(path)}


def test_fig4_says_which_run_diverged(tmp_path) -> None:
    from lab.experiments.kungfu import adaptive

    curves = adaptive.curves(pd.DataFrame([adaptive_run(tmp_path / "a")]))
    rises = adaptive.loss_rises(curves).set_index("run")
    assert rises["diverged"].to_dict() == {
        "adaptive (start 32)": False,
        "fixed (start 1024)": False,
        "fixed (start 32)": True,
    }
    assert rises.loc["fixed (start 32)", "last"] > rises.loc["fixed (start 32)", "first"] + 2
    fig = adaptive.figure(curves, caption="Lab: test.", workers=2)
    names = [t.name for t in fig.data if t.showlegend]
    assert names == ["adaptive · from 32", "fixed · 1024", "fixed · 32 (diverged)"]
    note = next(a.text for a in fig.layout.annotations if a.name == "caption").replace("<br>", " ")
    assert "Diverged at learning rate 1 (the loss rose in every seed): fixed · 32" in note
    assert any(s.y0 == pytest.approx(1.19) for s in fig.layout.shapes)  # the target line


def test_fig4_noise_axis_is_not_stretched_by_one_wild_estimate(tmp_path) -> None:
    from lab.experiments.kungfu import adaptive

    # the axis range alone: the middle 96% of the positive values, a wild one left off
    values = pd.Series([1000.0 * 1.01**i for i in range(200)] + [-4e7, 5e8])
    (lo, hi), off, count = adaptive.robust_log_range(values)
    assert 10**lo > 500 and 10**hi < 1e4 and count == 202
    assert off == ((values <= 0) | (values < 10**lo) | (values > 10**hi)).sum() >= 2
    assert adaptive.robust_log_range([-1.0, math.nan]) == (None, 1, 1)

    curves = adaptive.curves(pd.DataFrame([adaptive_run(tmp_path / "a")]))
    medians = adaptive.noise_medians(curves)
    one = (curves["run"] == "fixed (start 32)") & (curves["seed"] == 1)
    raw = curves.loc[one, "noise_scale"]
    assert raw.min() == -4e7 and medians[one].min() > 0  # the median passes over it
    assert medians[one].iloc[20] == pytest.approx(raw.iloc[6:21].median())  # 15 steps
    fig = adaptive.figure(curves, workers=2)
    drawn = [t for t in fig.data if t.yaxis == "y" and t.name.startswith("fixed · 32")]
    assert list(drawn[0].y) == pytest.approx(medians[one].tolist())
    rng, off, count = adaptive.robust_log_range(medians)
    assert fig.layout.yaxis.type == "log" and list(fig.layout.yaxis.range) == rng
    assert 10 ** rng[1] < 1e6 and 10 ** rng[0] > 100  # the -4e7 does not set the scale
    note = next(a.text for a in fig.layout.annotations if a.name == "caption").replace("<br>", " ")
    assert "running median of 15 steps' estimates" in note and f"{off} of {count}" in note


# -- both, at the size they are published ---------------------------------------------------


def figures(tmp_path: Path) -> dict[str, Any]:
    """Fig 7 and Fig 4 drawn from the hand-made runs above, captioned as the notebooks
    caption them."""
    from lab.experiments.kungfu import adaptive, fig7

    caption = (
        "Lab: measured at scale 'smoke' on cluster 'local': 2-core Intel(R) Xeon(R) CPU @ "
        "2.20GHz, 7.8 GB RAM, no GPU, 2025-01-01. 2 run(s)."
    )
    hvd = elastic_run(tmp_path / "hvd")
    kf = elastic_run(tmp_path / "kf", step_s=0.0013)
    manifest = json.loads((tmp_path / "kf" / "manifest.json").read_text())
    manifest["params"]["system"] = fig7.KUNGFU
    (tmp_path / "kf" / "manifest.json").write_text(json.dumps(manifest))
    curves = adaptive.curves(pd.DataFrame([adaptive_run(tmp_path / "adaptive")]))
    return {
        "fig7_scaling": fig7.figure([kf, hvd], caption),
        "fig4_adaptive": adaptive.figure(curves, caption, workers=2),
    }


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return figures(tmp_path_factory.mktemp("kungfu_figures"))


@pytest.mark.parametrize("name", ["fig7_scaling", "fig4_adaptive"])
def test_the_figure_reads_at_900_by_520(drawn: dict[str, Any], name: str) -> None:
    from lab.metrics.figure_check import check_figure

    assert check_figure(drawn[name], 900, 520) == []


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The kopts argument is ignored")
def test_chromium_draws_each_figure_inside_the_image(drawn: dict[str, Any]) -> None:
    import importlib.util

    path = Path(__file__).parent / "cmdare" / "test_cmdare_figures.py"
    spec = importlib.util.spec_from_file_location("cmdare_figure_checks", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.assert_drawn_inside(drawn)
