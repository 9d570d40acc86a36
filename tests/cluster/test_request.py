"""A run as a value (LaunchRequest) and hooks at each stage of run_request, on real runs."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from lab.cluster import LaunchRequest, run_request
from lab.cluster.hooks import During, LaunchHook, WorkloadCheck
from lab.cluster.inventory import Cluster, Slot, local_cluster
from lab.cluster.launchers.base import Job, Line, ProcessSpec
from lab.cluster.rundir import read_manifest
from lab.errors import ParameterError

PRINT_HOOKED = [sys.executable, "-c", "import os; print('hooked', os.environ.get('X_HOOK'))"]


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"command": []}, "command"),
        ({"np": 0}, "np"),
        ({"np": True}, "np"),
        ({"timeout": 0}, "timeout"),
        ({"grace": -1}, "grace"),
        ({"experiment": "a b"}, "experiment"),
        ({"env": {"A=B": "1"}}, "env"),
        ({"where": "local"}, "where"),
    ],
)
def test_a_bad_request_names_its_field(changes: dict[str, Any], name: str) -> None:
    given = {"command": ["true"], "where": local_cluster(), **changes}
    with pytest.raises(ParameterError) as err:
        LaunchRequest(**given)
    assert err.value.name == name


def test_a_request_is_normalised_once_and_checks_workload_flags_by_default() -> None:
    request = LaunchRequest("python -c 'print(1)'", where=local_cluster(), env={"N": 3})
    assert request.command == ("python", "-c", "print(1)")
    assert request.env == {"N": "3"} and request.rank_env["N"] == "3"
    assert request.hooks == (WorkloadCheck(),)
    more = request.with_hooks(LaunchHook())
    assert more.hooks[0] == WorkloadCheck() and len(more.hooks) == 2
    assert dataclasses.replace(request, np=2).np == 2  # frozen, but replaceable


class Recorder(LaunchHook):
    """Notes every stage it is called at and leaves a mark on each of them."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse, self.stages, self.lines, self.ticks = refuse, [], [], 0
        self.run_dir: Path | None = None

    def check(self, job: Job, slots: Sequence[Slot], launcher: Any) -> None:
        self.stages.append(("check", len(slots)))
        if self.refuse:
            raise ParameterError("recorder", "no", "yes")

    def hosts(self, cluster: Cluster, launcher: Any) -> Any:
        self.stages.append(("hosts", cluster.name))
        return contextlib.nullcontext(cluster)

    def process(self, spec: ProcessSpec) -> ProcessSpec:
        self.stages.append(("process", spec.ranks))
        return dataclasses.replace(spec, env={**spec.env, "X_HOOK": f"rank{spec.ranks[0]}"})

    def manifest(self) -> dict[str, Any]:
        return {"recorder": {"stages": len(self.stages)}}

    @contextlib.contextmanager
    def attach(self, cluster: Cluster, run_dir: Path) -> Iterator[During]:
        self.stages.append(("attach", run_dir.is_dir()))
        self.run_dir = run_dir
        yield During(observers=(self,), tickers=(self,))
        self.stages.append(("detached", None))

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        pass

    def on_line(self, line: Line) -> None:
        self.lines.append(line.text)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Any) -> None:
        pass

    def tick(self, sup: Any, now: float) -> None:
        self.ticks += 1


def test_a_hook_takes_part_in_every_stage_of_a_real_run(tmp_path: Path) -> None:
    hook = Recorder()
    request = LaunchRequest(PRINT_HOOKED, where=local_cluster(2), np=2, results_root=tmp_path)
    result = run_request(request.with_hooks(hook), view=None)
    assert result.ok
    assert [s[0] for s in hook.stages] == ["check", "hosts", "process", "process", "attach",
                                           "detached"]  # fmt: skip
    assert hook.stages[0] == ("check", 2) and hook.stages[-2] == ("attach", True)
    assert sorted(hook.lines) == ["hooked rank0", "hooked rank1"]
    assert hook.ticks >= 1 and hook.run_dir == result.run_dir
    manifest = read_manifest(result.run_dir)
    assert manifest["recorder"] == {"stages": 4} and "faults" not in manifest
    assert manifest["state"] == "succeeded"


def test_a_hook_that_refuses_stops_the_run_before_anything_exists(tmp_path: Path) -> None:
    hook = Recorder(refuse=True)
    request = LaunchRequest(PRINT_HOOKED, where=local_cluster(), results_root=tmp_path)
    with pytest.raises(ParameterError, match="recorder"):
        run_request(request.with_hooks(hook), view=None)
    assert [s[0] for s in hook.stages] == ["check"]
    assert not (tmp_path / "runs").exists()


def test_the_default_check_refuses_a_bad_lab_workload_before_launch(tmp_path: Path) -> None:
    bad = ["python", "-m", "lab.bench.synthetic", "--backend", "horovod", "--batch-size", "0"]
    with pytest.raises(ParameterError, match="batch"):
        run_request(LaunchRequest(bad, where=local_cluster(), results_root=tmp_path), view=None)
    assert not (tmp_path / "runs").exists()
