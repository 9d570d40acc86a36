"""CM-DARE's figures drawn from hand-made tables and run directories shaped like the lab's
(the PS-bottleneck sweep, worker and chief revocations, checkpoints, the lab's speed
models) and from the artifact's shipped data, each checked for what a reader of its
900×520 PNG needs: a plot area of at least half the image, short legend names, and no
text running off the image or into another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

WIDTH, HEIGHT = 900, 520


def bottleneck_table() -> pd.DataFrame:
    """``bottleneck.speeds`` of a smoke sweep: 1-3 workers, one and two servers."""
    from lab.experiments.cmdare.bottleneck import bottleneck

    rows = []
    for ps, speeds, cpu, link in (
        (1, [2.0, 3.3, 3.1], [0.35, 0.8, 0.97], [0.2, 0.5, 0.55]),
        (2, [2.1, 4.0, 5.6], [0.2, 0.45, 0.6], [0.1, 0.25, 0.35]),
    ):
        for w, speed, c, link_use in zip((1, 2, 3), speeds, cpu, link, strict=True):
            rows.append(
                {
                    "workers": w,
                    "ps": ps,
                    "speed": speed,
                    "ps_cpu_util": c,
                    "ps_throttled": c / 2,
                    "ps_link_util": link_use,
                    "ps_mbit": 10 * w,
                    "worker_cpu_util": 0.5,
                    "chief_cpu_util": 0.1,
                    "run_dir": f"runs/p{ps}w{w}",
                }
            )
    df = pd.DataFrame(rows)
    one = df[df["workers"] == 1].set_index("ps")["speed"]
    df["predicted"] = df["ps"].map(one) * df["workers"]
    df["ratio"] = df["speed"] / df["predicted"]
    df["bottleneck"] = [bottleneck(r) for _, r in df.iterrows()]
    return df


def worker_run(path: Path, replaced_after: float = 4.0, rate: float = 10.0) -> str:
    """A worker-revocation run directory: two workers (ranks 0 and 1) each ending a step
    every 1/``rate`` s; rank 1 is revoked 10 s in, and its replacement steps again
    ``replaced_after`` + 1 s later."""
    from lab.metrics.records import format_record

    path.mkdir(parents=True)
    t0, lines = 1_700_000_000.0, {0: [], 1: []}
    step = 0
    for i in range(int(25 * rate)):
        at = t0 + i / rate
        for rank in (0, 1):
            gone = 10 <= i / rate < 10 + replaced_after + 1
            if rank == 1 and gone:
                continue
            step += 1
            lines[rank].append(
                format_record(
                    "step", rank=rank, step=i, global_step=step, ended_at=at + 0.01 * rank, time=at
                )
            )
    for rank, text in lines.items():
        (path / f"rank-{rank}.log").write_text("\n".join(text) + "\n")
    (path / "manifest.json").write_text(json.dumps({"params": {"kind": "worker"}}))
    events = [
        {"event": "revoked", "time": t0 + 10, "ranks": [1]},
        {"event": "replaced", "time": t0 + 10 + replaced_after},
    ]
    (path / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    return str(path)


def worker_effects(tmp_path: Path) -> pd.DataFrame:
    """The columns of ``revocation_report.worker_effects`` the figure reads, for a cold and
    a warm replacement."""
    rows = []
    for mode, after, rate in (("cold", 6.0, 10.0), ("warm", 2.0, 9.6)):
        run = worker_run(tmp_path / mode, after, rate)
        rows.append({"mode": mode, "rate_before": 2 * rate, "run_dir": run})
    return pd.DataFrame(rows)


def chief_table() -> pd.DataFrame:
    """``revocation_report.chief_overheads`` of one run revoking its chief three times."""
    return pd.DataFrame(
        {
            "since": [50, 150, 250],
            "overhead_s": [13.0, 17.5, 21.0],
            "restart_s": [11.5, 12.5, 12.0],
            "redo_s": [1.5, 5.0, 9.0],
            "rate_before": [25.0, 25.0, 25.0],
            "run_dir": ["runs/chief"] * 3,
        }
    )


def checkpoint_table() -> pd.DataFrame:
    """``revocation_report.lab_checkpoints``: two models' checkpoints."""
    rows = [("tiny_cnn", 0.4 + 0.01 * i, 0.02 + 0.001 * i) for i in range(4)]
    rows += [("small_cnn", 9.0 + 0.1 * i, 0.11 + 0.002 * i) for i in range(4)]
    return pd.DataFrame(
        [{"model": m, "size_mb": s, "seconds": t, "run_dir": "runs/ck"} for m, s, t in rows]
    )


def lab_scores() -> pd.DataFrame:
    """``labspeed.score`` of a smoke sweep (its four model forms)."""
    from lab.experiments.cmdare.labspeed import LAB_MODELS

    return pd.DataFrame(
        [
            {
                "model": name,
                "random_split_mape": 8.0 + i,
                "group_kfold_mape": 40.0 + 10 * i,
                "group_kfold_max": 70.0 + 12 * i,
            }
            for i, name in enumerate(LAB_MODELS)
        ]
    )


