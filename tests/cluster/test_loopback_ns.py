"""A private loopback namespace (lab.cluster.loopback_ns): a process in it sees lo alone and
can listen "on every interface" without facing this machine's; the namespace's holder is
gone within 5 s of the lab's ``kill -9``; where none can be made, the run goes on and its
manifest says why."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.cluster.loopback_hook import LoopbackHook
from lab.cluster.loopback_ns import Unavailable, private_loopback

LISTEN = (
    "import socket, sys; s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen();"
    " print(s.getsockname()[1], flush=True); sys.stdin.read()"
)


def test_a_process_inside_sees_lo_alone_and_its_listener_is_not_here() -> None:
    with private_loopback() as ns:
        links = subprocess.run(
            [*ns.enter_argv(), "ip", "-br", "link"], capture_output=True, text=True, timeout=10
        )
        assert [line.split()[0] for line in links.stdout.splitlines()] == ["lo"], links
        inside = subprocess.Popen(
            [*ns.enter_argv(), sys.executable, "-c", LISTEN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            port = int(inside.stdout.readline())  # type: ignore[union-attr]
            here = subprocess.run(
                ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, timeout=10
            ).stdout
            there = subprocess.run(
                [*ns.enter_argv(), "ss", "-ltnH", f"sport = :{port}"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
            assert f"0.0.0.0:{port}" in there and here.strip() == "", (here, there)
        finally:
            inside.communicate(timeout=10)  # stdin closed: it exits
        holder = ns.holder
    assert not Path(f"/proc/{holder}").exists()


HOLD = (
    "import sys, time; from lab.cluster.loopback_ns import private_loopback\n"
    "with private_loopback() as ns:\n"
    "    print(ns.holder, flush=True); time.sleep(600)\n"
)


def test_the_holder_goes_within_5_s_of_a_kill_9_of_the_lab() -> None:
    lab = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    try:
        holder = int(lab.stdout.readline())  # type: ignore[union-attr]
        assert Path(f"/proc/{holder}/ns/net").exists()
        os.kill(lab.pid, signal.SIGKILL)
        lab.wait(timeout=10)
        killed = time.monotonic()
        while Path(f"/proc/{holder}").exists() and time.monotonic() - killed < 5:
            time.sleep(0.05)
        assert not Path(f"/proc/{holder}").exists(), "the holder outlived the lab by 5 s"
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait(timeout=10)


def test_no_namespace_here_is_said_and_the_run_goes_on(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no unshare, nsenter or ip on it
    with pytest.raises(Unavailable, match="'unshare' is not installed"), private_loopback():
        pass
    hook = LoopbackHook()
    with hook.hosts("cluster", launcher=None) as cluster:  # type: ignore[arg-type]
        assert cluster == "cluster"
    assert hook.manifest()["network"] == {
        "private": False,
        "why": "'unshare' is not installed (Debian: util-linux, iproute2)",
    }
