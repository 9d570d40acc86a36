"""Fault injection: bad plans fail before launch; a revoked emulated host is really gone
(its processes killed, nothing of it left after the run) and its events are in the run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from lab.cluster import emulation, launch
from lab.cluster.emulation import netns, state
from lab.cluster.faults import Revocation, read_events, run_steps
from lab.cluster.inventory import load_profile
from lab.errors import ParameterError

WHY = emulation.missing()
SPIN = [sys.executable, "-m", "lab.bench.spin", "--report", "0.1"]
SYNTHETIC = [sys.executable, "-m", "lab.bench.synthetic", "--backend", "ps", "--steps", "10",
             "--warmup-steps", "2"]  # fmt: skip
RANK_ENV = {"OMP_NUM_THREADS": "1"}


def _launch(tmp_path: Path, faults: list, command: list[str] = SPIN, **kw: object) -> object:
    return launch(command, np=2, cluster=load_profile("emulated-2"), faults=faults,
                  results_root=tmp_path, view=None, **kw)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize(
    ("revocation", "name"),
    [
        (Revocation("h9", at_time=1.0), "host"),
        (Revocation("h1", at_time=-1.0), "at_time"),
        (Revocation("h1", at_time=float("nan")), "at_time"),
        (Revocation("h1", at_step=24), "at_step"),  # (10 + 2) x 2 ranks: the run has 24
        (Revocation("h1", at_step=0), "at_step"),
        (Revocation("h1"), "at_time/at_step"),
        (Revocation("h1", at_time=1.0, at_step=3), "at_time/at_step"),
        (Revocation("h1", at_time=1.0, replace="hot"), "replace"),
        (Revocation("h1", at_time=1.0, delay=-2), "delay"),
        (Revocation("h1", at_time=1.0, replace="warm", spare="h2"), "spare"),  # h2 runs a rank
    ],
)
def test_bad_plans_fail_before_launch(tmp_path: Path, revocation: Revocation, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        _launch(tmp_path, [revocation], SYNTHETIC)
    assert err.value.name == name
    assert not (tmp_path / "runs").exists()  # nothing started, no run directory


def test_a_host_is_revoked_again_only_later_and_after_a_cold_replacement(
    tmp_path: Path,
) -> None:
    """A chief revoked after each checkpoint: allowed in order after a cold replacement;
    the same step twice, a step then a time, or after no replacement, refused."""
    from lab.cluster.faults import check_plan
    from lab.cluster.launchers.base import ProcessSpec

    cluster = load_profile("emulated-2")
    specs = [ProcessSpec(argv=tuple(SYNTHETIC), env={}, ranks=(i,), host=h, role="worker",
                         cwd=None) for i, h in enumerate(cluster.hosts[:2])]  # fmt: skip
    again = [Revocation("h1", at_step=5), Revocation("h1", at_step=9)]
    assert check_plan(again, cluster, specs, SYNTHETIC, 2) == tuple(again)
    for plan in (
        [Revocation("h1", at_step=5), Revocation("h1", at_step=5)],
        [Revocation("h1", at_step=5), Revocation("h1", at_time=9.0)],
        [Revocation("h1", at_step=5, replace="none"), Revocation("h1", at_step=9)],
    ):
        with pytest.raises(ParameterError) as err:
            _launch(tmp_path, plan, SYNTHETIC)
        assert err.value.name == "host"
    assert not (tmp_path / "runs").exists()


def test_at_step_needs_a_command_that_says_its_steps(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="at_time"):
        _launch(tmp_path, [Revocation("h1", at_step=3)], [*SPIN, "--seconds", "1"])
    with pytest.raises(ParameterError, match="honouring DISTLAB_STANDBY"):
        cluster = load_profile("emulated-4")
        launch([*SPIN, "--seconds", "1"], np=2, cluster=cluster, results_root=tmp_path,
               faults=[Revocation("h1", at_time=0, replace="warm", spare="h4")])  # fmt: skip
    assert run_steps(SYNTHETIC, 3) == 36
    assert run_steps(["x", "--steps", "5"], 2) == 10


def _leftovers(tag: str) -> dict[str, list[str]]:
    links = json.loads(netns.run(["ip", "-j", "link", "show"]) or "[]")
    groups = [str(p) for p in Path("/sys/fs/cgroup").rglob(state.cgroup_dir(tag))]
    found = {
        "netns": [n for n in netns.list_netns() if tag in n],
        "links": [link["ifname"] for link in links if tag in link["ifname"]],
        "cgroups": groups,
        "records": [str(p) for p in state.state_dir().glob(f"{tag}.*")],
    }
    return {k: v for k, v in found.items() if v}


def _pids_of_run(run_id: str) -> list[int]:
    marker = f"LAB_RUN_ID={run_id}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if marker in Path(f"/proc/{name}/environ").read_bytes():
                    found.append(int(name))
            except OSError:
                pass
    return found


@pytest.mark.skipif(WHY is not None, reason=WHY or "")
@pytest.mark.root
@pytest.mark.timeout(90)
def test_revoked_host_is_gone_and_its_events_are_in_the_run(tmp_path: Path) -> None:
    plan = [Revocation("h2", at_time=1.5, replace="cold", delay=0.5)]
    result = _launch(tmp_path, plan, [*SPIN, "--seconds", "3"], env=RANK_ENV, timeout=60)
    run = Path(result.run_dir)  # type: ignore[attr-defined]
    manifest = json.loads((run / "manifest.json").read_text())
    events = read_events(run)
    # the replacement started at full speed and got h2's share back at its first step; when
    # the lab sees the revoked rank's exit (its event) depends on load: before the cold
    # replacement 0.5 s later when quiet, after it once with two test workers at load 6
    names = [e["event"] for e in events]
    assert [n for n in names if n != "revoked_exited"] == [
        "revoked", "replaced", "share_restored", "recovered"
    ]  # fmt: skip
    assert names.count("revoked_exited") == 1 and names.index("revoked_exited") > 0
    by_name = {e["event"]: e for e in events}
    revoked, exited, replaced, restored, recovered = (
        by_name[n] for n in ("revoked", "revoked_exited", "replaced", "share_restored", "recovered")
    )
    # ended by the SIGKILL of the host's cgroup (its exit below), not by its own end; how
    # soon the lab sees that is a matter of load (0.02-0.5 s quiet), not asserted here
    assert exited["seconds_since_revoked"] >= 0
    assert restored["cpu"] == 0.4 and replaced["t"] < restored["t"] <= recovered["t"]
    assert revoked["host"] == "h2" and revoked["ranks"] == [1] and revoked["killed"] >= 1
    assert revoked["link"] == "down" and 1.5 <= revoked["t"] < 5
    assert replaced["t"] - revoked["t"] >= 0.5 and replaced["mode"] == "cold"
    assert recovered["rank"] == 1 and recovered["t"] > replaced["t"]
    exits = [(p["ranks"], p["exit_code"], p["signal"]) for p in manifest["process_exits"]]
    assert exits == [([0], 0, None), ([1], 137, "SIGKILL"), ([1], 0, None)]
    assert manifest["state"] == "succeeded" and manifest["faults"][0]["host"] == "h2"
    # The replacement ran its whole job again: rank 1 summarises twice as long a log.
    summaries = [json.loads(x[5:]) for x in (run / "rank-1.log").read_text().splitlines()
                 if x.startswith("@lab") and '"summary"' in x]  # fmt: skip
    assert len(summaries) == 1 and summaries[0]["seconds"] >= 2.5
    assert _pids_of_run(manifest["run_id"]) == []
    tag = manifest["cluster"]["hosts"][0]["namespace"].split("-")[1]
    assert _leftovers(tag) == {}
