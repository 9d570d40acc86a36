"""A rehearsal (lab.experiments.rehearsal, lab.metrics.rehearsal): the paper's parameters
cut only where a CPU cannot afford them, each cut said; its runs, verdicts and figures kept
under results/rehearsals/ and marked, never a verdict; the rehearsal cluster's hosts declare
GPUs and tell their ranks so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.errors import ParameterError
from lab.experiments import rehearsal
from lab.metrics.rehearsal import REHEARSAL_ENV, Plan, active, runs_root

PLAN = Plan(warmup_steps=1, steps=2, batch_cap=4, budget_s=60.0, repeats=1, max_workers=8)


def test_paper_parameters_keep_every_system_and_model_and_cut_the_rest() -> None:
    paper = {
        "systems": ["horovod-mpi", "mwms", "kungfu-sync"],
        "models": ["ResNet50", "MobileNetV2"],
        "workers": [8, 16, 32],
        "batch_size": 32,
        "budget_s": 3600.0,
        "min_rounds": 0,
        "target_rel_ci": 0.02,
        "base": {"model": "resnet50", "batch_size": 32, "image_size": 224},
        "steps": 100,
        "bandwidths": ["100mbit", "1gbit", "10gbit"],
    }
    out, cuts = rehearsal.rehearse(paper, PLAN)
    assert out["systems"] == paper["systems"] and out["models"] == paper["models"]
    assert out["workers"] == [8]  # smallest and largest, capped at what memory holds
    assert out["batch_size"] == 4 and out["base"]["batch_size"] == 4
    assert out["base"]["image_size"] == 224 and out["base"]["model"] == "resnet50"
    assert out["steps"] == 2 and out["budget_s"] == 60.0
    assert out["min_rounds"] == 0 and out["target_rel_ci"] == 0.02  # nothing to cut
    assert out["bandwidths"] == ["100mbit", "10gbit"]
    said = {c.key: (c.paper, c.rehearsed) for c in cuts}
    assert said == {
        "workers": ([8, 16, 32], [8]),
        "batch_size": (32, 4),
        "base.batch_size": (32, 4),
        "budget_s": (3600.0, 60.0),
        "steps": (100, 2),
        "bandwidths": (["100mbit", "1gbit", "10gbit"], ["100mbit", "10gbit"]),
    }
    assert all(c.why for c in cuts)


def test_worker_counts_are_sampled_and_capped_by_memory() -> None:
    from lab.metrics.rehearsal import memory_cap

    def cut(v: object) -> object:
        return rehearsal.rehearse({"workers": v}, PLAN)[0]["workers"]

    assert PLAN.max_workers == 8
    assert cut([1, 2, 4]) == [1, 4] and cut([8, 16, 32]) == [8] and cut(32) == 8
    assert cut(4) == 4 and cut([2, 16]) == [2, 8]
    assert memory_cap(share=1e-12) == 2 and memory_cap() >= 2  # never below its floor


def test_a_timed_schedule_keeps_its_shape_in_shorter_phases() -> None:
    """KungFu Fig 7's paper schedule (60-s phases, 1-2-4-2-1 workers) took 5 min a system
    in the first full rehearsal; a rehearsal plays it in 15-s phases."""
    from lab.experiments.kungfu import fig7

    def cut(text: str) -> str:
        return rehearsal.rehearse({"schedule": text}, PLAN)[0]["schedule"]

    paper = fig7.DEFAULTS["paper"]["schedule"]
    assert cut(paper) == "0:1,15:2,30:4,45:2,60:1,75:stop"
    assert fig7.checked_schedule(cut(paper)) == cut(paper)
    smoke = fig7.DEFAULTS["smoke"]["schedule"]
    assert cut(smoke) == smoke  # phases already short
    assert cut("0:h1:1,60:h1:2+h2:1,90:stop") == "0:h1:1,30:h1:2+h2:1,45:stop"


def test_a_capped_worker_count_divides_the_papers() -> None:
    """Memory held 3 ranks in the first full rehearsal: KungFu's adaptive batch (8 workers,
    global batches 32-8192) reached its ranks as 32 over 3 and every rank refused it. A cap
    takes the most ranks that divide the paper's count; the points refuse a batch the
    workers do not divide before anything starts."""
    from lab.experiments.kungfu import adaptive
    from lab.experiments.points import scale_parameters

    three = Plan(max_workers=3)

    def cut(v: object) -> object:
        return rehearsal.rehearse({"workers": v}, three)[0]["workers"]

    assert cut(8) == 2 and cut([1, 2, 4, 8]) == [1, 2] and cut(9) == 3 and cut(3) == 3
    assert cut([2, 3]) == [2, 3]  # within the cap: kept
    p = scale_parameters("paper", adaptive.DEFAULTS)
    with pytest.raises(ParameterError, match="start_batch"):
        adaptive.points({**p, "workers": 3})
    assert adaptive.points({**p, "workers": 2})[0]["workers"] == 2


def test_repeats_are_cut_to_what_the_protocol_accepts() -> None:
    from lab.experiments.kungfu import fig8
    from lab.metrics.protocol import Target

    out, _ = rehearsal.rehearse(fig8.DEFAULTS["paper"], PLAN)
    assert out["min_repeats"] == 2
    Target(budget_s=out["budget_s"], min_repeats=out["min_repeats"])  # accepted
    assert rehearsal.rehearse({"repeats": 3, "seeds": 5}, PLAN)[0] == {"repeats": 1, "seeds": 1}


def test_a_scheduled_run_keeps_its_steps_its_schedule_stops_it() -> None:
    from lab.experiments.kungfu import fig7

    [point] = fig7.points(fig7.DEFAULTS["paper"], ["kungfu-elastic"])
    out, cuts = rehearsal.rehearse(point, PLAN)
    assert out["steps"] == point["steps"]  # its schedule, in shorter phases, stops it
    assert out["schedule"] == "0:1,15:2,30:4,45:2,60:1,75:stop"
    assert [c.key for c in cuts] == ["schedule", "batch_size"]


def test_outside_a_rehearsal_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    paper = {"workers": [1, 8, 32], "steps": 100}
    assert rehearsal.apply(paper, "paper") == paper
    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    assert rehearsal.apply(paper, "smoke") == paper  # smoke scale is never cut
    assert rehearsal.apply(paper, "paper") == {"workers": [1, 8], "steps": 2}


def test_scale_parameters_and_points_cut_in_a_rehearsal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab.experiments.benchmark import sync
    from lab.experiments.points import complete_point, scale_parameters

    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    p = scale_parameters("paper", sync.DEFAULTS)
    assert p["systems"] == sync.DEFAULTS["paper"]["systems"]
    assert p["batch_size"] == 4 and p["workers"] == [1, 4]
    assert "rehearsal: batch_size 64 -> 4" in capsys.readouterr().out
    point = complete_point({"system": "horovod-mpi", "model": "ResNet50", "workers": 2}, "paper")
    assert (point["image_size"], point["steps"], point["warmup_steps"]) == (224, 2, 1)


def test_cmdare_bottleneck_points_are_cut_in_a_rehearsal(monkeypatch: pytest.MonkeyPatch) -> None:
    """CM-DARE's PS-bottleneck sweep sets its paper steps and worker counts itself, not
    through scale_parameters: its first rehearsal ran 1-8 workers x 1-2 servers at 200
    steps each (2-4 min a point, ~50 min in all). A rehearsal samples the workers and cuts
    the steps and per-rank batch; a measurement keeps the paper's."""
    from lab.experiments.cmdare import bottleneck

    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    paper = bottleneck.workload_config("paper")
    assert (paper.steps, paper.warmup_steps, paper.batch_size) == (200, 20, 128)
    assert {p["workers"] for p in bottleneck.points(range(1, 9), [1, 2], "paper")} == set(
        range(1, 9)
    )
    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    cut = bottleneck.workload_config("paper")
    # its reading needs timed steps after the shares apply and host samples among them:
    # the plan's 2 are raised to REHEARSAL_STEPS (rehearsals with 2, 3 and 5 failed)
    assert (cut.steps, cut.warmup_steps, cut.batch_size) == (bottleneck.REHEARSAL_STEPS, 1, 4)
    assert cut.model == "cifar_resnet20"
    points = bottleneck.points(range(1, 9), [1, 2], "paper")
    assert [(p["workers"], p["ps"]) for p in points] == [(1, 1), (8, 1), (1, 2), (8, 2)]
    assert bottleneck.settings("paper")["ps_link"] == "1gbit"  # what is not a cost stays


