"""The engines' own launchers on a slurm profile, against a real single-node Slurm
(lab.cluster.slurm.testbed): torchrun (one agent per node through srun), mpirun with the
job's node list reaching the node through srun (Horovod's MPI controller), horovodrun
(Gloo) whose ssh is srun, kungfu-run per node with the node's address and ports the lab
picked, and the roles of TF's parameter-server jobs and of MXNet's ps-lite jobs, one srun
step each. Each rank says which Slurm job and step it ran in (a parameter-server job's
roles are the job's steps in squeue), and does real work (a collective, steps of
training); nothing stays queued or running after."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from slurm_helpers import StepWatch, slurm_profile

from lab.cluster.launching import launch
from lab.cluster.ports import HIGH, LOW
from lab.cluster.slurm.testbed import LocalSlurm
from lab.metrics.parsers import parse_lines

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
SMALL = ["--batch-size", "8", "--steps", "4", "--warmup-steps", "1"]
TF_PS = ["python", "-m", "lab.bench.synthetic", "--backend", "ps", "--model", "tiny_cnn", *SMALL]
TF_PS += ["--image-size", "32", "--threads", "1"]
MXNET = ["python", "-m", "lab.bench.p3.mxnet_workload", "--model", "tiny", *SMALL]


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
    return _run_cmd(profile, tmp_path, launcher, ["python", "-c", code], **kw)


def _run_cmd(profile: Path, tmp_path: Path, launcher: str, command: list[str], **kw):  # type: ignore[no-untyped-def]
    return launch(
        command,
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


def _roles_were_steps(slurm: LocalSlurm, m: dict, steps: StepWatch, roles: list[str]) -> str:
    """Each role's process started through srun in the run's job, on its node, and squeue
    listed one step of that job, on that node, per process; the job's id."""
    job = m["slurm"]["job_id"]
    assert m["slurm"]["nodes"] == [slurm.node] and m["slurm"]["allocated_by_run"]
    assert [p["role"] for p in m["processes"]] == roles
    for p in m["processes"]:
        assert p["argv"][:3] == ["srun", f"--jobid={job}", f"--nodelist={slurm.node}"]
    seen = steps.of(job)
    assert len(seen) == len(roles) and set(seen.values()) == {slurm.node}, seen
    return job


def _address_and_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def test_tf_parameter_server_roles_each_run_as_a_step_of_the_job(
    slurm: LocalSlurm, profile: Path, tmp_path: Path
) -> None:
    _installed("tensorflow")
    with StepWatch(slurm) as steps:
        result = _run_cmd(profile, tmp_path, "ps", TF_PS, timeout=150)
    assert result.ok and result.rank_exit_codes == {0: 0, 1: 0, 2: 0, 3: 0}, result.reason
    m = _manifest(result.run_dir)
    _roles_were_steps(slurm, m, steps, ["worker", "worker", "ps", "chief"])
    # every task listens at the node's NodeAddr, on its own port from the lab's range
    spec = json.loads(m["processes"][0]["env"]["TF_CONFIG"])["cluster"]
    listens = [_address_and_port(a) for role in ("worker", "ps", "chief") for a in spec[role]]
    assert {h for h, _ in listens} == {"127.0.0.1"}
    assert len({p for _, p in listens}) == 4 and all(LOW <= p < HIGH for _, p in listens)
    logs = [(Path(result.run_dir) / f"rank-{r}.log").read_text().splitlines() for r in range(4)]
    for rank, (role, index) in enumerate([("worker", 0), ("worker", 1), ("ps", 0)]):
        said = [r for r in parse_lines(logs[rank], rank=rank) if r.get("event") == "serving"]
        assert [(r["role"], r["index"]) for r in said] == [(role, index)]
    # the chief reports each worker's steps: both workers trained, (1 + 4) x 2 steps
    taken = [r for r in parse_lines(logs[3], rank=3) if r["kind"] == "step"]
    assert len(taken) == 10 and {r["worker"] for r in taken} == {0, 1}
    assert all(r["seconds"] > 0 and r["loss"] > 0 for r in taken)
    assert slurm.queue_within(5.0) == []


def test_mxnet_ps_lite_roles_run_as_steps_and_a_failed_worker_ends_the_job(
    slurm: LocalSlurm, profile: Path, tmp_path: Path, probe
) -> None:
    from lab.cluster.launchers.dmlc import local_python

    if not local_python().is_file():
        pytest.skip("MXNet is not installed here (make setup creates .venv-mxnet)")
    with StepWatch(slurm) as steps:
        result = _run_cmd(profile, tmp_path, "dmlc", MXNET)
    assert result.ok and result.rank_exit_codes == {0: 0, 1: 0, 2: 0, 3: 0}, result.reason
    m = _manifest(result.run_dir)
    _roles_were_steps(slurm, m, steps, ["worker", "worker", "server", "scheduler"])
    env = m["processes"][0]["env"]
    assert env["DMLC_PS_ROOT_URI"] == "127.0.0.1" and LOW <= int(env["DMLC_PS_ROOT_PORT"]) < HIGH
    for p in m["processes"]:  # the nodes share this filesystem: the repository's MXNet venv
        assert p["argv"][p["argv"].index("--") + 1 :].count(str(local_python())) == 1
    for rank in (0, 1):  # each worker trained: MXNet's Speedometer, three steps
        lines = (Path(result.run_dir) / f"rank-{rank}.log").read_text().splitlines()
        taken = [r for r in parse_lines(lines, rank=rank) if r["kind"] == "step"]
        assert [r["step"] for r in taken if r.get("source") == "mxnet"] == [1, 2, 3, 4]
    assert slurm.queue_within(5.0) == []

    # a worker that leaves without finalising its KVStore: ps-lite's server and scheduler
    # would wait forever; the run ends them, and the job with them
    crash = "import os, mxnet as mx; mx.kv.create('dist_sync'); os._exit(3)"
    failed = _run_cmd(profile, tmp_path, "dmlc", ["python", "-c", crash], check=False,
                      timeout=60, grace=1.0)  # fmt: skip
    assert not failed.ok and failed.exit_code == 3 and failed.seconds < 40, failed.reason
    m = _manifest(failed.run_dir)
    assert probe.wait_gone(lambda: probe.marked_pids(m["run_id"]), within=10.0) == []
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
