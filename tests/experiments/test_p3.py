"""P3's room: bad input fails before launch, the bandwidth rule, gains and verdicts computed
from data, the timeline from per-slice records, and the figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.p3 import analysis, figures, sweep
from lab.experiments.p3.published import PUBLISHED, gain_row
from lab.experiments.verdicts import Status

POINT = {"schedule": "p3", "model": "tiny", "bandwidth": "100mbit", "hosts": 2}


@pytest.mark.parametrize(
    ("changes", "cluster", "name"),
    [
        ({"bandwidth": "fast"}, "emulated-2", "bandwidth"),
        ({"bandwidth": "-5mbit"}, "emulated-2", "bandwidth"),
        ({"servers": 3}, "emulated-2", "servers"),
        ({"slice_elements": 0}, "emulated-2", "slice_elements"),
        ({"schedule": "tictac"}, "emulated-2", "schedule"),
        ({"hosts": 3}, "emulated-2", "hosts"),
        ({"hosts": 1}, "local", "bandwidth"),  # no emulation: links cannot be shaped
    ],
)
def test_bad_input_fails_before_launch(changes: dict, cluster: str, name: str,
                                       _isolated_results: Path) -> None:  # fmt: skip
    with pytest.raises(ParameterError) as err:
        sweep.run_point({**POINT, **changes}, "test/p3", cluster)
    assert err.value.name == name
    assert not (_isolated_results / "runs").exists()  # nothing was started


def test_with_link_sets_rate_and_hosts() -> None:
    c = sweep.with_link("emulated-4", "250mbit", hosts=2)
    assert [h.name for h in c.hosts] == ["h1", "h2"] and c.emulated["hosts"] == 2
    assert c.emulated["link"] == {"bandwidth": "250000000bit", "latency": "1ms"}


def test_bandwidth_rule_spans_comm_above_and_below_compute() -> None:
    params, seconds = 1_000_000, 0.2
    points = sweep.bandwidth_points(seconds, params, 2, (4.0, 1.0, 0.25))
    rates = [analysis.rate_of(p) for p in points]
    assert rates == sorted(rates)
    bits = sweep.bits_per_step(params, 2)
    assert bits == 2 * 0.5 * params * 32
    ratios = [bits / r / seconds for r in rates]  # communication time / compute time
    assert ratios == pytest.approx([4.0, 1.0, 0.25], rel=0.01)
    with pytest.raises(NothingMeasured):
        sweep.bandwidth_points(0.0, params, 2, (1.0,))


def summary_of(throughputs: dict[str, list[float]]) -> pd.DataFrame:
    bws = ["100mbit", "400mbit", "1600mbit"]
    rows = [
        {
            "model": "vgg_like",
            "schedule": arm,
            "bandwidth": bw,
            "state": "succeeded",
            "throughput_total": v,
            "throughput_total_ci": 1.0,
        }
        for arm, values in throughputs.items()
        for bw, v in zip(bws, values, strict=True)
    ]
    return pd.DataFrame(rows)


def test_verdict_reproduced_when_the_gain_peaks_inside_and_fades() -> None:
    table = analysis.gains(summary_of({"baseline": [10, 20, 40], "p3": [13, 30, 41]}))
    assert list(table["gain"].round(3)) == [0.3, 0.5, 0.025]
    v = analysis.verdict(table, "vgg_like", "smoke", "test")
    assert v.status is Status.REPRODUCED
    assert v.lab_value == pytest.approx(0.5) and v.published_value == 0.66
    assert "400mbit" in v.why and "1600mbit" in v.why


def test_verdict_not_reproduced_when_the_gain_grows_with_bandwidth() -> None:
    table = analysis.gains(summary_of({"baseline": [10, 20, 40], "p3": [10, 21, 60]}))
    v = analysis.verdict(table, "vgg_like", "smoke", "test")
    assert v.status is Status.NOT_REPRODUCED and "fastest link" in v.why
    with pytest.raises(NothingMeasured):
        analysis.verdict(table, "resnet_like", "smoke", "test")


def test_verdict_not_resolved_when_the_peak_gains_interval_holds_no_gain() -> None:
    """Smoke runs of three timed steps: a +56% peak with ± 96% is no evidence either way."""
    wide = summary_of({"baseline": [10, 20, 40], "p3": [13, 30, 41]})
    wide["throughput_total_ci"] = 12.0
    v = analysis.verdict(analysis.gains(wide), "vgg_like", "smoke", "test")
    assert v.status is Status.NOT_RESOLVED and "not resolved at this scale" in v.why
    # an interval wholly below 5%: no gain, resolved
    none = summary_of({"baseline": [10, 20, 40], "p3": [9, 18, 40]})
    none["throughput_total_ci"] = 0.1
    v = analysis.verdict(analysis.gains(none), "vgg_like", "smoke", "test")
    assert v.status is Status.NOT_REPRODUCED and "not clearly above 5%" in v.why


def test_a_fastest_link_gain_above_half_the_peak_decides_only_when_resolved() -> None:
    """+30% on the fastest link against a +50% peak is not the paper's shape when its
    interval says so; three CPU-bound smoke steps (± ~30%) cannot say it."""
    summary = summary_of({"baseline": [10, 20, 40], "p3": [13, 30, 52]})
    v = analysis.verdict(analysis.gains(summary), "vgg_like", "smoke", "test")
    assert v.status is Status.NOT_REPRODUCED and "still 30% faster" in v.why
    fastest = summary["bandwidth"] == "1600mbit"
    summary.loc[fastest, "throughput_total_ci"] = 8.0
    table = analysis.gains(summary)
    assert table["gain_ci"].iloc[-1] > 0.3 - 0.25  # reaches back within half the peak
    v = analysis.verdict(table, "vgg_like", "smoke", "test")
    assert v.status is Status.NOT_RESOLVED and "fastest link's gain (+30%" in v.why


def test_a_p3_slower_on_the_fastest_link_is_said_and_does_not_undo_the_gain() -> None:
    """p3's per-slice work on a 0.4-core host can cost more than a fast link saves."""
    v = analysis.verdict(
        analysis.gains(summary_of({"baseline": [10, 20, 40], "p3": [15, 26, 30]})),
        "vgg_like", "smoke", "test",
    )  # fmt: skip
    assert v.status is Status.REPRODUCED
    assert "-25%" in v.why and "p3 is slower than the baseline" in v.why