def test_cmdare_revocation_keeps_its_shape_in_a_rehearsal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CM-DARE's revocation runs place events by step: a revocation at 2000 of 4000
    worker steps, checkpoints every 2000, the chief revoked 500-1900 steps after one. Cut
    to the step budget alone, no revocation would happen; a rehearsal scales them by one
    factor, to the smoke run's length, and every chief revocation stays within a
    checkpoint interval."""
    from lab.experiments.cmdare import revocation

    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    paper = revocation.settings("paper", [500, 1900])
    assert (paper["worker_steps"], paper["revoke_at"], paper["since"]) == (4000, 2000, [500, 1900])
    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    cut = revocation.settings("paper", [500, 1000, 1500, 1900])
    assert cut["worker_steps"] == revocation.SCALES["smoke"]["worker_steps"] == 560
    assert (cut["revoke_at"], cut["checkpoint_every"], cut["chief_after"]) == (280, 280, 28)
    assert cut["since"] == [70, 210, 266] and cut["delay"] == 1.0  # scaled, then sampled
    assert (cut["batch_size"], cut["checkpoint_steps"], cut["model"]) == (4, 2, "cifar_resnet32")
    # a checkpoint run's pulls of ResNet-50 at 100 Mbit/s cost 16 s a step: 1 Gbit/s, said
    assert (paper["checkpoint_link"], cut["checkpoint_link"]) == ("100mbit", "1gbit")
    assert any(c["key"] == "checkpoint_link" for c in rehearsal.cuts())
    points = revocation.points(["cold"], [500, 1000, 1500, 1900], ["ResNet50"], "paper")
    [chief] = [p for p in points if p["kind"] == "chief"]
    assert revocation.sinces(chief) == [70, 210, 266]  # the three its line needs
    assert revocation.workload_config(chief, "/nonexistent").checkpoint_every == 280
    assert revocation.settings("smoke") == {**revocation.SCALES["smoke"], "since": []}


def test_cover_runs_every_value_of_every_key_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """CM-DARE's speed-model sweep is a product (5 models x 3 shares x 6 cluster sizes,
    90 PS runs): a rehearsal runs a few points that have every value of each key."""
    from lab.experiments.cmdare import labspeed

    models, cpus, sizes = ["a", "b", "c", "d", "e"], [0.25, 0.5, 1.0], [1, 2, 4, 8]
    grid = [{"model": m, "cpu": c, "workers": w} for m in models for c in cpus for w in sizes]
    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    assert rehearsal.cover(grid, "paper") == grid
    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    assert rehearsal.cover(grid, "smoke") == grid
    sample = rehearsal.cover(grid, "paper")
    assert len(sample) == 5 and all(p in grid for p in sample)
    for key, values in (("model", models), ("cpu", cpus), ("workers", sizes)):
        assert {p[key] for p in sample} == set(values)
    point = labspeed.complete(
        {"model": "cifar_resnet8", "cpu": 1.0, "workers": 8, "ps": 2}, "paper"
    )
    assert (point["workers"], point["batch_size"], point["steps"]) == (8, 4, 10)  # PLAN: 8 ranks


def test_benchmark_rehearsal_keeps_what_its_verdict_compares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync-SGD benchmark's paper grid is 7 systems x 2 models x 3 worker counts (its
    first rehearsal ran 28 points in ~10 min): a rehearsal keeps every system at the
    largest worker count with the first model (the verdict's ratio), the first system at
    the fewest (an efficiency), and covers the second model once."""
    from lab.experiments.benchmark import sync
    from lab.experiments.points import scale_parameters

    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    p = scale_parameters("paper", sync.DEFAULTS)
    systems = sync.DEFAULTS["paper"]["systems"]
    pts = sync.points(p, systems, "paper")
    top = [q["system"] for q in pts if (q["model"], q["workers"]) == ("ResNet50", 4)]
    assert top == systems and len(pts) == len(systems) + 2
    assert p["workers"] == [1, 4]
    assert {"system": systems[0], "model": "ResNet50", "workers": 1, "batch_size": 4} in pts
    assert {q["model"] for q in pts} == {"ResNet50", "MobileNetV2"}
    assert len(sync.points(p, systems, "smoke")) == 2 * len(systems) * len(p["workers"])


