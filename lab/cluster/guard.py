"""Run one command and make sure it, and everything it starts, ends when its launcher goes.

Standalone and stdlib-only on purpose: its source is sent inline to remote hosts as
``python3 -c SRC``, so it cannot import the lab. Usage::

    guard.py [--env K=V ...] [--cwd DIR] [--grace S] [--forward-eof S] -- argv...

The command starts as a child in a new session with stdin from /dev/null and stdout/stderr
inherited, so its output passes straight through (stdout is the record channel: the guard
never prints there). The guard then watches three things:

- its own stdin reaching EOF: the supervisor (locally) or the ssh session (remotely) holds
  the other end, so EOF arrives when the launching process dies, even by ``kill -9``, or
  when the connection drops;
- its parent process changing (the launching process died and the guard was reparented);
- SIGTERM, SIGINT or SIGHUP sent to the guard itself.

On any of them it ends the child: SIGTERM to the child's process group and to every
descendant (found by walking /proc, since psutil may be missing remotely; the guard makes
itself a child subreaper, so grandchildren that called setsid() stay in its tree), then
SIGKILL to whatever is left after the grace period. When the child exits on its own, its
leftover descendants are ended the same way. The guard exits with the child's exit code,
or 128 + the signal number when the child was ended by a signal (the shell's convention).

``--forward-eof S`` is for wrapping an ``ssh`` client: the child gets a stdin pipe that the
guard holds open; on teardown the guard first closes it (ssh passes the EOF to the remote
guard, which ends the remote ranks while their last output still flows back) and waits up
to S seconds before signalling.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import signal
import stat
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
EOF_REASON = "stdin closed (the run is ending, or its launcher or connection is gone)"
_stop_signal: int | None = None


def _on_signal(signum: int, _frame: object) -> None:
    global _stop_signal
    if _stop_signal is None:
        _stop_signal = signum


def _log(message: str) -> None:
    try:
        sys.stderr.write(f"[guard] {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # the reader is gone; nothing to tell


def _set_subreaper() -> None:
    """Keep orphaned descendants (double forks, setsid escapees) as our children."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children_map() -> dict[int, list[int]]:
    """ppid -> pids of live (non-zombie) processes, read from /proc."""
    out: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue
        out.setdefault(int(fields[1]), []).append(int(name))
    return out


def _descendants(root: int) -> list[int]:
    tree = _children_map()
    found, todo = [], [root]
    while todo:
        for pid in tree.get(todo.pop(), []):
            if pid not in found:
                found.append(pid)
                todo.append(pid)
    return found


def _signal_all(pgid: int | None, pids: list[int], sig: int) -> None:
    if pgid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


class _Child:
    """The command's process plus the reaping of every process we are parent of."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.status: int | None = None

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.proc.pid:
                self.status = os.waitstatus_to_exitcode(status)
                self.proc.returncode = self.status

    @property
    def done(self) -> bool:
        self.reap()
        return self.status is not None

    def wait(self, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while not self.done and time.monotonic() < end:
            time.sleep(0.05)
        return self.done


def _end_tree(child: _Child, grace: float, pgid: int | None) -> None:
    """SIGTERM the child's group and every descendant, wait ``grace``, SIGKILL the rest.

    ``pgid`` is the child's process group, given only while the child is unreaped (so the
    number cannot have been reused); descendants are found either way.
    """
    me = os.getpid()
    _signal_all(pgid, _descendants(me), signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        child.reap()
        if not _descendants(me):
            return
        time.sleep(0.05)
    left = _descendants(me)
    if left:
        _log(f"{len(left)} process(es) outlived SIGTERM by {grace:g}s; sending SIGKILL")
    _signal_all(None if child.done else pgid, left, signal.SIGKILL)
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        child.reap()
        if not _descendants(me):
            return
        time.sleep(0.05)


def _watch_stdin() -> bool:
    """Only a pipe or socket on stdin is a kill switch; a terminal or /dev/null is not."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: guard.py [--env K=V] [--cwd DIR] [--grace S] -- argv...")
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="guard.py", add_help=False)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--cwd")
    p.add_argument("--grace", type=float, default=5.0)
    p.add_argument("--forward-eof", type=float, default=None)
    opts = p.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if not command:
        raise SystemExit("guard.py: no command after --")
    return opts, command


def main(argv: list[str]) -> int:
    opts, command = _parse(argv)
    env = dict(os.environ)
    for item in opts.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"guard.py: --env {item!r} is not K=V")
        env[key] = value
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _set_subreaper()
    parent = os.getppid()
    try:
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=opts.cwd,
            stdin=subprocess.PIPE if opts.forward_eof is not None else subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        _log(f"cannot start {command[0]!r}: {e}")
        return 127
    child = _Child(proc)
    watch = _watch_stdin()
    reason = None
    while not child.done:
        if _stop_signal is not None:
            reason = f"got {signal.Signals(_stop_signal).name}"
        elif os.getppid() != parent:
            reason = "launching process exited"
        elif watch:
            try:
                ready, _, _ = select.select([0], [], [], 0.1)
                if ready and not os.read(0, 4096):
                    reason = EOF_REASON
            except InterruptedError:
                continue
            except OSError:
                reason = EOF_REASON
        else:
            time.sleep(0.1)
        if reason:
            break
    if reason and not child.done:
        _log(f"{reason}; ending pid {proc.pid} and its descendants")
        if opts.forward_eof is not None and proc.stdin is not None:
            proc.stdin.close()
            child.wait(opts.forward_eof)
        _end_tree(child, opts.grace, None if child.done else proc.pid)
    elif _descendants(os.getpid()):
        _log(f"pid {proc.pid} exited; ending the processes it left behind")
        _end_tree(child, opts.grace, None)
    child.wait(1.0)
    code = child.status if child.status is not None else 128 + signal.SIGKILL
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