def figures(tmp_path: Path) -> dict[str, Any]:
    """Every CM-DARE figure as the notebooks build it, from the data above and the
    artifact's."""
    from lab.experiments.cmdare import bottleneck_report as bn
    from lab.experiments.cmdare import lifetimes, speed, whatif
    from lab.experiments.cmdare import revocation_report as rr
    from lab.experiments.cmdare.speed_figures import mape_bars

    effects = worker_effects(tmp_path)
    checkpoints = checkpoint_table()
    table = lifetimes.lifetime_table()
    model, runs = whatif.run_what_if(
        lifetimes.distribution(table, "K80", "us-central1").sample, trials=200
    )
    return {
        "ps_bottleneck": bn.figure(bottleneck_table(), "smoke"),
        "worker_revocation": rr.worker_figure(None, effects),
        "chief_revocation": rr.chief_figure(chief_table()),
        "checkpoint": rr.checkpoint_figure(checkpoints, rr.checkpoint_fits(checkpoints)),
        "speed_reproduced": mape_bars(
            speed.reproduce(),
            {"published": "published", "lab (re-fitted)": "reproduced"},
            "CM-DARE's speed and checkpoint models: published vs re-fitted MAPE",
            "Lab: re-fitted on the artifact's data (scikit-learn), paper's protocol.",
        ),
        "speed_held_out": mape_bars(
            speed.held_out(),
            {
                "random row split (paper)": "random_split",
                "whole CNNs held out (mean over folds)": "group_kfold_mean",
                "whole CNNs held out (worst fold)": "group_kfold_worst",
            },
            "MAPE when the test rows' CNNs were seen in training vs held out",
            "Lab: the artifact's data, scikit-learn GroupKFold over CNNs.",
        ),
        "speed_lab": mape_bars(
            lab_scores(),
            {
                "random row split": "random_split_mape",
                "models held out (mean over folds)": "group_kfold_mape",
                "models held out (worst fold)": "group_kfold_max",
            },
            "Speed models on the lab's own PS runs",
            "Lab: smoke scale, emulated hosts.",
            x="model",
        ),
        "lifetimes": lifetimes.cdf_figure(table),
        "what_if": whatif.what_if_figure(
            runs, title=f"{model.description} — K80 lifetimes in us-central1"
        ),
    }


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return figures(tmp_path_factory.mktemp("cmdare_figures"))


NAMES = ["ps_bottleneck", "worker_revocation", "chief_revocation", "checkpoint",
         "speed_reproduced", "speed_held_out", "speed_lab", "lifetimes", "what_if"]  # fmt: skip


def test_every_builder_is_drawn(drawn: dict[str, Any]) -> None:
    assert sorted(drawn) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_the_figure_reads_at_900_by_520(drawn: dict[str, Any], name: str) -> None:
    from lab.metrics.figure_check import check_figure

    assert check_figure(drawn[name], WIDTH, HEIGHT) == []


def test_the_revocation_figure_marks_95_percent_once_per_mode(drawn: dict[str, Any]) -> None:
    fig = drawn["worker_revocation"]
    levels = [t for t in fig.data if t.legendgroup == "level"]
    assert len(levels) == 2 and sum(bool(t.showlegend) for t in levels) == 1
    assert [t.y[0] for t in levels] == pytest.approx([0.95 * 20.0, 0.95 * 19.2])
    assert not [a for a in fig.layout.annotations if "95%" in str(a.text)]


def test_published_values_are_marked_with_their_source(drawn: dict[str, Any]) -> None:
    from lab.metrics.figures import published_traces

    for name in ("ps_bottleneck", "chief_revocation", "checkpoint", "speed_reproduced"):
        found = published_traces(drawn[name])
        assert found and all("cake-lab/CM-DARE" in str(t.meta["source"]) for t in found), name
        assert all("cake-lab" not in t.name for t in drawn[name].data), name


def chromium_boxes(figs: dict[str, Any]) -> dict[str, tuple[list, list]]:
    """Each figure's plot areas and legend/annotation boxes as Chromium lays them out in
    its SVG at the figure's size (the figure check's own cross-check, reused)."""
    import importlib.util
    import os
    import shutil
    import sys

    pio = pytest.importorskip("plotly.io")
    kaleido = pytest.importorskip("kaleido")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        pytest.skip("no Chromium to render with")
    os.environ.setdefault("BROWSER_PATH", browser)
    path = Path(__file__).parents[2] / "metrics" / "test_figure_layout.py"
    spec = importlib.util.spec_from_file_location("figure_layout_checks", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kaleido.start_sync_server(silence_warnings=True)
    try:
        svgs = {n: pio.to_image(f, format="svg", width=WIDTH, height=HEIGHT)
                for n, f in figs.items()}  # fmt: skip
    finally:
        kaleido.stop_sync_server()
    return {n: module._svg_boxes(svg.decode()) for n, svg in svgs.items()}


def assert_drawn_inside(figs: dict[str, Any]) -> None:
    """Chromium's plot area is over half the image each way; every legend and annotation
    box lies inside the image."""
    for name, (areas, boxes) in chromium_boxes(figs).items():
        assert areas and boxes, name
        left, top = min(a[0] for a in areas), min(a[1] for a in areas)
        right, bottom = max(a[0] + a[2] for a in areas), max(a[1] + a[3] for a in areas)
        assert right - left >= WIDTH / 2 and bottom - top >= HEIGHT / 2, name
        for x, y, w, h in boxes:
            assert x >= -1 and y >= -1 and x + w <= WIDTH + 1 and y + h <= HEIGHT + 1, name


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The kopts argument is ignored")
def test_chromium_draws_each_figure_inside_the_image(drawn: dict[str, Any]) -> None:
    assert_drawn_inside(drawn)
