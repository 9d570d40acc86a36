"""horovodrun in elastic mode: workers join and leave as a host-discovery script says.

The job starts with ``np`` workers and may grow to ``max_np`` or shrink to ``min_np``;
horovodrun polls the discovery script (``options["discovery_script"]``, e.g. written by
lab.cluster.elastic_hosts) and resets the workers' ``hvd.elastic`` state on each change.
Lines are tagged like plain horovodrun's, for any rank up to ``max_np``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lab.cluster.horovod_runner import BIND_ENV
from lab.cluster.inventory import Slot
from lab.cluster.launchers.base import (
    Job,
    ProcessSpec,
    base_env,
    launcher_host,
    register,
)
from lab.cluster.launchers.horovod import HorovodLauncher, with_checked_ssh
from lab.errors import ParameterError


def _elastic_sizes(job: Job) -> tuple[int, int]:
    lo, hi = job.options.get("min_np", 1), job.options.get("max_np", job.np)
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= job.np <= hi):
        raise ParameterError(
            "min_np/max_np", (lo, hi), f"integers with 1 <= min_np <= np={job.np} <= max_np"
        )
    return lo, hi


@register("horovod-elastic")
class HorovodElasticLauncher(HorovodLauncher):
    """horovodrun --gloo -np N --min-np A --max-np B --host-discovery-script S.

    Options:
        discovery_script: an executable printing ``host:slots`` lines (required).
        min_np, max_np: the bounds of the job's size (default: 1 and np).
        nic: network interface(s) for Horovod's traffic; on one machine use "lo", which
            also keeps horovodrun's own servers on 127.0.0.1 (its hosts come from the
            discovery script, so only ``nic`` says the job stays on this machine).
    """

    name = "horovod-elastic"

    def check(self, job: Job) -> None:
        super().check(job)
        _elastic_sizes(job)
        script = job.options.get("discovery_script")
        if not script or not Path(str(script)).is_file():
            raise ParameterError(
                "discovery_script", script, "an executable file printing host:slots lines"
            )

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        lo, hi = _elastic_sizes(job)
        argv = [*self.runner(), "-np", str(job.np), "--min-np", str(lo), "--max-np", str(hi)]
        argv += ["--host-discovery-script", str(job.options["discovery_script"])]
        argv += ["--gloo", "--disable-cache"]
        nic = job.options.get("nic")
        if nic:
            argv += ["--network-interfaces", str(nic)]
        argv += job.command
        env = with_checked_ssh(job, base_env(job))  # discovered hosts too
        if nic == "lo":
            env[BIND_ENV] = "127.0.0.1"
        return [
            ProcessSpec(
                argv=tuple(argv),
                env=env,
                ranks=tuple(range(hi)),
                host=launcher_host(),
                role="launcher",
            )
        ]
