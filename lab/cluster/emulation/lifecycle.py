"""Bring an emulated cluster up, run commands inside its hosts, and take it down again."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from lab.bench.shares_wait import MARK_ENV
from lab.cluster.emulation import cgroups, fair, netns, removal, shaping, startup, state
from lab.cluster.emulation.keeper import Keeper
from lab.cluster.emulation.spec import HostSpec, host_specs, requested_subnet
from lab.cluster.inventory import Cluster, Host
from lab.errors import LaunchError
from lab.metrics.rehearsal import EMULATED_GPUS_ENV

log = logging.getLogger(__name__)
ENTER = str(Path(__file__).with_name("enter.py"))
_ACTIVE: dict[str, str] = {}  # namespace -> cgroup directory, for clusters up in this process
_SERVERS: dict[str, list[subprocess.Popen]] = {}  # tag -> sshd processes started here
_FAIR: dict[str, dict[str, str]] = {}  # namespace -> its fair defaults (lab.cluster.emulation.fair)
_MARKS: dict[str, str] = {}  # namespace -> its shares mark, where hosts start at full speed


def missing() -> str | None:
    """Why emulated clusters cannot run here (not root, no ``ip``/``tc``, no cgroup cpu)."""
    if os.geteuid() != 0:
        return "emulated clusters need root (network namespaces, tc and cgroups)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"emulated clusters need iproute2's {tool!r} (apt-get install iproute2)"
    try:
        cgroups.detect()
    except LaunchError as e:
        return str(e)
    return None


def host_env(host: Host) -> dict[str, str]:
    """Defaults that make engines in a host use its bridge interface, not loopback, and
    the host's fair settings (lab.cluster.emulation.fair). A host that declares GPUs
    (``emulated: {gpus: N}``, a rehearsal's) has none: its ranks are told so by
    ``DISTLAB_EMULATED_GPUS=N``, and their device code falls back to the CPU and NCCL to
    gloo, saying so (lab.bench.easyscale.device). Where hosts start at full speed,
    ``DISTLAB_SHARES_MARK`` names the file that says their shares apply
    (lab.bench.shares_wait)."""
    iface = netns.HOST_IFNAME
    declared = {EMULATED_GPUS_ENV: str(host.gpus)} if host.gpus > 0 else {}
    mark = _MARKS.get(host.namespace or "")
    return {
        **declared,
        **({MARK_ENV: mark} if mark else {}),
        **_FAIR.get(host.namespace or "", {}),
        "GLOO_SOCKET_IFNAME": iface,
        "TP_SOCKET_IFNAME": iface,
        "NCCL_SOCKET_IFNAME": iface,
        "HOROVOD_GLOO_IFACE": iface,
        "OMPI_MCA_btl_tcp_if_include": iface,
        "OMPI_MCA_oob_tcp_if_include": iface,
        "DISTLAB_HOST": host.name,
        "DISTLAB_HOST_ADDRESS": host.address or "",
    }


def wrap_argv(host: Host, argv: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` inside ``host``'s namespace and cgroup.

    Hosts without a namespace get ``argv`` back unchanged.
    """
    if not host.namespace:
        return list(argv)
    group = _ACTIVE.get(host.namespace)
    if group is None:
        for rec in state.records():
            if host.namespace in rec.netns:
                group = rec.cgroups[rec.netns.index(host.namespace)]
    if group is None:
        raise LaunchError(
            f"host {host.name}: namespace {host.namespace!r} was not made by "
            "lab.cluster.emulation.prepare (or that cluster has been taken down)"
        )
    env = [x for k, v in host_env(host).items() for x in ("--env", f"{k}={v}")]
    twin = cgroups.accounting_dir(group)
    if twin is not None and twin.is_dir():
        env = ["--cgroup", str(twin), *env]
    return [sys.executable, "-I", ENTER, "--cgroup", group, *env, "--",
            "ip", "netns", "exec", host.namespace, *argv]  # fmt: skip


@contextlib.contextmanager
def prepare(cluster: Cluster, sshd: bool = False) -> Iterator[Cluster]:
    """Create the cluster's hosts; yield it with namespaces and addresses; remove them.

    A cluster without ``emulated`` is yielded unchanged. Stale objects of lab runs whose
    owner died are removed first. Removal also runs when the body raises, and, should this
    process die (even by ``kill -9``), the cluster's keeper (lab.cluster.emulation.keeper)
    does it within seconds.

    Args:
        cluster: the cluster; its ``emulated`` section says what to create.
        sshd: start an sshd in every host even when the profile does not ask for one
            (``emulated: {sshd: true}``): launchers that reach hosts over SSH need it.

    Raises:
        LaunchError: root, ``ip``, ``tc`` or a cgroup cpu controller is missing, or the
            subnet is taken.
    """
    if not cluster.emulated:
        yield cluster
        return
    specs = host_specs(cluster.emulated, [h.name for h in cluster.hosts])
    why = missing()
    if why:
        raise LaunchError(why)
    driver = cgroups.detect()
    with state.locked():
        cleanup_stale()
        rec = _plan(cluster, specs, driver, sshd or bool((cluster.emulated or {}).get("sshd")))
        keeper = None
        try:
            keeper = Keeper.start(rec)
            keeper.confirm()  # watching before any object exists, so none outlives a kill
            up = _build(cluster, specs, rec, driver)
        except BaseException:
            _teardown_after_error(rec)
            if keeper is not None:
                keeper.release()
            raise
    try:
        yield up
    except BaseException:
        with state.locked():
            _teardown_after_error(rec)
        keeper.release()
        raise
    try:
        with state.locked():
            teardown(rec)
    finally:
        keeper.release()


def _teardown_after_error(rec: state.Record) -> None:
    """Tear down while an error propagates: a removal problem is logged, not raised, so
    the error that ended the run stays the one the caller sees."""
    try:
        teardown(rec)
    except LaunchError as e:
        log.error("%s", e)


def _plan(
    cluster: Cluster, specs: list[HostSpec], driver: cgroups.CgroupDriver, sshd: bool
) -> state.Record:
    live = [ipaddress.IPv4Network(r.subnet) for r in state.records() if r.subnet]
    subnet = netns.pick_subnet(requested_subnet(cluster.emulated or {}), live)
    if len(specs) > subnet.num_addresses - 3:
        raise LaunchError(f"{len(specs)} hosts do not fit in subnet {subnet}")
    tag = _free_tag(driver)
    parent = driver.base / state.cgroup_dir(tag)
    rec = state.Record(
        tag=tag,
        subnet=str(subnet),
        cgroup_version=driver.version,
        bridge=state.bridge_name(tag),
        links=[state.veth_name(tag, i + 1) for i in range(len(specs))],
        netns=[state.netns_name(tag, s.name) for s in specs],
        cgroups=[*(str(parent / s.name) for s in specs), str(parent)],
        files=str(state.state_dir() / tag) if sshd else "",
    )
    rec.save()  # before anything exists: a crash from here on leaves a complete list
    return rec


def _free_tag(driver: cgroups.CgroupDriver) -> str:
    """A tag that no record, namespace, link or cgroup on this machine carries yet: a
    failed start removes every object its tag names, so a tag drawn twice would remove
    another run's hosts."""
    names = [*netns.list_netns(), *netns.list_links()]
    for _ in range(100):
        tag = state.new_tag()
        taken = any(tag in n for n in names) or (driver.base / state.cgroup_dir(tag)).exists()
        if not taken and not any(state.state_dir().glob(f"{tag}*")):
            return tag
    raise LaunchError("no unused emulation tag found in 100 draws")


def _build(
    cluster: Cluster, specs: list[HostSpec], rec: state.Record, driver: cgroups.CgroupDriver
) -> Cluster:
    subnet = ipaddress.IPv4Network(rec.subnet)
    prefix = subnet.prefixlen
    parent = Path(rec.cgroups[-1])
    slots = [h.slots for h in cluster.hosts]
    weights = [cgroups.weight_for(s.cpu, n) for s, n in zip(specs, slots, strict=True)]
    fair_setting = fair.check_fair((cluster.emulated or {}).get("fair"))
    starts = startup.check_startup((cluster.emulated or {}).get("startup"))
    driver.create(parent, None, weight=sum(weights))
    bridge_ip = subnet.broadcast_address - 1
    netns.create_bridge(rec.bridge, f"{bridge_ip}/{prefix}")
    hosts, info, latency_ok = [], {}, True
    for i, (host, spec) in enumerate(zip(cluster.hosts, specs, strict=True)):
        ns, veth, group = rec.netns[i], rec.links[i], rec.cgroups[i]
        address = str(subnet.network_address + i + 1)
        driver.create(Path(group), spec.cpu, weight=weights[i])
        netns.create_host(ns, veth, rec.bridge, f"{address}/{prefix}")
        latency_ok &= shaping.shape(veth, None, spec.bandwidth, spec.latency)
        latency_ok &= shaping.shape(netns.HOST_IFNAME, ns, spec.bandwidth, spec.latency)
        hosts.append(replace(host, address=address, namespace=ns))
        _FAIR[ns] = fair.fair_env(spec.cpu, fair_setting)
        if starts == "full":
            _MARKS[ns] = str(rec.shares_mark)
        info[host.name] = {"cpu": spec.cpu, "bandwidth": spec.bandwidth,
                           "latency": spec.latency, "cgroup": group, "veth": veth,
                           "slots": slots[i], "weight": weights[i],
                           "env": dict(_FAIR[ns])}  # fmt: skip
        _ACTIVE[ns] = group
    if not latency_ok:
        log.warning(
            "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): link latency is NOT "
            "emulated; bandwidth limits are"
        )
    extra: dict = dict(cluster.extra)
    if rec.files:
        from lab.cluster.emulation import sshd

        servers = _SERVERS.setdefault(rec.tag, [])
        extra["ssh_options"] = sshd.start(hosts, Path(rec.files), wrap_argv, servers, host_env)
    extra = {
        **extra,
        "emulation": {
            "tag": rec.tag, "subnet": rec.subnet, "bridge": rec.bridge,
            "bridge_address": str(bridge_ip), "cgroup_version": driver.version,
            "latency_emulated": latency_ok, "fair": fair_setting, "hosts": info,
            "cgroup": str(parent), "weight": sum(weights), "startup": starts,
            **({"shares_mark": str(rec.shares_mark)} if starts == "full" else {}),
        },
    }  # fmt: skip
    return replace(cluster, hosts=tuple(hosts), extra=extra)


def teardown(rec: state.Record) -> None:
    """Stop this process's sshds of ``rec``'s cluster and forget its hosts, then remove
    every object it names (lab.cluster.emulation.removal)."""
    if rec.tag in _SERVERS:
        from lab.cluster.emulation import sshd

        sshd.stop(_SERVERS.pop(rec.tag))
    for ns in rec.netns:
        _ACTIVE.pop(ns, None)
        _FAIR.pop(ns, None)
        _MARKS.pop(ns, None)
    removal.remove(rec)


def cleanup_stale() -> list[str]:
    """Remove the objects of records whose owner died (or that this process failed to
    remove) and whose keeper is gone too; the tags cleaned. Objects no record names are
    left alone."""
    cleaned = []
    active_tags = {ns.split("-")[1] for ns in _ACTIVE}
    for rec in state.records():
        mine_but_dropped = rec.pid == os.getpid() and rec.tag not in active_tags
        if rec.owner_alive() and not mine_but_dropped:
            continue
        if rec.keeper_alive():
            continue  # it removes the cluster itself (or is about to)
        if not rec.names_are_ours():
            log.error("record %s names objects without its tag; not touching them", rec.path)
            continue
        log.warning("removing stale emulated cluster %s (owner pid %d gone)", rec.tag, rec.pid)
        try:
            teardown(rec)
        except LaunchError as e:
            log.error("%s", e)  # a new cluster gets another tag and subnet; go on
            continue
        cleaned.append(rec.tag)
    return cleaned
