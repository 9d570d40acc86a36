"""Results written again keep the earlier file; the latest is a relative link that moves with
the results folder."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from lab.metrics.versions import (
    LEGACY,
    keep_plain,
    new_version,
    point,
    resolved,
    save_version,
    version_path,
    write_new,
)


def test_two_saves_keep_both_and_the_latest_names_the_second(tmp_path: Path) -> None:
    html, data = tmp_path / "figs" / "fig_8.html", tmp_path / "figs" / "fig_8.plotly.json"
    first = save_version({html: "first", data: b"1"}, stem="fig_8")
    second = save_version({html: "second", data: b"2"}, stem="fig_8")
    assert first[html] != second[html] and first[html].parent == tmp_path / "figs" / "fig_8"
    assert first[data].name == first[html].name.replace(".html", ".plotly.json")
    assert (first[html].read_text(), first[data].read_bytes()) == ("first", b"1")
    assert (html.read_text(), data.read_bytes()) == ("second", b"2")
    assert html.is_symlink() and resolved(html) == second[html]
    assert not os.path.isabs(os.readlink(html)), "a link must survive moving results/"
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "figs", moved)
    assert (moved / "fig_8.html").read_text() == "second"


def test_versions_sort_by_time_and_differ_within_one_second() -> None:
    names = {new_version(1_700_000_000.0) for _ in range(20)}
    assert len(names) == 20 and all(n.startswith("2023111") for n in names)
    assert new_version(1_700_000_000.0) < new_version(1_700_000_001.0)


def test_version_path_needs_the_stem(tmp_path: Path) -> None:
    latest = tmp_path / "fig_8.runs.json"
    assert version_path(latest, "v", "fig_8") == tmp_path / "fig_8" / "v.runs.json"
    assert version_path(tmp_path / "a.b.ipynb", "v") == tmp_path / "a.b" / "v.ipynb"
    with pytest.raises(ValueError, match="does not start with"):
        version_path(latest, "v", "fig_9")


def test_write_new_never_replaces_and_writes_all_or_none(tmp_path: Path) -> None:
    one, two = tmp_path / "v" / "one.json", tmp_path / "f" / "two.html"
    write_new({one: "old one"})
    with pytest.raises(FileExistsError):
        write_new({two: "new two", one: "new one"})
    assert one.read_text() == "old one" and not two.exists(), "a half-written version is left"
    (tmp_path / "blocked").write_text("a file where a folder must be")
    with pytest.raises(OSError):
        write_new({two: "two", tmp_path / "blocked" / "x.json": "?"})
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert left == ["blocked", "f", "v", "v/one.json"], "a temporary or partial file was left"


def test_a_plain_file_from_before_versions_is_kept_not_replaced(tmp_path: Path) -> None:
    latest = tmp_path / "fig_8.json"
    latest.write_text("from before versions")
    [(_, kept)] = save_version({latest: "new"}, stem="fig_8").items()
    legacy = tmp_path / "fig_8" / f"{LEGACY}.json"
    assert legacy.read_text() == "from before versions" and latest.read_text() == "new"
    assert resolved(latest) == kept
    other = tmp_path / "fig_8.png"
    other.write_text("png one")
    assert keep_plain(other, "fig_8") == tmp_path / "fig_8" / f"{LEGACY}.png"
    other.write_text("png two")  # a second plain file of the same name: a new legacy name
    again = keep_plain(other, "fig_8")
    assert (
        again is not None
        and again.name.startswith(f"{LEGACY}-")
        and again.read_text() == ("png two")
    )
    assert keep_plain(latest, "fig_8") is None, "a link is no plain file to keep"


def test_concurrent_writers_of_one_slot_each_keep_their_version(tmp_path: Path) -> None:
    """Eight writers at once: every version is kept, and the two links name one writer's."""
    figure, verdict = tmp_path / "f" / "x.html", tmp_path / "v" / "x.json"
    kept: list[dict[Path, Path]] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        got = save_version({figure: f"figure {i}", verdict: f"verdict {i}"}, stem="x")
        with lock:
            kept.append(got)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(kept) == 8 and len({k[verdict] for k in kept}) == 8
    assert len(list((tmp_path / "v" / "x").glob("*.json"))) == 8
    assert figure.read_text().split()[1] == verdict.read_text().split()[1]


def test_point_moves_a_link_atomically(tmp_path: Path) -> None:
    a, b = tmp_path / "n" / "a.ipynb", tmp_path / "n" / "b.ipynb"
    write_new({a: "a", b: "b"})
    latest = tmp_path / "n.ipynb"
    point({latest: a})
    point({latest: b})
    assert latest.read_text() == "b" and a.read_text() == "a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n", "n.ipynb"], "a stray temp link"
