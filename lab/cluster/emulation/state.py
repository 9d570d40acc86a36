"""What the lab created in the kernel, written down before it is created.

Each emulated cluster gets a random tag that names all of its objects and an owner
record ``~/.cache/distlab/emulation/<tag>.json`` (owner pid, its start time, boot id, its
keeper's pid and start time, and every namespace, link and cgroup it will make). A record
is written *before* its objects exist, so a kernel killed half-way still leaves a complete
list. The keeper (lab.cluster.emulation.keeper) removes them within seconds of the owner's
death; should the keeper die too, the next start cleans up records whose owner and keeper
are both gone. Objects that no record names are never touched, even when their names look
like the lab's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.metrics.liveness import boot_id as _boot_id
from lab.metrics.liveness import start_time as _start_time

log = logging.getLogger(__name__)
PREFIX = "distlab"


def state_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = root / "distlab" / "emulation"
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_tag() -> str:
    """Six hex digits: short enough for 15-character interface names."""
    return secrets.token_hex(3)


def netns_name(tag: str, host: str) -> str:
    return f"{PREFIX}-{tag}-{host}"


def bridge_name(tag: str) -> str:
    return f"dlbr-{tag}"


def veth_name(tag: str, index: int) -> str:
    return f"dlv-{tag}-{index}"


def cgroup_dir(tag: str) -> str:
    return f"{PREFIX}-{tag}"


@dataclass
class Record:
    """One emulated cluster's objects and who owns them."""

    tag: str
    subnet: str
    pid: int = field(default_factory=os.getpid)
    start_time: int | None = None
    boot_id: str = field(default_factory=_boot_id)
    cgroup_version: int = 0
    bridge: str = ""
    links: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)  # children before parents
    files: str = ""  # the cluster's own directory (sshd keys and logs), if any
    keeper_pid: int | None = None  # the process that removes all this if the owner dies
    keeper_start_time: int | None = None

    def __post_init__(self) -> None:
        if self.start_time is None:
            self.start_time = _start_time(self.pid)

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.tag}.json"

    def owner_alive(self) -> bool:
        if self.boot_id != _boot_id():
            return False
        return _start_time(self.pid) == self.start_time

    def keeper_alive(self) -> bool:
        """Whether this cluster's keeper (lab.cluster.emulation.keeper) still runs: while
        it does, the cluster is its to remove, even after the owner died."""
        if self.keeper_pid is None or self.boot_id != _boot_id():
            return False
        return _start_time(self.keeper_pid) == self.keeper_start_time

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path)

    @property
    def shares_mark(self) -> Path:
        """The file the launcher creates once the hosts' CPU shares apply; ranks that
        start at full speed wait for it before timing (lab.bench.shares_wait)."""
        return state_dir() / f"{self.tag}.shares"

    def drop(self) -> None:
        self.shares_mark.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)

    def names_are_ours(self) -> bool:
        """Guard against a corrupted record naming objects that are not the lab's: every
        cgroup lies under the tag's own directory, reached without ``..`` (its processes
        are killed and the directory removed), and so does the files directory."""
        names = [self.bridge, *self.links, *self.netns, Path(self.files).name]
        groups = all(_plain(c) and cgroup_dir(self.tag) in Path(c).parts for c in self.cgroups)
        files = not self.files or (_plain(self.files) and Path(self.files).parent == state_dir())
        return groups and files and all(self.tag in n for n in names if n)


def _plain(path: str) -> bool:
    """An absolute path without ``..`` or ``.`` parts: it names what it says."""
    p = Path(path)
    return p.is_absolute() and not any(part in ("..", ".") for part in path.split("/"))


def records() -> list[Record]:
    out = []
    for path in sorted(state_dir().glob("*.json")):
        try:
            out.append(Record(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError) as e:
            log.warning("ignoring unreadable emulation record %s: %s", path, e)
    return out


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Serialise start-up and clean-up between processes (two notebooks at once)."""
    with open(state_dir() / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
