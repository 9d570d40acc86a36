"""Where ranks may run: hosts, their slots and GPUs, and the rank-to-slot assignment.

Pure: parses host strings, hostfiles and cluster profiles into frozen dataclasses and
assigns ranks to slots. Nothing here starts a process or touches the network. The
dataclasses themselves (Host, Slot, Cluster) live in lab.cluster.hosts.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lab.cluster.device_types import (
    DeviceType,
    assign_device_types,
    emulated_with_cpu,
    parse_device_types,
    positive_int,
)
from lab.cluster.hosts import LOCAL_NAMES, Cluster, Host, Slot, local_cluster
from lab.cluster.profile_schema import check_profile
from lab.errors import HostSpecError
from lab.metrics.layout import REPO_ROOT

__all__ = [
    "LOCAL_NAMES",
    "PROFILE_DIR",
    "Cluster",
    "DeviceType",
    "Host",
    "Slot",
    "allocate",
    "as_cluster",
    "check_host_name",
    "cluster_from_dict",
    "load_profile",
    "local_cluster",
    "parse_hosts",
    "profile_names",
    "rank_python",
    "read_hostfile",
    "resolve_cluster",
    "slurm_placeholders",
]

PROFILE_DIR = REPO_ROOT / "env" / "clusters"
_HOST_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:@]+$")


def check_host_name(name: str, what: str) -> str:
    """A host name or address as ssh, mpirun and horovodrun's ``sh -c`` may be given it:
    letters, digits and ``_.-[]:@``, not starting with ``-`` (an option to ssh); no spaces
    or shell metacharacters. Raises HostSpecError naming ``what``."""
    if not name or not _HOST_RE.match(name) or name.startswith("-"):
        raise HostSpecError(
            f"{what} {name!r} is not a host name: use letters, digits and '_.-[]:@', "
            "not starting with '-' (no spaces or shell characters)"
        )
    return name


def parse_hosts(spec: str) -> tuple[Host, ...]:
    """Parse ``h1:4,h2:4`` (slots default to 1) as mpirun's and horovodrun's ``-H`` do."""
    if not spec or not spec.strip():
        raise HostSpecError("host string is empty; expected e.g. 'h1:4,h2:4'")
    hosts: list[Host] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise HostSpecError(f"host string {spec!r} has an empty entry")
        name, sep, slots = item.rpartition(":")
        if not sep:
            name, slots = item, "1"
        if not name or not _HOST_RE.match(name) or name.startswith("-"):
            raise HostSpecError(f"host string {spec!r}: {item!r} is not 'name:slots'")
        hosts.append(Host(name=name, slots=positive_int(slots, f"slots of {name!r} in {spec!r}")))
    _check_unique(hosts, spec)
    return tuple(hosts)


def read_hostfile(path: str | os.PathLike[str]) -> tuple[Host, ...]:
    """Read an OpenMPI (``h1 slots=4``), MPICH (``h1:4``) or KungFu (``ip slots=4``)
    hostfile; blank lines and ``#`` comments are skipped, not fatal."""
    p = Path(path)
    if not p.is_file():
        raise HostSpecError(f"hostfile {str(p)!r} does not exist")
    hosts: list[Host] = []
    for lineno, raw in enumerate(p.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        name, slots = fields[0], "1"
        if ":" in name and "=" not in name:
            name, _, slots = name.rpartition(":")
        for f in fields[1:]:
            key, _, value = f.partition("=")
            if key == "slots":
                slots = value
        if not _HOST_RE.match(name) or name.startswith("-"):
            raise HostSpecError(f"{p}:{lineno}: {raw.strip()!r} does not name a host")
        hosts.append(Host(name=name, slots=positive_int(slots, f"slots at {p}:{lineno}")))
    if not hosts:
        raise HostSpecError(f"hostfile {str(p)!r} names no host")
    _check_unique(hosts, str(p))
    return tuple(hosts)


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str | os.PathLike[str]) -> Cluster:
    """Load ``env/clusters/NAME.yaml`` by name, or a profile at a path.

    ``local`` (or ``localhost``) always means this machine.
    """
    text = str(name_or_path)
    if text in LOCAL_NAMES:
        return local_cluster()
    path = Path(text)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = PROFILE_DIR / f"{text}.yaml"
    if not path.is_file():
        raise HostSpecError(
            f"cluster profile {text!r} not found; known profiles: "
            f"{', '.join(['local', *profile_names()])} (or give a path to a .yaml file)"
        )
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise HostSpecError(f"cluster profile {path}: not valid YAML: {e}") from e
    return cluster_from_dict(data, default_name=path.stem, source=str(path))


