"""A bare ``python`` in a rank command means the cluster's Python, not whatever is on PATH."""

from __future__ import annotations

import sys

from lab.cluster import launch
from lab.cluster.inventory import Cluster, Host
from lab.cluster.launching import with_interpreter
from lab.metrics import load_run


def test_local_ranks_run_this_interpreter(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a system python, if any, comes first
    result = launch(
        [
            "python",
            "-c",
            'import sys; print(\'@lab\', \'{"kind": "event", "exe": "%s"}\' % sys.executable)',
        ],
        np=1,
        view=None,
    )
    records = load_run(result.run_dir)
    assert records.loc[records["kind"] == "event", "exe"].tolist() == [sys.executable]


def test_remote_profiles_use_their_python_and_other_commands_stay() -> None:
    remote = Cluster("gpu", (Host("node1", slots=4),), python="/opt/distlab/.venv/bin/python")
    assert with_interpreter(("python3", "-m", "x"), remote) == (
        "/opt/distlab/.venv/bin/python",
        "-m",
        "x",
    )
    bare = Cluster("gpu", (Host("node1", slots=4),))
    assert with_interpreter(("python", "x.py"), bare) == ("python", "x.py")
    assert with_interpreter(("/usr/bin/env", "python"), remote) == ("/usr/bin/env", "python")
