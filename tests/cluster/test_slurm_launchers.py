"""The engines' own launchers on a slurm profile, against a real single-node Slurm
(lab.cluster.slurm.testbed): torchrun (one agent per node through srun), mpirun with the
job's node list reaching the node through srun (Horovod's MPI controller), horovodrun
(Gloo) whose ssh is srun, kungfu-run per node with the node's address and ports the lab
picked. Each rank says which Slurm job and
step it ran in, and does one real collective; nothing stays queued or running after."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from slurm_helpers import slurm_profile

from lab.cluster.launching import launch
from lab.cluster.slurm.testbed import LocalSlurm

WHERE = "'job', os.environ.get('SLURM_JOB_ID'), 'step', os.environ.get('SLURM_STEP_ID')"
TORCH = (
    "import os, torch, torch.distributed as d; d.init_process_group('gloo'); "
    "t = torch.tensor([d.get_rank() + 1.0]); d.all_reduce(t); "
    f"print('rank', d.get_rank(), 'sum', t.item(), {WHERE}); d.destroy_process_group()"
)
HOROVOD = (
    "import os, torch, horovod.torch as hvd; hvd.init(); "
    "s = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum); "
    f"print('rank', hvd.rank(), 'sum', s.item(), {WHERE})"
)
KUNGFU = (
    "import os; from kungfu.python import current_rank, current_cluster_size, run_barrier; "
    f"run_barrier(); print('rank', current_rank(), 'size', current_cluster_size(), {WHERE})"
)
RANK_ENV = {"OMP_NUM_THREADS": "1"}


def _installed(*modules: str, program: str | None = None) -> None:
    import importlib.util

    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} is not installed (make setup)")
    if program and not (shutil.which(program) or (Path(sys.executable).parent / program).exists()):
        pytest.skip(f"{program} is not installed (make setup)")


@pytest.fixture
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return slurm_profile(tmp_path / "slurm-test.yaml")


def _run(profile: Path, tmp_path: Path, launcher: str, code: str, **kw):  # type: ignore[no-untyped-def]
    return launch(
        ["python", "-c", code],
        np=2,
        launcher=launcher,
        cluster=str(profile),
        env=RANK_ENV,
        view=None,
        timeout=kw.pop("timeout", 120),
        results_root=tmp_path / "results",
        **kw,
    )


def _said(run_dir: Path) -> dict[int, list[str]]:
    """What each rank printed on its ``rank`` line, as words."""
    out = {}
    for r in (0, 1):
        text = (Path(run_dir) / f"rank-{r}.log").read_text()
        out[r] = next(ln.split() for ln in text.splitlines() if ln.startswith("rank "))
    return out


def _manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "manifest.json").read_text())


def test_torchrun_runs_one_agent_per_node_through_srun(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    _installed("torch")
    result = _run(profile, tmp_path, "torchrun", TORCH)
    m = _manifest(result.run_dir)
    job = m["slurm"]["job_id"]
    (agent,) = m["processes"]
    assert agent["argv"][:3] == ["srun", f"--jobid={job}", f"--nodelist={slurm.node}"]
    assert "torch.distributed.run" in agent["argv"] and agent["ranks"] == [0, 1]
    # the rendezvous is at the node's address (its NodeAddr), on a port the lab picked
    argv = agent["argv"]
    assert argv[argv.index("--master-addr") + 1] == "127.0.0.1"
    for r, words in _said(result.run_dir).items():
        assert words[:4] == ["rank", str(r), "sum", "3.0"] and words[5] == job, words
    assert slurm.queue_within(5.0) == []


def test_horovod_mpi_ranks_start_through_srun_on_the_jobs_nodes(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    _installed("torch", "horovod", program="mpirun")
    result = _run(profile, tmp_path, "mpi", HOROVOD)
    m = _manifest(result.run_dir)
    job = m["slurm"]["job_id"]
    (mpirun,) = m["processes"]
    argv = mpirun["argv"]
    assert argv[argv.index("-H") + 1] == f"{slurm.node}:2"  # hosts and slots from the job
    assert f"lab.cluster.slurm.agent --job={job}" in " ".join(argv)
    # the node is not this machine by name, so mpirun's daemon went there through the
    # agent's srun: the ranks are tasks of the job
    for r, words in _said(result.run_dir).items():
        assert words[:4] == ["rank", str(r), "sum", "3.0"] and words[5] == job, words
    assert slurm.queue_within(5.0) == []


def test_horovodrun_reaches_the_node_through_srun_in_sshs_place(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    _installed("torch", "horovod", program="horovodrun")
    result = _run(profile, tmp_path, "horovod", HOROVOD, options={"controller": "gloo"})
    m = _manifest(result.run_dir)
    job = m["slurm"]["job_id"]
    (runner,) = m["processes"]
    argv = runner["argv"]
    assert argv[argv.index("-H") + 1] == f"{slurm.node}:2"
    # the node's NodeAddr is a loopback address: no interface discovery, Gloo over lo
    assert argv[argv.index("--network-interfaces") + 1] == "lo"
    # horovodrun's ssh is the run's own, which goes through srun into the job
    ssh = (Path(result.run_dir) / "bin" / "ssh").read_text()
    assert f"lab.cluster.slurm.agent --job={job}" in ssh
    said = _said(result.run_dir)
    for r, words in said.items():
        assert words[:4] == ["rank", str(r), "sum", "3.0"] and words[5] == job, words
    assert said[0][7] != said[1][7]  # one srun step per rank, as horovodrun's ssh per rank
    assert slurm.queue_within(5.0) == []


def test_kungfu_run_per_node_with_its_address_and_picked_ports(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    _installed("kungfu", program="kungfu-run")
    result = _run(profile, tmp_path, "kungfu", KUNGFU)
    m = _manifest(result.run_dir)
    job = m["slurm"]["job_id"]
    (runner,) = m["processes"]
    argv = runner["argv"]
    assert argv[:2] == ["srun", f"--jobid={job}"]
    assert argv[argv.index("-H") + 1] == "127.0.0.1:2"
    first, last = map(int, argv[argv.index("-port-range") + 1].split("-"))
    assert last == first + 1 and first != 10000  # the lab's block, not KungFu's default
    for r, words in _said(result.run_dir).items():
        assert words[:4] == ["rank", str(r), "size", "2"] and words[5] == job, words
    logs = Path(result.run_dir) / "kungfu" / slurm.node
    assert len(list(logs.glob("127.0.0.1.*.stdout.log"))) == 2  # in the run, not the cwd
    assert slurm.queue_within(5.0) == []


def test_a_failed_mpi_rank_ends_the_job_and_every_task(
    slurm: LocalSlurm, profile: Path, tmp_path: Path, probe
) -> None:
    _installed(program="mpirun")
    code = (
        "import os, sys, time; r = os.environ['OMPI_COMM_WORLD_RANK']; print('ready', r, "
        "flush=True); time.sleep(1 if r == '1' else 120); sys.exit(3)"
    )
    result = _run(profile, tmp_path, "mpi", code, check=False, timeout=60, grace=1.0)
    assert not result.ok and result.seconds < 40
    assert 1 in [f.rank for f in result.failures][:1], result.reason
    m = _manifest(result.run_dir)
    assert probe.wait_gone(lambda: probe.marked_pids(m["run_id"]), within=10.0) == []
    assert slurm.queue_within(5.0) == []


def test_a_gpu_rank_keeps_its_device_under_srun() -> None:
    """Slurm sets a step's CUDA_VISIBLE_DEVICES to all the job's GPUs on the node; the
    rank's own choice (its local rank's GPU) is set again inside the step."""
    from lab.cluster.inventory import Host
    from lab.cluster.launchers.base import ProcessSpec
    from lab.cluster.slurm.hook import SlurmHook

    hook = SlurmHook()
    hook.job_id, hook.nodes = "42", ["gpu7"]
    node = Host("gpu7", slots=4, gpus=4, python="/opt/venv/bin/python")
    spec = ProcessSpec(("python", "x.py"), {"CUDA_VISIBLE_DEVICES": "3"}, (3,), node, cwd="/w")
    out = hook.process(spec)
    assert out.argv[:3] == ("srun", "--jobid=42", "--nodelist=gpu7")
    tail = out.argv[out.argv.index("--") :]
    assert tail == ("--", "env", "CUDA_VISIBLE_DEVICES=3", "python", "x.py")
    assert "--chdir=/w" in out.argv and out.host.is_local
    assert out.env["PATH"].split(os.pathsep)[0] == "/opt/venv/bin"
    here = ProcessSpec(("mpirun", "-np", "4"), {}, (0, 1, 2, 3), Host("localhost"))
    assert hook.process(here) is here  # mpirun runs on the lab's machine


def test_agent_reads_ssh_command_lines() -> None:
    from lab.cluster.slurm.agent import split_ssh_args

    # horovodrun's: options before and after the host, then one quoted command word
    words = ["-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "n1"]
    words += ["-p", "22", "-o", "ConnectTimeout=10", "cd /w > /dev/null 2>&1 ; python x.py"]
    assert split_ssh_args(words) == ("n1", ["cd /w > /dev/null 2>&1 ; python x.py"])
    # mpirun's: the host, then the daemon's words
    assert split_ssh_args(["n2", "PATH=/x;export", "prted", "-v"]) == (
        "n2",
        ["PATH=/x;export", "prted", "-v"],
    )
    assert split_ssh_args(["-x", "-oBatchMode=yes", "n3", "true"]) == ("n3", ["true"])


def test_agent_carries_the_daemon_command_to_the_node() -> None:
    from lab.cluster.slurm.agent import agent_argv

    argv = agent_argv("42", "n3", ["PATH=/x;export PATH;", "prted", '"a b"'])
    assert argv[:3] == ["srun", "--jobid=42", "--nodelist=n3"]
    assert "--overlap" in argv and "--kill-on-bad-exit=1" not in argv
    assert argv[-4:] == ["--", "/bin/sh", "-c", 'PATH=/x;export PATH; prted "a b"']
