"""Ranks on one host get their own cores: where each launcher says a rank's place, the share
each place gets, and real mpirun and kungfu-run ranks pinned apart."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.affinity import cores_for, local_place
from lab.cluster.inventory import cluster_from_dict, local_cluster
from lab.cluster.launchers.base import find_program
from lab.experiments.points import pinning

PRINT_CORES = "import os; print('cores', sorted(os.sched_getaffinity(0)))"
CORES = sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("env", "place"),
    [
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, (1, 4)),
        ({"HOROVOD_LOCAL_RANK": "0", "HOROVOD_LOCAL_SIZE": "2"}, (0, 2)),
        ({"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "3"}, (2, 3)),
        ({"LOCAL_RANK": "2"}, (2, 3)),  # no size: at least rank + 1
        (
            {
                "KUNGFU_SELF_SPEC": "10.0.0.2:10001",
                "KUNGFU_INIT_PEERS": "10.0.0.1:10000,10.0.0.2:10000,10.0.0.2:10001",
            },
            (1, 2),
        ),
        ({"KUNGFU_SELF_SPEC": "10.0.0.9:10000", "KUNGFU_INIT_PEERS": "10.0.0.1:10000"}, None),
        ({}, None),
    ],
)
def test_each_launchers_local_rank_is_read(env, place):
    assert local_place(env) == place


@pytest.mark.parametrize(
    ("rank", "size", "slots", "allowed", "cores"),
    [
        (0, 2, 1, [0, 1], [0]),
        (1, 2, 1, [1, 0], [1]),
        (1, 2, 1, list(range(16)), list(range(8, 16))),
        (2, 3, 1, list(range(16)), [10, 11, 12, 13, 14]),
        (3, 4, 1, [0, 1], [1]),  # more ranks than cores: round robin
        (0, 1, 2, [0, 1], [0]),  # a lone rank on a host of a slot a core: one core
        (0, 1, 1, [0, 1], [0, 1]),  # ... on a one-slot host: all of them
        (1, 2, 4, list(range(8)), [2, 3]),
    ],
)
def test_each_rank_gets_its_slots_share_of_the_cores(rank, size, slots, allowed, cores):
    assert cores_for(rank, size, allowed, slots) == cores


def test_a_place_outside_its_host_is_refused():
    with pytest.raises(ValueError, match="outside"):
        cores_for(2, 2, [0, 1])
    with pytest.raises(ValueError, match="no CPU"):
        cores_for(0, 1, [])


def test_pinning_is_the_default_on_this_machine_alone():
    emulated = cluster_from_dict({"name": "e", "emulated": {"hosts": 2, "cpu": 0.5}}, "e")
    local = local_cluster(slots=3)
    wrapper = [sys.executable, "-m", "lab.cluster.affinity", "--slots", "3", "--"]
    # a bare python behind the wrapper is its interpreter (launch() resolves only argv[0])
    assert pinning({"workers": 1}, local, ["python", "-m", "w"]) == (
        [*wrapper, sys.executable, "-m", "w"],
        True,
    )
    command, pinned = pinning({"workers": 2}, "local", ["/bin/prog"])
    assert pinned and command[-4:] == ["--slots", str(os.cpu_count()), "--", "/bin/prog"]
    assert pinning({"workers": 2, "pin_cpus": False}, local, ["p"]) == (["p"], False)
    assert pinning({"workers": 2}, emulated, ["p"]) == (["p"], False)


def pinned_cores(launcher: str, tmp_path: Path, np: int = 2) -> list[str]:
    """``np`` ranks started by ``launcher`` through the wrapper on a host of two slots: what
    each says it may run on."""
    wrapper = [sys.executable, "-m", "lab.cluster.affinity", "--slots", "2", "--"]
    result = launch(
        [*wrapper, sys.executable, "-c", PRINT_CORES],
        np=np,
        launcher=launcher,
        hosts="localhost:2",
        timeout=120,
        results_root=tmp_path,
        view=None,
    )
    assert result.ok, result.reason
    logs = [(result.run_dir / f"rank-{r}.log").read_text() for r in range(np)]
    return [next(line for line in log.splitlines() if "cores" in line) for log in logs]


@pytest.mark.skipif(len(CORES) < 2, reason="needs 2 cores to pin two ranks apart")
@pytest.mark.parametrize("launcher", ["mpi", "kungfu"])
def test_real_ranks_are_pinned_apart(launcher, tmp_path):
    if find_program("mpirun" if launcher == "mpi" else "kungfu-run") is None:
        pytest.skip(f"the {launcher} launcher's program is not installed")
    lines = pinned_cores(launcher, tmp_path)
    share = len(CORES) // 2
    assert lines[0].endswith(f"cores {CORES[:share]}")
    assert lines[1].endswith(f"cores {CORES[share : 2 * share]}")
    (alone,) = pinned_cores(launcher, tmp_path, np=1)
    assert alone.endswith(f"cores {CORES[:share]}")
