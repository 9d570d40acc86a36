"""Run one command and make sure it, and everything it starts, ends when its launcher goes.

Standalone and stdlib-only on purpose: its source is sent inline to remote hosts as
``python3 -c SRC``, so it cannot import the lab. Usage::

    guard.py [--env K=V ...] [--cwd DIR] [--grace S] [--forward-eof S]
             [--send-env NAME ...] [--stdin-env N] -- argv...

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

Secret values never go on a command line (any user can read those): ``--send-env NAME``
(with ``--forward-eof``) writes NAME's value from the guard's own environment into the ssh
client's stdin, one ``NAME=<hex of the UTF-8 value>`` line each, and keeps NAME out of the
client's environment; the remote guard, given ``--stdin-env N``, reads N such lines from its
stdin before it starts the command, and sets them.
"""

from __future__ import annotations

import ctypes
import os
import select
import stat
import sys
import time

try:  # the C module behind `signal`: the same calls without the enum import, which
    import _signal as signal  # would be a fifth of the guard's start-up
except ImportError:  # pragma: no cover (other Pythons)
    import signal  # type: ignore[no-redef]

PR_SET_CHILD_SUBREAPER = 36
EOF_REASON = "stdin closed (the run is ending, or its launcher or connection is gone)"
STOP_SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGHUP: "SIGHUP"}
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


def _children(pid: int) -> list[int] | None:
    """Live children of ``pid`` from /proc/PID/task/*/children (a few small reads, where a
    scan of /proc reads every process's stat); None where the kernel lacks that file."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # pid is gone: no children
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None  # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return [c for c in out if _alive(c)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    state = data[data.rfind(b")") + 2 : data.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root``, walked down from it (children files), or found
    by scanning /proc where the kernel has no children files."""
    found: list[int] = []
    todo = [root]
    while todo:
        kids = _children(todo.pop())
        if kids is None:
            return _descendants_by_scan(root)
        for pid in kids:
            if pid not in found:
                found.append(pid)
                todo.append(pid)
    return found


def _descendants_by_scan(root: int) -> list[int]:
    tree = _children_map()
    found, todo = [], [root]
    while todo:
        for pid in tree.get(todo.pop(), []):
            if pid not in found:
                found.append(pid)
                todo.append(pid)
    return found


def _signal_all(pgid: int | None, pids: list[int], sig: int) -> None:
    # try/except rather than contextlib.suppress: contextlib is a start-up cost here
    if pgid is not None:
        try:  # noqa: SIM105
            os.killpg(pgid, sig)
        except OSError:
            pass
    for pid in pids:
        try:  # noqa: SIM105
            os.kill(pid, sig)
        except OSError:
            pass


def _which(name: str, env: dict[str, str]) -> str:
    """``name`` looked up on the child's PATH (as subprocess does), or as given."""
    if os.sep in name:
        return name
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(2, "not found on PATH", name)


def _spawn(command: list[str], env: dict[str, str], cwd: str | None, pipe: bool) -> _Child:
    """Start ``command`` in a new session, stdin from /dev/null (or a pipe we keep).

    os.posix_spawn rather than subprocess: importing subprocess would double the guard's
    start-up, which every rank of every launch pays. Only fds 0-2 reach the child (Python's
    own fds are not inheritable); posix_spawn has no cwd, so the guard moves there first.
    """
    if cwd:
        os.chdir(cwd)
    write = None
    if pipe:
        read, write = os.pipe()
    else:
        read = os.open(os.devnull, os.O_RDONLY)
    try:
        pid = os.posix_spawn(
            _which(command[0], env),
            command,
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, read, 0)],
            setsid=True,
        )
    except BaseException:
        if write is not None:
            os.close(write)
        raise
    finally:
        os.close(read)
    return _Child(pid, write)