def cluster_from_dict(data: dict[str, Any], default_name: str, source: str = "") -> Cluster:
    """Build a Cluster from a profile's parsed YAML (see env/clusters/example.yaml)."""
    where = source or default_name
    check_profile(data, where)  # every key and type, naming the file and the key
    python, workdir = data.get("python"), data.get("workdir")
    ssh = data.get("ssh") or {}
    hosts: list[Host] = []
    emulated = data.get("emulated")
    raw_hosts = data.get("hosts")
    if emulated is not None:
        if not isinstance(emulated, dict) or int(emulated.get("hosts", 0)) < 1:
            raise HostSpecError(f"cluster profile {where}: emulated.hosts must be >= 1")
        n = int(emulated["hosts"])
        slots = int(emulated.get("slots", 1))
        gpus = int(emulated.get("gpus", 0))  # declared, for a rehearsal: none is there
        hosts = [Host(f"h{i + 1}", slots=slots, gpus=gpus, python=python) for i in range(n)]
    elif data.get("slurm") is not None:
        hosts = slurm_placeholders(data["slurm"], python, workdir)
    elif isinstance(raw_hosts, str):
        hosts = list(parse_hosts(raw_hosts))
    elif isinstance(raw_hosts, list) and raw_hosts:
        for i, h in enumerate(raw_hosts):
            if isinstance(h, str):
                hosts.extend(parse_hosts(h))
                continue
            if not isinstance(h, dict) or "name" not in h:
                raise HostSpecError(f"cluster profile {where}: hosts[{i}] needs a 'name'")
            check_host_name(str(h["name"]), f"cluster profile {where}: hosts[{i}].name")
            if h.get("address") is not None:
                check_host_name(str(h["address"]), f"cluster profile {where}: hosts[{i}].address")
            hosts.append(
                Host(
                    name=str(h["name"]),
                    slots=positive_int(h.get("slots", 1), f"hosts[{i}].slots in {where}"),
                    gpus=int(h.get("gpus", 0)),
                    address=h.get("address"),
                    ssh_port=h.get("ssh_port", ssh.get("port")),
                    ssh_user=h.get("ssh_user", ssh.get("user")),
                    python=h.get("python", python),
                    workdir=h.get("workdir", workdir),
                    device_type=h.get("device_type"),
                )
            )
    else:
        raise HostSpecError(f"cluster profile {where}: 'hosts' (or 'emulated') is required")
    _check_unique(hosts, where)
    types = parse_device_types(data.get("device_types"), where)
    hosts = assign_device_types(hosts, data.get("host_device_types"), types, where)
    if emulated is not None:
        emulated = emulated_with_cpu(emulated, hosts, types)
    return Cluster(
        name=str(data.get("name", default_name)),
        hosts=tuple(hosts),
        python=python,
        workdir=workdir,
        emulated=emulated,
        description=str(data.get("description", "")),
        extra={**_ssh_extra(ssh), **({"slurm": dict(data["slurm"])} if "slurm" in data else {})},
        device_types=tuple(types.values()),
    )


def slurm_placeholders(
    slurm: dict[str, Any], python: str | None, workdir: str | None
) -> list[Host]:
    """Stand-ins for the nodes a Slurm allocation will give (their names are known only
    then): ``nodes`` hosts of ``tasks_per_node`` slots, so ranks can be placed and counted
    before the allocation; lab.cluster.slurm.hook replaces them with the real ones. A
    profile that names no ``python`` runs the lab's own interpreter there, at the same
    path: a Slurm cluster's nodes share the filesystem the lab runs from."""
    python = python or sys.executable
    nodes = int(slurm.get("nodes", 1))
    per_node = int(slurm.get("tasks_per_node", 1))
    gpus = int(slurm.get("gpus_per_node", 0))
    return [
        Host(name=f"slurm-node-{i + 1}", slots=per_node, gpus=gpus, python=python, workdir=workdir)
        for i in range(nodes)
    ]


