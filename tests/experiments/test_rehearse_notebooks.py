"""A small rehearsal in the tests: one notebook per paper (a test each) runs its
paper-scale path on this machine (``lab.experiments.notebooks.rehearse``), narrowed to a
point or two where a sweep would take minutes, and what it leaves is a rehearsal
everywhere: runs under rehearsals/ whose manifests say so, verdicts marked and carrying
their plan, nothing under verdicts/, and rehearsed.json's line for it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.experiments.notebooks import NOTEBOOK_DIR, rehearse
from lab.metrics.rehearsal import Plan

# One notebook per paper, with the parameters that keep the set within ~5 minutes here
# (each still runs at paper scale: the paper's models and input sizes, the cuts said)
SMALL_SET: dict[str, dict[str, object]] = {
    "cmdare/lifetimes.ipynb": {},  # CM-DARE: the artifact's data at paper scale
    "easyscale/fig11_13_est_overhead.ipynb": {"ests": 2},  # ResNet-50, 224 px, cuda -> cpu
    "p3/one_iteration.ipynb": {"arms": ["baseline", "p3"]},  # P3: VGG-19 on 4 hosts
    "benchmark/async_sgd.ipynb": {"systems": ["pair-avg"], "models": ["MobileNetV2"]},
    "kungfu/adaptive_batch.ipynb": {"fixed_batches": [32]},  # horovodrun, this machine
}


ROOMS = {"cmdare", "easyscale", "p3", "benchmark", "kungfu"}


def test_the_small_set_has_one_notebook_per_paper() -> None:
    assert {rel.split("/")[0] for rel in SMALL_SET} == ROOMS
    assert all((NOTEBOOK_DIR / rel).is_file() for rel in SMALL_SET)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the rehearsal cluster's hosts need root")
@pytest.mark.parametrize("rel", list(SMALL_SET))
def test_one_notebook_per_paper_rehearses(rel: str, _isolated_results: Path) -> None:
    plan = Plan(budget_s=20.0, max_workers=2, started="test")
    [done] = rehearse([NOTEBOOK_DIR / rel], plan=plan, progress=False, parameters=SMALL_SET[rel])
    assert done.ok, f"{rel}: {done.error} (executed copy: {done.output})"
    base = _isolated_results / "rehearsals"
    assert not (_isolated_results / "verdicts").exists()  # no verdict changed
    # nothing outside rehearsals/ (a sweep's summary once went to results/<experiment>/)
    assert [p.name for p in _isolated_results.iterdir()] == ["rehearsals"]
    room = rel.split("/")[0]
    verdicts = sorted((base / "verdicts" / room / "paper").glob("*.json"))
    assert verdicts, f"{rel} saved no rehearsal verdict"
    for path in verdicts:
        record = json.loads(path.read_text())
        assert record["rehearsal"]["started"] == "test", path
    manifests = [json.loads(m.read_text()) for m in (base / "runs").glob("**/manifest.json")]
    assert all(m["rehearsal"]["started"] == "test" for m in manifests)
    if room == "easyscale":  # GPUs declared, not there: the ranks said they fell back
        headers = [
            json.loads(line.split(" ", 1)[1])
            for log in (base / "runs").glob("**/rank-*.log")
            for line in log.read_text().splitlines()
            if line.startswith("@lab ") and '"header"' in line
        ]
        assert headers and all(h["device_fallback"].startswith("cuda -> cpu") for h in headers)
    summary = json.loads((base / "rehearsed.json").read_text())
    assert [(n["notebook"], n["ok"]) for n in summary["notebooks"]] == [(rel, True)]


def test_longest_first_orders_by_the_last_rehearsal(tmp_path: Path) -> None:
    from lab.experiments.notebooks import longest_first

    summary = tmp_path / "rehearsed.json"
    rows = [{"notebook": "a.ipynb", "seconds": 10.0}, {"notebook": "b.ipynb", "seconds": 90.0}]
    summary.write_text(json.dumps({"notebooks": rows}))
    paths = [tmp_path / n for n in ("a.ipynb", "b.ipynb", "new.ipynb")]
    assert [p.name for p in longest_first(paths, summary, tmp_path)] == [
        "new.ipynb",  # never rehearsed: its time is unknown, so it goes first
        "b.ipynb",
        "a.ipynb",
    ]


@pytest.mark.parametrize("lanes", [0, -1, 1.5, True])
def test_lanes_must_be_a_whole_number_of_one_or_more(lanes: object) -> None:
    from lab.errors import ParameterError

    with pytest.raises(ParameterError, match="lanes"):
        rehearse([], lanes=lanes)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the rehearsal cluster's hosts need root")
def test_two_lanes_rehearse_two_notebooks_at_once(_isolated_results: Path) -> None:
    """Two lanes: both notebooks run, at the same time (the second starts before the first
    ends), their outcomes come back in the order given and both are in rehearsed.json."""
    rels = ["cmdare/lifetimes.ipynb", "00_tour.ipynb"]
    plan = Plan(budget_s=20.0, max_workers=2, started="test")
    done = rehearse([NOTEBOOK_DIR / r for r in rels], plan=plan, progress=False, lanes=2)
    assert [d.ok for d in done] == [True, True], [d.error for d in done]
    assert [d.notebook for d in done] == [NOTEBOOK_DIR / r for r in rels]
    base = _isolated_results / "rehearsals"
    summary = json.loads((base / "rehearsed.json").read_text())
    assert sorted(n["notebook"] for n in summary["notebooks"]) == sorted(rels)
    from datetime import datetime

    timings = [
        json.loads(line) for line in (base / "notebooks" / "timings.jsonl").read_text().split("\n")
        if line
    ]  # fmt: skip
    spans = sorted(
        (datetime.strptime(t["started"], "%Y-%m-%dT%H:%M:%S%z").timestamp(), t["seconds"])
        for t in timings
    )
    (first, took), (second, _) = spans
    assert second <= first + took, spans  # (to the second: started is written so)
