"""Figure builders: the lab's data, the ideal line and the paper's numbers are all drawn."""

from __future__ import annotations

import datetime as dt
import os

import pandas as pd
import pytest

from lab.experiments.kungfu.published import KUNGFU_OSDI20
from lab.experiments.published import published_table
from lab.metrics import figures, machine
from lab.metrics.figures import (
    caption,
    grouped_bars,
    hardware_description,
    overhead_bars,
    published_traces,
    throughput_vs_workers,
)
from lab.metrics.published import derived_overheads


def _summary() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "np": [1, 2, 4, 1, 2, 4],
            "system": ["horovod"] * 3 + ["kungfu"] * 3,
            "throughput_total": [10.0, 19.0, 36.0, 11.0, 21.0, 40.0],
            "throughput_total_ci": [0.5, 0.7, 1.0, 0.4, 0.6, 0.9],
        }
    )


def test_throughput_vs_workers_draws_measured_ideal_and_published() -> None:
    pub = published_table(paper=KUNGFU_OSDI20, figure="Fig 9")
    text = caption("smoke", "test CPU, 2 cores; no GPU", dt.date(2025, 1, 2))
    fig = throughput_vs_workers(_summary(), color="system", published=pub, caption=text)
    by_name = {t.name: t for t in fig.data}
    hvd = by_name["horovod"]
    assert list(hvd.x) == [1, 2, 4] and list(hvd.y) == [10.0, 19.0, 36.0]
    assert list(hvd.error_y.array) == [0.5, 0.7, 1.0]
    ideal = by_name["ideal · kungfu"]
    assert list(ideal.y) == [11.0, 22.0, 44.0]
    published = published_traces(fig)
    assert len(published) == 2
    kf = next(t for t in published if t.name.startswith("KungFu"))
    assert list(kf.x) == [32]
    assert kf.y[0] == pytest.approx(43.4 * 32)  # per-GPU number scaled to the total
    assert kf.error_y.array[0] == pytest.approx(1.2 * 32)
    assert kf.marker.symbol == "circle-open"
    # a short name in the legend; the source in the hover text and the footnote
    assert kf.name == "KungFu · ResNet50 (paper)"
    assert "README" in kf.hovertemplate and "f85878991f" in kf.hovertemplate
    assert kf.xaxis == "x2"  # 32 workers: a panel of their own beside the lab's 1-4
    notes = {a.name: a.text.replace("<br>", " ") for a in fig.layout.annotations}
    assert notes["caption"] == text
    assert "KungFu artifact README" in notes["sources"]
    assert "f85878991f" not in notes["sources"]  # the commit stays in the hover text
    assert "smoke" in text and "test CPU" in text and "2025-01-02" in text


def test_throughput_per_worker_keeps_published_per_gpu_values() -> None:
    df = _summary().assign(per=lambda d: d["throughput_total"] / d["np"])
    fig = throughput_vs_workers(
        df,
        y="per",
        error=None,
        per_worker=True,
        single=10.0,
        published=published_table(paper=KUNGFU_OSDI20, figure="Fig 9"),
    )
    ideal = next(t for t in fig.data if "ideal" in t.name)
    assert set(ideal.y) == {10.0}
    assert sorted(t.y[0] for t in published_traces(fig)) == [12.7, 43.4]


def test_grouped_bars_with_hatched_published_bars() -> None:
    df = pd.DataFrame(
        {
            "model": ["ResNet50", "ResNet50", "MobileNetV2"],
            "system": ["KungFu", "Horovod", "KungFu"],
            "throughput_per_rank": [5.0, 3.0, 9.0],
            "throughput_per_rank_ci": [0.2, 0.1, 0.3],
        }
    )
    fig = grouped_bars(
        df, published=published_table(paper=KUNGFU_OSDI20, figure="Fig 9"), caption="c"
    )
    assert fig.layout.barmode == "group"
    measured = {
        t.name: (list(t.x), list(t.y)) for t in fig.data if not (t.meta or {}).get("published")
    }
    assert measured == {
        "Horovod": (["ResNet50"], [3.0]),
        "KungFu": (["ResNet50", "MobileNetV2"], [5.0, 9.0]),
    }
    published = published_traces(fig)
    assert {t.name for t in published} == {"Horovod (paper)", "KungFu (paper)"}
    assert all(t.marker.pattern.shape == "/" for t in published)
    assert all(list(t.x) == ["ResNet50"] for t in published)


def test_overhead_bars_in_percent_beside_published() -> None:
    df = pd.DataFrame(
        {
            "setting": ["noise scale", "variance interval 1"],
            "overhead": [0.05, 0.2],
            "overhead_ci": [0.01, 0.02],
        }
    )
    pub = derived_overheads(published_table(paper=KUNGFU_OSDI20, figure="Fig 8"))
    fig = overhead_bars(df, published=pub, caption=caption("smoke", "cpu", "2025-01-01"))
    lab, paper = fig.data
    assert list(lab.y) == pytest.approx([5.0, 20.0])
    assert list(lab.error_y.array) == pytest.approx([1.0, 2.0])
    assert list(paper.x) == ["noise scale", "variance interval 1", "variance interval 8"]
    assert paper.y[0] == pytest.approx(100 * (1 - 29.1 / 30.5))
    assert paper.name == "paper" and "derived from" in paper.hovertemplate
    assert fig.layout.yaxis.title.text == "overhead, %"


def test_figure_without_published_rows_has_no_published_trace() -> None:
    fig = throughput_vs_workers(_summary(), ideal=False)
    assert published_traces(fig) == []
    assert [t.name for t in fig.data] == ["lab"]
    assert [a.name for a in fig.layout.annotations] == []  # no caption, no footnote


def test_hardware_description_names_cpu_and_cores() -> None:
    hardware_description.cache_clear()
    text = hardware_description()
    cores = len(os.sched_getaffinity(0))
    assert f"{cores} cores" in text
    assert machine._cpu_model() in text
    assert ("no GPU" in text) == (figures.gpu_names() == [])


def test_caption_defaults_to_this_machine_and_today() -> None:
    text = caption("paper")
    assert hardware_description() in text
    assert dt.date.today().isoformat() in text


def test_overhead_bars_split_by_series_keep_the_settings_as_categories() -> None:
    df = pd.DataFrame(
        {
            "setting": ["noise scale", "noise scale"],
            "series": ["Horovod · m", "KungFu · m"],
            "overhead": [0.05, 0.07],
        }
    )
    pub = derived_overheads(published_table(paper=KUNGFU_OSDI20, figure="Fig 8"))
    fig = overhead_bars(df, published=pub, color="series")
    assert [t.name for t in fig.data] == ["Horovod · m", "KungFu · m", "paper"]
    assert all(next(iter(t.x)) == "noise scale" for t in fig.data)