def _ssh_extra(ssh: dict[str, Any]) -> dict[str, Any]:
    """What a profile's ``ssh`` section adds to Cluster.extra: its options, and whether it
    turns host-key checking off (lab.cluster.host_keys)."""
    extra: dict[str, Any] = {}
    if ssh.get("options"):
        opts = ssh["options"]
        split = shlex.split(opts) if isinstance(opts, str) else [str(o) for o in opts]
        extra["ssh_options"] = split
    if ssh.get("insecure_host_keys") is True:
        extra["insecure_host_keys"] = True
    return extra


def as_cluster(cluster: Cluster | str | os.PathLike[str] | None = None) -> Cluster:
    """A point's ``cluster`` as a Cluster: itself, the profile a name or path names, or
    this machine (``None``), as launch() reads it."""
    if isinstance(cluster, Cluster):
        return cluster
    return load_profile(cluster or "local")


def rank_python(cluster: Cluster) -> str | None:
    """The interpreter a bare ``python`` at the head of a rank's command means on
    ``cluster``: this one (the lab's venv) on this machine and emulated hosts, the profile's
    ``python`` (or a host's) on remote nodes; None when the profile names none."""
    if cluster.is_local or cluster.emulated:
        return sys.executable
    return cluster.python or next((h.python for h in cluster.hosts if h.python), None)


def resolve_cluster(
    hosts: str | None = None, cluster: str | None = None, hostfile: str | None = None
) -> Cluster:
    """One entry point for the three ways of naming hosts; at most one may be given, and
    one given empty (``-H ''``) is refused rather than read as "this machine"."""
    for name, value in (("hosts", hosts), ("cluster", cluster), ("hostfile", hostfile)):
        if value is not None and not str(value).strip():
            raise HostSpecError(
                f"{name} is empty; name hosts, e.g. -H 'h1:4,h2:4', or leave it out to run "
                "on this machine"
            )
    given = [x for x in (hosts, cluster, hostfile) if x]
    if len(given) > 1:
        raise HostSpecError("give only one of hosts (-H), cluster (--cluster), hostfile")
    if hosts:
        return Cluster(name="hosts", hosts=parse_hosts(hosts))
    if hostfile:
        return Cluster(name=Path(hostfile).stem, hosts=read_hostfile(hostfile))
    return load_profile(cluster or "local")


def allocate(cluster: Cluster, np: int, hosts_order: Sequence[Host] | None = None) -> list[Slot]:
    """Place ``np`` ranks on the cluster's slots, filling each host in turn (``--map-by slot``)."""
    if not isinstance(np, int) or np < 1:
        raise HostSpecError(f"np={np!r} is not allowed; allowed: an integer >= 1")
    if np > cluster.slots:
        raise HostSpecError(
            f"np={np} is more ranks than the {cluster.slots} slots of cluster "
            f"{cluster.name!r} ({cluster.host_string()})"
        )
    placed: list[tuple[Host, int]] = []
    for host in hosts_order or cluster.hosts:
        for _ in range(host.slots):
            if len(placed) < np:
                placed.append((host, 0))
    used = _ordered_unique(h for h, _ in placed)
    per_host = {h: sum(1 for x, _ in placed if x == h) for h in used}
    seen: dict[Host, int] = {}
    slots = []
    for rank, (host, _) in enumerate(placed):
        local = seen.get(host, 0)
        seen[host] = local + 1
        slots.append(
            Slot(
                rank=rank,
                local_rank=local,
                size=np,
                local_size=per_host[host],
                cross_rank=used.index(host),
                cross_size=len(used),
                host=host,
            )
        )
    return slots


def _ordered_unique(items: Iterable[Host]) -> list[Host]:
    out: list[Host] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _check_unique(hosts: Sequence[Host], where: str) -> None:
    names = [h.name for h in hosts]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise HostSpecError(f"{where}: hosts named more than once: {', '.join(dupes)}")