def records() -> pd.DataFrame:
    """Two ranks' records of steps 3 and 4 for a two-layer model, as the ranks print them."""
    rows = []
    for rank in (0, 1):
        for step, t0 in ((3, 100.0), (4, 101.0)):
            rows.append({"kind": "event", "name": "iteration", "rank": rank, "step": step,
                         "t0": t0, "backward_start": 0.2})  # fmt: skip
            for layer, bw_end in ((1, 0.3), (0, 0.4)):
                rows.append({"kind": "event", "name": "layer", "rank": rank, "step": step,
                             "layer": layer, "backward_end": bw_end, "wait_start": 0.0,
                             "wait_end": 0.05 * (layer + 1)})  # fmt: skip
            # key 0 (layer 0) on server 0; key 1 (layer 1, big) on server 1
            for key, layer, server, push in ((0, 0, 0, 0.41), (1, 1, 1, 0.31)):
                rec = {
                    "kind": "event",
                    "name": "slice",
                    "rank": rank,
                    "step": step,
                    "key": key,
                    "layer": layer,
                    "server": server,
                    "elements": 10 + 90 * layer,
                    "push_start": push,
                    "push_sent": push + 0.1,
                    "value": push + 0.3,
                }
                if rank == server:
                    rec["update"] = push + 0.2
                rows.append(rec)
    return pd.DataFrame(rows)


def test_timeline_draws_one_iteration_with_server_updates_and_next_waits() -> None:
    bars = analysis.timeline(records(), rank=0)
    kinds = set(bars["kind"])
    assert kinds == {"backward", "push", "server", "return", "next forward wait"}
    # the update of key 1 comes from rank 1's records (its server)
    server = bars[(bars["kind"] == "server") & (bars["layer"] == 1)].iloc[0]
    assert server["end"] == pytest.approx(0.51)
    wait = bars[bars["kind"] == "next forward wait"]
    assert wait["start"].min() == pytest.approx(1.0)  # shifted into step 3's frame
    assert analysis.biggest_layer(records()) == 1
    ready = analysis.ready_times(bars)
    assert ready[0] == pytest.approx(0.71) and ready[1] == pytest.approx(0.61)
    v = analysis.overtake_verdict({"p3": bars, "baseline": bars}, 1, "smoke", "test")
    assert v.status is Status.NOT_REPRODUCED  # layer 0 came back after the big layer
    fig = figures.iteration_timeline({"p3": bars})
    assert {t.name for t in fig.data} == kinds
    # every row carries its name (plotly drops overlapping category labels), with room for it
    rows = set(bars["row"])
    assert set(fig.layout.yaxis.tickvals) == rows
    assert fig.layout.height >= figures.ROW_PX * len(rows)


def test_figures_show_every_arm_and_the_published_peaks() -> None:
    summary = summary_of({"baseline": [10, 20, 40], "slicing": [11, 25, 40], "p3": [13, 30, 41]})
    fig = figures.throughput_vs_bandwidth(summary)
    assert len(fig.data) == 3 and all("(lab, torch + TCP)" in t.name for t in fig.data)
    gain = figures.gain_vs_bandwidth(analysis.gains(summary))
    marked = [s.y0 for s in gain.layout.shapes]
    assert {25.0, 38.0, 66.0} <= {round(y, 6) for y in marked}


def test_published_rows_are_sourced() -> None:
    gains = {p.model: p.value for p in PUBLISHED if p.quantity == "peak_gain"}
    assert gains == {"ResNet-50": 0.25, "Sockeye": 0.38, "VGG-19": 0.66}
    slices = {p.value: p.source for p in PUBLISHED if p.quantity == "slice_elements"}
    assert "4b06f407eb229cef683afdc45cecc84046250e04" in slices[40_000]
    assert 50_000 in slices
    assert all("abstract" in p.source for p in PUBLISHED if p.quantity == "peak_gain")
    assert gain_row("vgg_like").model == "VGG-19" and gain_row("tiny") is None
