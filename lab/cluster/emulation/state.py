"""What the lab created in the kernel, written down before it is created.

Each emulated cluster gets a random tag that names all of its objects and an owner
record ``~/.cache/distlab/emulation/<tag>.json`` (owner pid, its start time, boot id, and
every namespace, link and cgroup it will make). A record is written *before* its objects
exist, so a kernel killed half-way still leaves a complete list. At the next start, records
whose owner is gone are cleaned up; objects that no record names are never touched, even
when their names look like the lab's.
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


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> int | None:
    """Clock ticks after boot at which ``pid`` started (tells a reused pid apart)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


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

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path)

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)

    def names_are_ours(self) -> bool:
        """Guard against a corrupted record naming objects that are not the lab's."""
        names = [self.bridge, *self.links, *self.netns, Path(self.files).name]
        groups = all(cgroup_dir(self.tag) in Path(c).parts for c in self.cgroups)
        files = not self.files or Path(self.files).parent == state_dir()
        return groups and files and all(self.tag in n for n in names if n)


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
