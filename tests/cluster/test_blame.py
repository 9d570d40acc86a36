"""Which rank a launcher's failure came from: the engines' own failure reports, as OpenMPI 5.0
(prterun), horovodrun 0.28 (Gloo), kungfu-run and torchrun printed them when rank 1 of 2
failed on this machine (OpenMPI 4's form as its users post it), and the one line that says
why a rank failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.cluster.blame import (
    RankEnd,
    error_message,
    horovod_ends,
    kungfu_ends,
    openmpi_ends,
    torchrun_ends,
)
from lab.cluster.inventory import Cluster, Host, allocate
from lab.cluster.launchers.base import Job, ProcessSpec
from lab.cluster.launchers.kungfu import KungFuLauncher
from lab.cluster.launchers.mpi import MpiLauncher
from lab.cluster.launchers.torchrun import TorchrunLauncher
from lab.cluster.output import RunOutput
from lab.cluster.processes import Proc
from lab.cluster.root_cause import TRACEBACK_FIRST, outcome
from lab.errors import RanksFailed

RULE = "-" * 74
E = "\x1b[1;35m[E]\x1b[m"  # kungfu-run colours its level

OPENMPI_EXITED = [
    RULE,
    "prterun detected that one or more processes exited with non-zero status,",
    "thus causing the job to be terminated. The first process to do so was:",
    "",
    "   Process name: [prterun-vm-6181@1,1]",
    "   Exit code:    3",
    RULE,
]
# OpenMPI 4's mpirun wraps the sentence elsewhere and names processes [[jobid,1],rank]
OPENMPI4_EXITED = [
    "mpirun detected that one or more processes exited with non-zero status, thus causing",
    "the job to be terminated. The first process to do so was:",
    "",
    "  Process name: [[22319,1],2]",
    "  Exit code:    4",
]
OPENMPI_SIGNAL = [
    RULE,
    "prterun noticed that process rank 1 with PID 32475 on node vm exited on",
    "signal 9 (Killed).",
    RULE,
]
OPENMPI_ABORT = [
    RULE,
    "prterun has exited due to process rank 1 with PID 0 on node vm calling",
    '"abort". This may have caused other processes in the application to be',
    "terminated by signals sent by prterun (as reported here).",
    RULE,
]
HOROVOD_KILLED = [
    "I0000 00:00:1795830467.613970   19014 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "Process 1 exit with status code 137.",
    "Terminating remaining workers after failure of Process 1.",
    "Process 0 exit with status code 143.",
    "Traceback (most recent call last):",
    "    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '",
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, "
    "thus causing the job to be terminated. The first process to do so was:",
    "Process name: 1",
    "Exit code: 137",
    "",
    "[guard] pid 2196 exited; ending the processes it left behind",
]
KUNGFU_EXIT3 = [
    '[I] will parallel run 2 instances of /work/.venv/bin/python with ["x.py"]',
    f"{E} #<127.0.0.1.27855> exited with error: exit status 3",
    f"{E} #<127.0.0.1.27854> exited with error: signal: killed",
    "[I] all 2/2 local peers finished, took 933.395119ms",
    "exit on error: 2 tasks failed at 140635234622487:/tmp/src/srcs/go/kungfu/runner/simple.go:19",
]
TORCHRUN_KILLED = [
    "E1128 02:04:25.253000 4971 .venv/lib/python3.11/site-packages/torch/distributed/elastic/"
    "multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 5394) of binary: "
    "/work/.venv/bin/python",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "=" * 54,
    "/tmp/fail.py FAILED",
    "-" * 54,
    "Failures:",
    "[1]:",
    "  time      : 2026-11-28_02:04:25",
    "  host      : localhost",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -15 (pid: 5392)  (SIGTERM)",
    "  error_file: <N/A>",
    "  traceback : Signal 15 (SIGTERM) received by PID 5392",
    "-" * 54,
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-11-28_02:04:25",
    "  host      : localhost",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : -9 (pid: 5394)  (SIGKILL)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 5394",
    "=" * 54,
]


def _ends(ends: list[RankEnd]) -> list[tuple[int, int | None, str | None, int | None]]:
    return [(e.rank, e.exit_code, e.signal, e.pid) for e in ends]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (OPENMPI_EXITED, [(1, 3, None, None)]),
        (OPENMPI_SIGNAL, [(1, 137, "SIGKILL", 32475)]),
        (OPENMPI_ABORT, [(1, None, None, None)]),  # the code is mpirun's own
        (OPENMPI4_EXITED, [(2, 4, None, None)]),
        (["rank 0 up", "some other text"], []),
    ],
)  # fmt: skip
def test_openmpi_reports(lines, expected) -> None:
    assert _ends(openmpi_ends(lines)) == expected


def test_openmpi_words_the_rank_it_names() -> None:
    (end,) = openmpi_ends(OPENMPI_SIGNAL)
    assert end.said.startswith("prterun noticed that process rank 1 with PID 32475")


def test_horovodrun_names_the_first_failure_first_then_the_others() -> None:
    first, then = (1, 137, "SIGKILL", None), (0, 143, "SIGTERM", None)
    assert _ends(horovod_ends(HOROVOD_KILLED)) == [first, then]
    exit3 = ["Process 1 exit with status code 3.", "Process name: 1", "Exit code: 3"]
    assert _ends(horovod_ends(exit3)) == [(1, 3, None, None)]
    assert horovod_ends(["Process 1 exit with status code 3 and more"]) == []


def test_kungfu_run_names_peers_by_address_and_port() -> None:
    ranks = {("127.0.0.1", 27854): 0, ("127.0.0.1", 27855): 1}
    ends = kungfu_ends(KUNGFU_EXIT3, lambda ip, port: ranks.get((ip, port)))
    assert _ends(ends) == [(1, 3, None, None), (0, 137, "SIGKILL", None)]
    assert "exit status 3" in ends[0].said
    # a peer that is not this launcher's is left out
    assert _ends(kungfu_ends(KUNGFU_EXIT3, lambda ip, port: None)) == []


def test_kungfu_launcher_maps_its_own_peers() -> None:
    job = Job(("python", "x.py"), np=2, cluster=Cluster("t", (Host("localhost", slots=2),)),
              options={"port_range": "27854-27855", "runner_port": 27853})  # fmt: skip
    (spec,) = KungFuLauncher(program="kungfu-run").build(job, allocate(job.cluster, 2))
    assert [e.rank for e in KungFuLauncher().blame(spec, KUNGFU_EXIT3)] == [1, 0]


def test_torchrun_root_cause_first_and_local_ranks_mapped() -> None:
    root, then = (1, 137, "SIGKILL", 5394), (0, 143, "SIGTERM", 5392)
    assert _ends(torchrun_ends(TORCHRUN_KILLED)) == [root, then]
    # the second host's agent carries ranks 2 and 3: local rank 1 is rank 3
    spec = ProcessSpec(("torchrun",), {}, (2, 3), Host("b"), role="launcher")
    assert [e.rank for e in TorchrunLauncher().blame(spec, TORCHRUN_KILLED)] == [3, 2]


PY_TRACEBACK = [
    "I0000 00:00:1795830443.453548   19014 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "Traceback (most recent call last):",
    '  File "/tmp/blame-probe/fail.py", line 16, in <module>',
    '    raise ValueError(f"boom on rank {r}")',
    "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "ValueError: boom on rank 1",
    "[guard] pid 18998 exited; ending the processes it left behind",
]
MPI_ABORT_STDERR = [
    RULE,
    "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
    "  Proc: [[46918,1],1]",
    "  Errorcode: 3",
    "",
    "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
    "You may or may not see output from other processes, depending on",
    "exactly when Open MPI kills them.",
    RULE,
    "\x00",
]


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (PY_TRACEBACK, "ValueError: boom on rank 1"),
        (PY_TRACEBACK[2:], "ValueError: boom on rank 1"),  # the header scrolled away
        (MPI_ABORT_STDERR,
         "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD with errorcode 3"),
        (["rank 1 giving up", PY_TRACEBACK[0]], "rank 1 giving up"),  # noise is passed over
        (["Killed"], "Killed"),  # the shell horovodrun starts a rank with
        ([PY_TRACEBACK[0], "", RULE], None),
    ],
)  # fmt: skip
def test_error_message(stderr, expected) -> None:
    assert error_message(stderr) == expected


def _failed_mpirun(tmp_path: Path, lines: list[tuple[str, str]]) -> tuple[Proc, RunOutput]:
    """An mpirun process for ranks 0 and 1 that ended with 1 after printing ``lines``
    (stream, text) as OpenMPI tags them."""
    spec = ProcessSpec(("mpirun", "-np", "2"), {}, (0, 1), Host("localhost"), role="launcher")
    proc = Proc(spec, list(spec.argv), {}, None)
    proc.code, proc.ended = 1, 1.0
    out = RunOutput(tmp_path, MpiLauncher(), [], (0, 1))
    for stream, text in lines:
        out.take(proc, stream, text + "\n")
    out.close()
    return proc, out


def test_a_rank_named_by_mpirun_gets_its_code_host_and_message(tmp_path) -> None:
    said = [("stderr", t) for t in OPENMPI_EXITED]
    proc, out = _failed_mpirun(tmp_path, [("stderr", "[1,1]<stderr>: giving up"), *said])
    end = outcome([proc], MpiLauncher(), out, {0: "h1", 1: "h2"}, 20, 0.0)
    (failure,) = end.failures
    assert (failure.rank, failure.host, failure.exit_code) == (1, "h2", 3)
    assert failure.named_by == "mpirun" and failure.message == "giving up"
    assert failure.summary() == "rank 1 on h2 failed (exit code 3): giving up"
    report = str(RanksFailed([failure], reason=failure.summary())).splitlines()
    assert report[0] == "rank 1 on h2 ended with exit code 3 (named by mpirun): giving up"
    assert end.codes == {0: None, 1: 3}  # rank 0 ended with mpirun; how, it did not say


def test_without_the_engines_words_the_first_traceback_names_the_rank(tmp_path) -> None:
    lines = [
        ("stdout", "[1,0]<stdout>: rank 0 up"),
        ("stderr", "[1,1]<stderr>: Traceback (most recent call last):"),
        ("stderr", '[1,1]<stderr>:   File "x.py", line 1, in <module>'),
        ("stderr", "[1,1]<stderr>: KeyError: 'lr'"),
    ]
    proc, out = _failed_mpirun(tmp_path, lines)
    (failure,) = outcome([proc], MpiLauncher(), out, {}, 20, 0.0).failures
    assert (failure.rank, failure.exit_code, failure.named_by) == (1, 1, TRACEBACK_FIRST)
    assert failure.message == "KeyError: 'lr'"


def test_when_no_rank_can_be_named_the_launcher_is(tmp_path) -> None:
    proc, out = _failed_mpirun(tmp_path, [("stderr", "mpirun: cannot reach host h9")])
    (failure,) = outcome([proc], MpiLauncher(), out, {}, 20, 0.0).failures
    assert failure.launcher_of == (0, 1) and failure.named_by == ""
    assert failure.summary() == (
        "the launcher of ranks 0,1 on localhost failed (exit code 1): mpirun: cannot reach host h9"
    )