class _Child:
    """The command's process plus the reaping of every process we are parent of."""

    def __init__(self, pid: int, stdin: int | None = None) -> None:
        self.pid = pid
        self.stdin = stdin  # our end of its stdin pipe (--forward-eof), else None
        self.status: int | None = None

    def close_stdin(self) -> None:
        if self.stdin is not None:
            os.close(self.stdin)
            self.stdin = None

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.status = os.waitstatus_to_exitcode(status)

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
    _signal_all(pgid, descendants(me), signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        child.reap()
        if not descendants(me):
            return
        time.sleep(0.05)
    left = descendants(me)
    if left:
        _log(f"{len(left)} process(es) outlived SIGTERM by {grace:g}s; sending SIGKILL")
    _signal_all(None if child.done else pgid, left, signal.SIGKILL)
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        child.reap()
        if not descendants(me):
            return
        time.sleep(0.05)


def _watch_stdin() -> bool:
    """Only a pipe or socket on stdin is a kill switch; a terminal or /dev/null is not."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


USAGE = (
    "usage: guard.py [--env K=V] [--cwd DIR] [--grace S] [--forward-eof S] [--send-env NAME] "
    "[--stdin-env N] -- argv..."
)
FLAGS = ("--env", "--cwd", "--grace", "--forward-eof", "--send-env", "--stdin-env")
STDIN_ENV_TIMEOUT = 60.0  # seconds the remote guard waits for the secret values


class _Options:
    def __init__(self) -> None:
        self.env: list[str] = []
        self.cwd: str | None = None
        self.grace = 5.0
        self.forward_eof: float | None = None
        self.send_env: list[str] = []
        self.stdin_env = 0


def _parse(argv: list[str]) -> tuple[_Options, list[str]]:
    """The guard's few flags, read by hand: argparse (and the re and enum it imports)
    would be most of the guard's start-up time, which every rank of every launch pays."""
    if "--" not in argv:
        raise SystemExit(USAGE)
    cut = argv.index("--")
    opts, flags = _Options(), argv[:cut]
    for i in range(0, len(flags), 2):
        name, value = flags[i], flags[i + 1] if i + 1 < len(flags) else None
        if value is None or name not in FLAGS:
            raise SystemExit(f"guard.py: bad arguments {flags!r}; {USAGE}")
        try:
            if name == "--env":
                opts.env.append(value)
            elif name == "--cwd":
                opts.cwd = value
            elif name == "--grace":
                opts.grace = float(value)
            elif name == "--send-env":
                opts.send_env.append(value)
            elif name == "--stdin-env":
                opts.stdin_env = int(value)
            else:
                opts.forward_eof = float(value)
        except ValueError:
            raise SystemExit(f"guard.py: {name} {value!r} is not a number") from None
    command = argv[cut + 1 :]
    if not command:
        raise SystemExit("guard.py: no command after --")
    return opts, command


def _env_lines(names: list[str]) -> bytes:
    """``NAME=<hex>`` lines with the values of ``names`` in our environment (hex: a value
    may hold newlines or any byte)."""
    return b"".join(
        f"{n}={os.environ.get(n, '').encode('utf-8', 'surrogateescape').hex()}\n".encode()
        for n in names
    )


def _read_env_lines(count: int) -> dict[str, str]:
    """``count`` lines of ``NAME=<hex>`` from stdin, read a byte at a time so that nothing
    after them is taken; SystemExit when stdin ends or stays silent first."""
    out: dict[str, str] = {}
    line = b""
    end = time.monotonic() + STDIN_ENV_TIMEOUT
    while len(out) < count:
        ready, _, _ = select.select([0], [], [], max(0.0, end - time.monotonic()))
        byte = os.read(0, 1) if ready else b""
        if not byte:
            raise SystemExit(f"guard.py: stdin ended before {count} --stdin-env value(s)")
        if byte != b"\n":
            line += byte
            continue
        name, sep, value = line.decode().partition("=")
        if not sep or not name:
            raise SystemExit("guard.py: --stdin-env expects NAME=<hex> lines")
        out[name] = bytes.fromhex(value).decode("utf-8", "surrogateescape")
        line = b""
    return out


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux >= 5.3), so the guard
    notices its child's exit at once instead of at its next poll."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def main(argv: list[str]) -> int:
    opts, command = _parse(argv)
    env = dict(os.environ)
    for item in opts.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"guard.py: --env {item!r} is not K=V")
        env[key] = value
    if opts.stdin_env:
        env.update(_read_env_lines(opts.stdin_env))
    for name in opts.send_env:
        env.pop(name, None)  # the ssh client needs none of them: they go through its stdin
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    _set_subreaper()
    parent = os.getppid()
    try:
        child = _spawn(command, env, opts.cwd, pipe=opts.forward_eof is not None)
    except OSError as e:
        _log(f"cannot start {command[0]!r}: {e}")
        return 127
    if opts.send_env and child.stdin is not None:
        data = _env_lines(opts.send_env)
        try:
            while data:
                data = data[os.write(child.stdin, data) :]
        except OSError as e:
            _log(f"could not send --send-env values: {e}")
    watch = _watch_stdin()
    exited = _pidfd(child.pid)
    fds = ([0] if watch else []) + ([exited] if exited is not None else [])
    reason = None
    while not child.done:
        if _stop_signal is not None:
            reason = f"got {STOP_SIGNALS.get(_stop_signal, _stop_signal)}"
        elif os.getppid() != parent:
            reason = "launching process exited"
        elif fds:
            try:
                ready, _, _ = select.select(fds, [], [], 0.1)
                if watch and 0 in ready and not os.read(0, 4096):
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
        _log(f"{reason}; ending pid {child.pid} and its descendants")
        if opts.forward_eof is not None and child.stdin is not None:
            child.close_stdin()
            child.wait(opts.forward_eof)
        _end_tree(child, opts.grace, None if child.done else child.pid)
    elif descendants(os.getpid()):
        _log(f"pid {child.pid} exited; ending the processes it left behind")
        _end_tree(child, opts.grace, None)
    child.wait(1.0)
    code = child.status if child.status is not None else 128 + signal.SIGKILL
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
