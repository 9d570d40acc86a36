"""horovodrun in elastic mode: argv, option checks, and tags for ranks up to max_np."""

from __future__ import annotations

import pytest

from lab.cluster.inventory import allocate, local_cluster
from lab.cluster.launchers import get_launcher
from lab.cluster.launchers.base import Job
from lab.errors import ParameterError


def _job(tmp_path, **options):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho localhost:1\n")
    script.chmod(0o755)
    opts = {"discovery_script": str(script), "min_np": 1, "max_np": 4, **options}
    return Job(command=("python", "-m", "w"), np=1, cluster=local_cluster(2), options=opts)


def test_elastic_argv_has_bounds_script_and_no_host_list(tmp_path) -> None:
    job = _job(tmp_path, nic="lo")
    launcher = get_launcher("horovod-elastic")
    (spec,) = launcher.build(job, allocate(job.cluster, 1))
    argv = list(spec.argv)
    at = argv.index("-np")
    assert argv[:at] == launcher.runner()  # horovodrun, or it with its build check cached
    assert argv[at : at + 6] == ["-np", "1", "--min-np", "1", "--max-np", "4"]
    assert argv[argv.index("--host-discovery-script") + 1] == job.options["discovery_script"]
    assert "-H" not in argv and "--gloo" in argv
    assert argv[argv.index("--network-interfaces") + 1] == "lo"
    assert spec.env["LAB_HOROVOD_BIND"] == "127.0.0.1"  # loopback only: servers there too
    assert argv[-3:] == ["python", "-m", "w"]
    assert spec.ranks == (0, 1, 2, 3)
    assert launcher.demux(spec, "stdout", "[3]<stdout>:hello").rank == 3


def test_elastic_rejects_bad_bounds_and_missing_script(tmp_path) -> None:
    launcher = get_launcher("horovod-elastic")
    with pytest.raises(ParameterError, match="min_np/max_np"):
        launcher.build(_job(tmp_path, min_np=2), [])
    job = _job(tmp_path, discovery_script=str(tmp_path / "missing.sh"))
    with pytest.raises(ParameterError, match="discovery_script"):
        launcher.check(job)