def test_a_rehearsal_keeps_its_runs_apart(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lab.cluster.rundir import new_run_dir
    from lab.metrics.layout import runs_dir

    monkeypatch.delenv(REHEARSAL_ENV, raising=False)
    assert runs_root(tmp_path) == tmp_path / "runs"
    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    assert active() == PLAN
    made = new_run_dir("kungfu/fig9", tmp_path)
    assert made.parent == tmp_path / "rehearsals" / "runs" / "kungfu" / "fig9"
    assert runs_dir("kungfu/fig9", tmp_path) == made.parent
    # the sweep's summary too: a rehearsal once wrote results/<experiment>/summary.*
    import pandas as pd

    from lab.metrics.summaries import write_summary

    written = write_summary(pd.DataFrame({"run_id": ["x"]}), "kungfu/fig9", tmp_path)
    assert written == tmp_path / "rehearsals" / "kungfu" / "fig9" / "summary.parquet"
    assert written.is_file() and not (tmp_path / "kungfu").exists()


def test_conclude_marks_a_rehearsal_and_keeps_it_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from lab.experiments.outputs import conclude
    from lab.experiments.verdicts import Status, Verdict

    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    rehearsal.note([rehearsal.Cut("steps", 100, 2, "step budget")])
    v = Verdict(
        "KungFu (OSDI'20)", "Fig 9", "scales", Status.REPRODUCED, lab_value=1.2,
        scale="paper", runs=("results/rehearsals/runs/x/1",),
    )  # fmt: skip
    back = conclude(v, "kungfu", results=tmp_path)
    assert back.rehearsal and back.status is Status.REPRODUCED
    assert not (tmp_path / "verdicts").exists()  # no verdict changed
    saved = json.loads((tmp_path / "rehearsals/verdicts/kungfu/paper/fig_9.json").read_text())
    assert saved["rehearsal"]["steps"] == 2
    assert {"key": "steps", "paper": 100, "rehearsed": 2, "why": "step budget"} in saved[
        "rehearsal"
    ]["cuts"]


def test_rehearsal_profile_declares_gpus_on_emulated_hosts() -> None:
    from lab.cluster.emulation.lifecycle import host_env
    from lab.cluster.inventory import allocate, load_profile
    from lab.cluster.launchers.base import visible_devices
    from lab.metrics.rehearsal import EMULATED_GPUS_ENV

    c = load_profile("rehearsal")
    assert c.emulated and all(h.gpus == 8 for h in c.hosts) and c.slots == 32
    assert {dt.kind for dt in c.device_types} == {"cuda"}
    slots = allocate(c, 32)
    assert [visible_devices(s) for s in slots[:9]] == [
        {"CUDA_VISIBLE_DEVICES": str(i)} for i in [*range(8), 0]
    ]
    assert host_env(c.hosts[0])[EMULATED_GPUS_ENV] == "8"
    assert EMULATED_GPUS_ENV not in host_env(load_profile("emulated-2").hosts[0])


def test_a_cuda_rank_falls_back_only_where_gpus_are_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from lab.bench.easyscale import device
    from lab.metrics.rehearsal import EMULATED_GPUS_ENV

    monkeypatch.delitem(sys.modules, "torch", raising=False)  # torch not imported yet
    monkeypatch.delenv(EMULATED_GPUS_ENV, raising=False)
    assert device.fallback("cuda", "nccl") == ("cuda", "nccl", {})  # an error later, not a fallback
    monkeypatch.setenv(EMULATED_GPUS_ENV, "8")
    kind, backend, said = device.fallback("cuda", "nccl")
    assert (kind, backend) == ("cpu", "gloo")
    assert said["device_fallback"].startswith("cuda -> cpu")
    assert said["backend_fallback"] == "nccl -> gloo"
    assert device.fallback("cpu", "gloo") == ("cpu", "gloo", {})
    assert "torch" not in sys.modules  # device settings still apply before torch starts


def test_report_says_how_much_was_rehearsed(tmp_path: Path) -> None:
    from lab.experiments.notebooks import NotebookResult
    from lab.experiments.rehearsing import SUMMARY, rehearsed_line, write_summary

    root = tmp_path / "nb"
    a, b = root / "a.ipynb", root / "p" / "b.ipynb"
    summary = tmp_path / "rehearsals" / SUMMARY
    write_summary(summary, PLAN, [NotebookResult(a, a, True, 3.0)], root)
    write_summary(summary, PLAN, [NotebookResult(b, b, False, 1.0, "boom")], root)
    line = rehearsed_line(tmp_path, 17)
    assert line.startswith("Paper scale rehearsed: 1 of 17 notebooks, 20")
    data = json.loads(summary.read_text())
    assert [n["notebook"] for n in data["notebooks"]] == ["a.ipynb", "p/b.ipynb"]
    assert rehearsed_line(tmp_path / "none", 17) == ""


def test_each_notebook_rehearses_where_its_paper_path_can_run() -> None:
    from lab.cluster.inventory import load_profile
    from lab.experiments.notebooks import NOTEBOOK_DIR
    from lab.experiments.rehearsing import (
        HOROVODRUN_NOTEBOOKS,
        LOCAL_CLUSTER,
        REHEARSAL_CLUSTER,
        cluster_for,
    )

    def where(rel: str) -> str:
        return cluster_for(NOTEBOOK_DIR / rel, None, NOTEBOOK_DIR)

    assert where("kungfu/fig9_scalability.ipynb") == REHEARSAL_CLUSTER
    assert where("easyscale/fig9_accuracy_consistency.ipynb") == REHEARSAL_CLUSTER
    assert where("cmdare/ps_bottleneck.ipynb") == "emulated"  # builds its hosts per point
    assert where("00_tour.ipynb") == "rehearsal-local"  # horovodrun: refused on emulated hosts
    assert where("kungfu/adaptive_batch.ipynb") == "rehearsal-local"
    for rel in HOROVODRUN_NOTEBOOKS:
        assert (NOTEBOOK_DIR / rel).is_file()
    local = load_profile(LOCAL_CLUSTER)
    assert local.is_local and local.hosts[0].gpus == 8
    assert cluster_for(NOTEBOOK_DIR / "00_tour.ipynb", "mine", NOTEBOOK_DIR) == "mine"


def test_kungfu_rehearsals_keep_what_their_verdicts_compare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KungFu Fig 8 (12 points) and Fig 9 (14) took over 5 min each in the first full
    rehearsal: a rehearsal keeps what the verdict compares, covers every other system and
    model, and runs the baseline or ideal each kept point is compared against."""
    from lab.experiments.kungfu import fig8, fig9
    from lab.experiments.points import scale_parameters

    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    p = scale_parameters("paper", fig9.DEFAULTS)
    systems = fig9.DEFAULTS["paper"]["systems"]
    every, _, _ = fig9.protocol_points(p, systems, "smoke")
    pts, keys, compared = fig9.protocol_points(p, systems, "paper")
    assert len(every) == 14 and len(pts) < len(every)
    assert {q["system"] for q in pts} >= set(systems)
    assert {q["model"] for q in pts} == {"ResNet50", "MobileNetV2"}
    assert {("kungfu-sync", "ResNet50", 8), ("horovod-mpi", "ResNet50", 8)} <= set(keys)
    for system, model, workers in keys:
        if workers > 1:
            assert (fig9.ideal_for(system), model, 1) in keys
    assert all(c.a in keys and (c.b is None or c.b in keys) for c in compared)
    assert any(c.a[0] == "kungfu-sync" and c.b and c.b[0] == "horovod-mpi" for c in compared)

    p = scale_parameters("paper", fig8.DEFAULTS)
    systems = fig8.DEFAULTS["paper"]["systems"]
    pts, keys, compared = fig8.protocol_points(p, systems, "paper")
    assert len(pts) == 8 and {q["system"] for q in pts} == set(systems)
    assert {k[2] for k in keys if k[0] == systems[0]} == set(fig8.SETTINGS)
    assert all(c.a in keys and c.b in keys for c in compared) and len(compared) == 5


def test_p3_rehearsal_keeps_the_first_models_gains(monkeypatch: pytest.MonkeyPatch) -> None:
    """P3's throughput-vs-bandwidth sweep is 3 models x 2 links x (3 lab arms + 2 MXNet
    ones) at paper scale: the first full rehearsal spent over 15 min on it. A rehearsal
    runs the first model's p3 and baseline at both links and covers the rest."""
    from lab.experiments.p3 import sweep

    models, arms = ["vgg19", "resnet50", "inception_v3"], ["baseline", "slicing", "p3"]
    arms += ["mxnet-baseline", "mxnet-slicing"]
    every = [{"model": m, "schedule": a, "bandwidth": f"{m}-{r}"}
             for m in models for r in ("slow", "fast") for a in arms]  # fmt: skip
    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    assert sweep.covered(every, "smoke") == every
    pts = sweep.covered(every, "paper")
    assert len(pts) == 8
    for key in ("model", "schedule", "bandwidth"):
        assert {q[key] for q in pts} == {q[key] for q in every}
    firsts = {(q["schedule"], q["bandwidth"]) for q in pts if q["model"] == "vgg19"}
    assert firsts >= {(a, f"vgg19-{r}") for a in ("p3", "baseline") for r in ("slow", "fast")}


def test_easyscale_fig9_rehearses_one_step_a_stage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """EasyScale Fig 9's first rehearsal spent 303 s on ResNet-50 steps at 224 px (4 levels x
    3 stages + 2 DDP references); a rehearsal runs one step a stage, every level kept."""
    from lab.experiments.easyscale import fig9

    monkeypatch.setenv(REHEARSAL_ENV, PLAN.to_env())
    p = fig9.parameters("paper")
    assert p["steps"] == 1 and p["levels"] == fig9.DEFAULTS["paper"]["levels"]
    assert p["base"]["image_size"] == 224 and p["base"]["batch_size"] == 4
    assert "rehearsal: steps 100 -> 1 (one step a stage" in capsys.readouterr().out
    assert fig9.parameters("paper", steps=3)["steps"] == 2  # a given value: the plan's cap
    assert fig9.parameters("smoke") == fig9.DEFAULTS["smoke"]
    monkeypatch.delenv(REHEARSAL_ENV)
    assert fig9.parameters("paper") == fig9.DEFAULTS["paper"]
