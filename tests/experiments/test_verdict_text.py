"""How verdicts read: shares in sentences (lab.experiments.verdicts.percent), a report
row's one sentence (lab.experiments.report.headline), and a rehearsal's sentence."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lab.experiments.outputs import verdict_record
from lab.experiments.report import headline
from lab.experiments.verdicts import Status, Verdict, percent


@pytest.mark.parametrize(
    ("value", "ci", "decimals", "text"),
    [
        (0.873, 0.05, 0, "87% ± 5%"),
        (0.083, 0.043, 1, "8.3% ± 4.3%"),
        (0.97, math.nan, 0, "97%"),
        (0.2, None, 1, "20.0%"),
    ],
)
def test_a_share_prints_with_its_interval_where_there_is_one(
    value: float, ci: float | None, decimals: int, text: str
) -> None:
    assert percent(value, ci, decimals) == text


FIG = Verdict("P", "Fig 3", "x is fast", Status.NOT_RESOLVED, 1.234, 0.5, 2.0, "paper", "s",
              why="The interval spans both. More detail follows.", runs=("r",))  # fmt: skip


@pytest.mark.parametrize(
    ("verdict", "text"),
    [
        (FIG, "Lab 1.23 ± 0.5 s against 2 s published."),
        (
            replace(FIG, published_value=None),
            "Lab 1.23 ± 0.5 s; the paper gives no number to compare.",
        ),
        (replace(FIG, lab_value=None, status=Status.NOT_MEASURED), "The interval spans both."),
        (replace(FIG, lab_value=None, why=""), "Nothing was measured."),
    ],
    ids=["both", "lab only", "nothing measured", "no reason given"],
)
def test_a_report_row_states_one_sentence_computed_from_the_record(
    verdict: Verdict, text: str
) -> None:
    assert headline(verdict.to_dict()) == text


def test_a_figure_of_several_claims_counts_them_in_its_sentence() -> None:
    claims = [FIG, replace(FIG, status=Status.REPRODUCED), replace(FIG, status=Status.REPRODUCED)]
    record = verdict_record(claims)
    assert headline(record) == "3 claims: 2 reproduced, 1 not resolved at this scale."
    assert record["status"] == "not resolved at this scale" and record["runs"] == ["r"]


def test_a_rehearsal_says_that_it_is_not_a_verdict() -> None:
    assert not FIG.is_rehearsal() and "rehearsal" not in FIG.sentence()
    for rehearsal in (replace(FIG, scale="paper-rehearsal"), replace(FIG, rehearsal=True)):
        assert rehearsal.is_rehearsal()
        assert rehearsal.sentence().endswith("A rehearsal: its status is not a verdict.")
