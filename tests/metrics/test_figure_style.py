"""The shared style: what it does to a figure, and that the result passes the figure check."""

from __future__ import annotations

import plotly.graph_objects as go

from lab.metrics.figure_check import check_figure, plain
from lab.metrics.figure_style import add_caption, short_source, style

SOURCE = (
    "KungFu artifact README osdi20/README.md, github.com/lsds/KungFu at commit "
    "f85878991fbf53dfc5c0297844caa0c0a2de80dd (osdi20-artifact branch), §3.2 Scalability "
    "(Figure 9)"
)
CAPTION = "Lab: measured at scale 'paper' on " + "a cluster of many hosts, " * 12 + "2025-06-01."


def _fig(*names: str) -> go.Figure:
    fig = go.Figure([go.Scatter(x=[1, 2, 4], y=[1, 2, 3 + i], name=n) for i, n in enumerate(names)])
    fig.add_trace(
        go.Scatter(
            x=[32], y=[40], name="KungFu (paper)", meta={"published": True, "source": SOURCE}
        )
    )
    return fig.update_layout(title="Throughput vs workers " * 6, xaxis_title="workers")


def test_style_wraps_title_and_caption_inside_the_image_and_keeps_every_word() -> None:
    fig = style(_fig("Horovod · m", "KungFu · m"), caption=CAPTION)
    assert check_figure(fig) == []
    assert fig.layout.title.text.count("<br>") == 1  # two lines, not one running off
    notes = {a.name: a for a in fig.layout.annotations}
    assert plain(notes["caption"].text).split() == CAPTION.split()
    assert notes["caption"].text.count("<br>") >= 2


def test_a_source_goes_to_hover_and_footnote_never_to_the_legend() -> None:
    fig = style(_fig("Horovod · m"))
    paper = fig.data[-1]
    assert paper.name == "KungFu (paper)"
    assert SOURCE.split(",")[0] in paper.hovertemplate and "f85878991f" in paper.hovertemplate
    footnote = {a.name: a.text for a in fig.layout.annotations}["sources"]
    assert "§3.2 Scalability" in footnote and "f85878991f" not in footnote


def test_a_long_legend_name_is_cut_and_kept_whole_in_the_hover_text() -> None:
    name = "a system whose label says everything about how it was set up"
    fig = style(_fig(name, "b"))
    assert fig.data[0].name == name[:39].rstrip() + "…" and fig.data[0].hovertext == name
    assert check_figure(fig) == []


def test_style_twice_leaves_one_caption() -> None:
    fig = style(style(_fig("a", "b"), caption="first"), caption="second")
    assert [a.text for a in fig.layout.annotations if a.name == "caption"] == ["second"]


def test_add_caption_alone_wraps_inside_the_image() -> None:
    fig = go.Figure(go.Scatter(x=[1, 2], y=[1, 2]), layout={"xaxis_title": "step"})
    assert check_figure(add_caption(fig, CAPTION)) == []


def test_short_source_drops_hashes_and_branches() -> None:
    assert short_source(SOURCE) == (
        "KungFu artifact README osdi20/README.md, github.com/lsds/KungFu, §3.2 Scalability "
        "(Figure 9)"
    )


def test_a_figure_drawn_taller_measures_its_wrapped_ticks_again() -> None:
    """Long category labels and a long caption make ``style`` draw the image taller; that
    second pass must wrap the labels anew, or the caption sits on them (CM-DARE's speed
    models figure did)."""
    import plotly.graph_objects as go

    from lab.metrics.figure_check import check_figure
    from lab.metrics.figure_style import HEIGHT, style

    cats = [f"GPU-agnostic LR, normalized model {i} + GPU TFLOPS" for i in range(8)]
    fig = go.Figure([go.Bar(x=cats, y=list(range(8)), name="lab")])
    fig.update_layout(title_text="MAPE", xaxis_title="model")
    style(fig, caption=" ".join(["a caption long enough to wrap over several lines"] * 20))
    assert fig.layout.height > HEIGHT
    assert check_figure(fig, fig.layout.width, fig.layout.height) == []
