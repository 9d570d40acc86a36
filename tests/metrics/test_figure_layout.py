"""Every figure builder's figure, drawn from the tables the rooms' own tests build (or from
recorded runs), passes the figure check at the size it is published at."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

from lab.metrics.figure_check import check_figure

TESTS = Path(__file__).parents[1]


@cache
def helpers(relpath: str) -> ModuleType:
    """A room's test module, for the hand-made tables it builds."""
    path = TESTS / relpath
    spec = importlib.util.spec_from_file_location(f"gallery_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


CAPTION = (
    "Lab: measured at scale 'smoke' on cluster 'emulated-4': 4 emulated hosts of 0.5 core "
    "and a 1gbit link each, on Intel(R) Xeon(R) CPU @ 2.20GHz, 2 cores; no GPU, 2025-06-01. "
    "12 run(s)."
)


def _core() -> dict[str, Any]:
    from lab.experiments.kungfu.published import KUNGFU_OSDI20
    from lab.experiments.published import published_table
    from lab.metrics import figures
    from lab.metrics.published import derived_overheads

    t = helpers("metrics/test_figures.py")
    pub9 = published_table(paper=KUNGFU_OSDI20, figure="Fig 9")
    pub8 = derived_overheads(published_table(paper=KUNGFU_OSDI20, figure="Fig 8"))
    bars = pd.DataFrame(
        {
            "model": ["ResNet50", "ResNet50", "MobileNetV2"],
            "system": ["KungFu", "Horovod", "KungFu"],
            "throughput_per_rank": [5.0, 3.0, 9.0],
            "throughput_per_rank_ci": [0.2, 0.1, 0.3],
        }
    )
    over = pd.DataFrame(
        {"setting": ["noise scale", "variance interval 1"], "overhead": [0.05, 0.2]}
    )
    return {
        "throughput_vs_workers": lambda: figures.throughput_vs_workers(
            t._summary(), color="system", published=pub9, caption=CAPTION
        ),
        "grouped_bars": lambda: figures.grouped_bars(bars, published=pub9, caption=CAPTION),
        "overhead_bars": lambda: figures.overhead_bars(over, published=pub8, caption=CAPTION),
    }


def _live() -> Figure:
    from lab.metrics.live import MetricTrace
    from lab.metrics.records import format_record

    line = helpers("metrics/test_live.py").L
    trace = MetricTrace(["noise_scale"], display=False).for_run("noise scale")
    trace.on_start("/r/run-1", [0, 1], control=None)
    for step in range(20):
        for rank in (0, 1):
            rec = format_record("metric", rank=rank, name="noise_scale", value=step, step=step)
            trace.on_line(line(rank, "stdout", rec))
    return trace.figure()


Figure = Any


def _rooms(tmp: Path) -> dict[str, Callable[[], Figure]]:
    from lab.experiments import emulation, fair_settings
    from lab.experiments.benchmark import async_, sync
    from lab.experiments.kungfu import fig8, fig9

    kf = helpers("experiments/test_kungfu_figures.py")
    bench = helpers("experiments/test_benchmark_figures.py")
    emu = helpers("experiments/test_emulation_figures.py")
    fair = helpers("experiments/test_fair_settings.py")
    sync_rows = pd.DataFrame(
        [bench._row(s, n, t) for s, n, t in [("horovod-gloo", 1, 100.0),
         ("horovod-gloo", 2, 150.0), ("horovod-gloo", 4, 250.0), ("kungfu-sync", 1, 100.0),
         ("kungfu-sync", 2, 190.0), ("kungfu-sync", 4, 330.0)]]
    )  # fmt: skip
    async_rows = pd.DataFrame([bench._row("ps", 2, 100.0, 5.0), bench._row("pair-avg", 2, 103.0)])

    def fair_table() -> pd.DataFrame:
        root = Path(tempfile.mkdtemp(dir=tmp))  # each drawing writes its own runs
        default = fair_settings.rank_rows(fair._run(root, "d", {"h1": 0.4, "h2": 0.4}))
        fast = fair_settings.rank_rows(fair._run(root, "f", {"h1": 0.2, "h2": 0.25}))
        return fair._rounds([(default, fast)] * 3)

    return {
        "kungfu fig9": lambda: fig9.figure(
            fig9.ideal_table(kf._fig9_summary()), caption=CAPTION, batch_size=32
        ),
        "kungfu fig8": lambda: fig8.figure(
            fig8.overheads(kf._protocol_table()), caption=CAPTION, workers=2, batch_size=32
        ),
        "kungfu fig8, two systems": lambda: fig8.figure(
            _two_systems(fig8.overheads(kf._protocol_table())), CAPTION, 2, 32
        ),
        "benchmark sync": lambda: sync.figure(sync.table(sync_rows), CAPTION, batch_size=32),
        "benchmark async": lambda: async_.figure(async_.table(async_rows), caption=CAPTION),
        "emulation": lambda: emulation.figure(emu._scaling(), emu._allreduce(0.1), CAPTION),
        "emulation with fair settings": lambda: emulation.figure(
            emu._scaling(), emu._allreduce(0.1), CAPTION, fair=fair_table()
        ),
        "fair settings": lambda: fair_settings.figure(fair_table(), caption=CAPTION),
    }


def _two_systems(table: pd.DataFrame) -> pd.DataFrame:
    other = table.assign(system="kungfu-sync", label="KungFu (sync SGD)", model="resnet_like")
    return pd.concat([table, other], ignore_index=True)


def _p3() -> dict[str, Callable[[], Figure]]:
    from lab.experiments.p3 import analysis, figures

    p3 = helpers("experiments/test_p3.py")
    summary = p3.summary_of({"baseline": [10, 20, 40], "slicing": [11, 25, 40], "p3": [13, 30, 41]})
    bars = analysis.timeline(p3.records(), rank=0)
    return {
        "p3 throughput": lambda: figures.throughput_vs_bandwidth(summary, CAPTION),
        "p3 gain": lambda: figures.gain_vs_bandwidth(analysis.gains(summary), CAPTION),
        "p3 timeline": lambda: figures.iteration_timeline(
            {"p3": bars, "baseline": bars, "slicing": bars}, CAPTION
        ),
    }


def _easyscale() -> dict[str, Callable[[], Figure]]:
    from lab.experiments.easyscale import fig9, overhead, sharing
    from lab.experiments.easyscale.runs import EST_LABEL
    from lab.experiments.easyscale.simulator import PAPER_CLUSTER, compare_policies
    from lab.experiments.easyscale.trace import generate_trace
    from lab.experiments.easyscale.trace_figures import (
        allocation_by_type,
        allocation_over_time,
        jct_makespan_bars,
        sweep_figure,
    )

    room = helpers("experiments/test_easyscale_room.py")
    trace_io = helpers("experiments/easyscale/test_easyscale_trace_io.py")
    levels = pd.DataFrame(
        {
            "device_type": ["fast"] * 3 + ["slow"] * 3,
            "level": ["D0", "D1", "D1+D2"] * 2,
            "step_seconds": [1.0, 1.05, 1.8, 2.0, 2.1, 2.4],
        }
    )
    levels["relative_time"] = levels["step_seconds"] / levels.groupby("device_type")[
        "step_seconds"
    ].transform("first")
    switching = {"switch_share": 0.004, "switch_overhead": -0.01, "switch_us": 120.0,
                 "saving_other_ests": 0.2, "saving_last_est": 0.05, "ddp_step_s": 0.01}  # fmt: skip
    shared = pd.DataFrame(
        {
            "system": [sharing.PACKED] * 3 + [EST_LABEL] * 3,
            "workers": [1, 2, 4] * 2,
            "memory_gib": [0.3, 0.6, 1.2, 0.3, 0.31, 0.33],
            "memory_measure": ["PSS"] * 6,
            "rss_peak_gib": [0.3] * 6,
            "samples_per_s": [100.0, 98.0, 95.0, 100.0, 99.0, 97.0],
        }
    )

    @cache
    def simulated() -> tuple[pd.DataFrame, dict[str, Any]]:
        table = trace_io.steps_table()
        return compare_policies(
            generate_trace(table, seed=1, jobs=40, span_s=2400), table, PAPER_CLUSTER
        )

    def allocations() -> dict[str, Any]:
        return {k: r.allocation for k, r in simulated()[1].items()}

    def sweep() -> Figure:
        summary = simulated()[0]
        both = pd.concat([summary.assign(interval_s=60.0), summary.assign(interval_s=120.0)])
        return sweep_figure(both, "interval_s", caption=CAPTION)

    return {
        "easyscale fig9": lambda: fig9.figure(room.diff_frame(False, False, True), CAPTION),
        "easyscale fig12": lambda: overhead.levels_figure(levels, CAPTION),
        "easyscale fig11/13": lambda: overhead.switching_figure(switching, CAPTION),
        "easyscale fig11/13 by step length": lambda: overhead.switching_figure(
            switching,
            CAPTION,
            [
                overhead.StepCase("smoke step (bn_cnn, 16 px, batch 16)", 120.0, 0.09, 0.005),
                overhead.StepCase("paper-like step (bn_cnn, 112 px, batch 16)", 120.0, 0.002, 0.12),
            ],
        ),
        "easyscale fig10": lambda: sharing.figure(shared, CAPTION),
        "easyscale fig14": lambda: jct_makespan_bars(simulated()[0], caption=CAPTION),
        "easyscale allocation": lambda: allocation_over_time(allocations(), caption=CAPTION),
        "easyscale allocation by type": lambda: allocation_by_type(allocations(), caption=CAPTION),
        "easyscale sweep": sweep,
    }


def gallery(tmp: Path) -> dict[str, Callable[[], Figure]]:
    """Every builder this check covers, as a function that draws its figure."""
    return {**_core(), "live trace": _live, **_rooms(tmp), **_p3(), **_easyscale()}


NAMES = list(gallery(Path("unused")))


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Callable[[], Figure]]:
    return gallery(tmp_path_factory.mktemp("gallery"))


@pytest.mark.parametrize("name", NAMES)
def test_figure_reads_at_its_published_size(name: str, drawn: dict) -> None:
    fig = drawn[name]()
    width, height = fig.layout.width or 900, fig.layout.height or 520
    assert check_figure(fig, width, height) == []
    assert width == 900  # the report's and the notebooks' width


def _svg_boxes(svg: str) -> tuple[list[tuple[float, ...]], list[tuple[float, ...]]]:
    """Plot areas and legend/annotation boxes, in px, as Chromium laid them out."""
    num = r"(-?[\d.]+)"
    areas = [
        tuple(map(float, m.groups()))
        for m in re.finditer(
            rf'class="axesclip" id="clip[0-9a-f]*?x\d*y\d*"><rect x="{num}" y="{num}" '
            rf'width="{num}" height="{num}"',
            svg,
        )
    ]
    boxes = [
        tuple(map(float, m.groups()))
        for m in re.finditer(
            rf'class="(?:legend|cursor-pointer)"[^>]*transform="translate\({num},\s*{num}\)">'
            rf'<rect class="bg"[^>]*?width="{num}" height="{num}"',
            svg,
        )
    ]
    return areas, boxes


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The kopts argument is ignored")
def test_chromium_draws_every_figure_as_the_check_estimates(drawn: dict) -> None:
    """The check works from the layout; Chromium's own SVG of each figure (one browser
    session for all, ~10 s here) must agree: plot area over half the image, every legend
    and annotation box inside it."""
    pio = pytest.importorskip("plotly.io")
    kaleido = pytest.importorskip("kaleido")
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium to render with")
    os.environ.setdefault("BROWSER_PATH", shutil.which("chromium") or "")
    figs = {name: make() for name, make in drawn.items()}
    kaleido.start_sync_server(silence_warnings=True)
    try:
        svgs = {
            name: pio.to_image(f, format="svg", width=f.layout.width, height=f.layout.height)
            for name, f in figs.items()
        }
    finally:
        kaleido.stop_sync_server()
    for name, fig in figs.items():
        width, height = fig.layout.width, fig.layout.height
        areas, boxes = _svg_boxes(svgs[name].decode())
        assert areas and boxes, name
        left, top = min(a[0] for a in areas), min(a[1] for a in areas)
        right = max(a[0] + a[2] for a in areas)
        bottom = max(a[1] + a[3] for a in areas)
        assert right - left >= width / 2 and bottom - top >= height / 2, name
        for x, y, w, h in boxes:
            assert x >= -1 and y >= -1 and x + w <= width + 1 and y + h <= height + 1, name


@pytest.mark.slow
def test_render_pngs_draws_each_figure_at_its_own_size(drawn: dict, tmp_path: Path) -> None:
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium to render with")
    from lab.experiments.outputs import FIGURE_JSON, render_pngs

    for name in ("p3 timeline", "kungfu fig9"):
        drawn[name]().write_json(tmp_path / f"{name.replace(' ', '_')}{FIGURE_JSON}")
    sizes = {}
    for png in render_pngs(tmp_path):
        head = png.read_bytes()[:24]
        sizes[png.stem] = struct.unpack(">II", head[16:24])
    assert sizes == {"p3_timeline": (900, 840), "kungfu_fig9": (900, 520)}
