"""Host strings, hostfiles, profiles and rank placement (lab.cluster.inventory)."""

from __future__ import annotations

import re

import pytest

from lab.cluster.inventory import (
    Cluster,
    Host,
    allocate,
    as_cluster,
    cluster_from_dict,
    load_profile,
    local_cluster,
    parse_hosts,
    read_hostfile,
    resolve_cluster,
)
from lab.errors import HostSpecError


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("h1:4,h2:4", [("h1", 4), ("h2", 4)]),
        ("h1", [("h1", 1)]),
        ("10.0.0.1:2, 10.0.0.2:1", [("10.0.0.1", 2), ("10.0.0.2", 1)]),
        ("localhost:2", [("localhost", 2)]),
    ],
)
def test_parse_hosts(spec: str, expected: list[tuple[str, int]]) -> None:
    assert [(h.name, h.slots) for h in parse_hosts(spec)] == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("h1:4,,h2:4", "empty entry"),
        ("h1:four", "not a whole number"),
        ("h1:0", "must be >= 1"),
        ("h1:2,h1:2", "more than once"),
        ("bad host:2", "not 'name:slots'"),
    ],
)
def test_parse_hosts_rejects(spec: str, message: str) -> None:
    with pytest.raises(HostSpecError, match=message):
        parse_hosts(spec)


def test_hostfile_openmpi_mpich_and_comments(tmp_path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# the lab's nodes\n\nnode1 slots=4   # first\nnode2:2\n10.0.0.3 slots=1\n")
    assert [(h.name, h.slots) for h in read_hostfile(f)] == [
        ("node1", 4),
        ("node2", 2),
        ("10.0.0.3", 1),
    ]


def test_hostfile_missing_or_empty(tmp_path) -> None:
    with pytest.raises(HostSpecError, match="does not exist"):
        read_hostfile(tmp_path / "nope")
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(HostSpecError, match="names no host"):
        read_hostfile(tmp_path / "empty")


def test_allocate_fills_hosts_in_order() -> None:
    cluster = Cluster("c", parse_hosts("a:2,b:2"))
    slots = allocate(cluster, 3)
    assert [(s.rank, s.host.name, s.local_rank, s.local_size, s.cross_rank) for s in slots] == [
        (0, "a", 0, 2, 0),
        (1, "a", 1, 2, 0),
        (2, "b", 0, 1, 1),
    ]
    assert {s.size for s in slots} == {3}
    assert {s.cross_size for s in slots} == {2}


def test_allocate_rejects_too_many_ranks_and_bad_np() -> None:
    cluster = Cluster("c", parse_hosts("a:2"))
    with pytest.raises(HostSpecError, match="more ranks than the 2 slots"):
        allocate(cluster, 3)
    with pytest.raises(HostSpecError, match="np=0"):
        allocate(cluster, 0)


def test_gpu_per_local_rank() -> None:
    host = Host("g", slots=4, gpus=2)
    slots = allocate(Cluster("g", (host,)), 4)
    assert [s.gpu for s in slots] == [0, 1, 0, 1]
    assert allocate(local_cluster(2), 1)[0].gpu is None


def test_profiles_by_name_and_path(tmp_path) -> None:
    example = load_profile("example")
    assert [h.name for h in example.hosts] == ["node1", "node2"]
    assert example.hosts[0].gpus == 4 and example.hosts[0].address == "10.0.0.11"
    assert example.hosts[0].ssh_user == "ubuntu"
    p = tmp_path / "mine.yaml"
    p.write_text("hosts: 'x:2,y:1'\npython: /usr/bin/python3\n")
    mine = load_profile(str(p))
    assert mine.name == "mine" and mine.slots == 3
    assert load_profile("local").is_local


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(HostSpecError, match=r"not found; known profiles: local, .*example"):
        load_profile("no-such-cluster")


def test_profile_validation() -> None:
    with pytest.raises(HostSpecError, match="unknown keys"):
        cluster_from_dict({"hosts": "a:1", "hostz": 1}, "x")
    with pytest.raises(HostSpecError, match=r"'hosts' .* is required"):
        cluster_from_dict({}, "x")
    with pytest.raises(HostSpecError, match=r"hosts\[0\]: needs a 'name'"):
        cluster_from_dict({"hosts": [{"slots": 2}]}, "x")


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        ("hosts:\n  - {name: n1, slots: 4, gpus: two}\n", "hosts[0].gpus", "not a whole number"),
        ("hosts:\n  - {name: n1, gpu: 2}\n", "hosts[0].gpu", "unknown keys ['gpu']"),
        ("hosts: 'n1:2'\nssh: {user: lab, port: '22x'}\n", "ssh.port", "not a whole number"),
        ("hosts: 'n1:2'\nssh: {usr: lab}\n", "ssh.usr", "unknown keys ['usr']"),
        ("hosts:\n  - {name: n1, slots: 0}\n", "hosts[0].slots", "less than the minimum of 1"),
        ("emulated: {hosts: two}\n", "emulated.hosts", "not a whole number"),
        ("emulated: {hosts: 2, cpu: lots}\n", "emulated.cpu", "not a number"),
    ],
)
def test_profile_typos_name_the_file_and_the_key(tmp_path, text: str, key: str, says: str) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    with pytest.raises(HostSpecError) as caught:
        load_profile(str(path))
    message = str(caught.value)
    assert message.startswith(f"cluster profile {path}: {key}: "), message
    assert says in message
    assert caught.value.profile == str(path) and caught.value.keys == [key]


def test_shipped_profiles_are_valid() -> None:
    for name in ("example", "emulated-2", "emulated-4"):
        assert load_profile(name).hosts


def test_emulated_profile_makes_named_hosts() -> None:
    c = cluster_from_dict({"emulated": {"hosts": 3, "cpu": 0.4}}, "emu")
    assert [h.name for h in c.hosts] == ["h1", "h2", "h3"]
    assert c.emulated == {"hosts": 3, "cpu": 0.4}
    assert not c.is_local


def test_resolve_cluster_takes_one_source() -> None:
    assert resolve_cluster(hosts="a:2").slots == 2
    assert resolve_cluster().name == "local"
    with pytest.raises(HostSpecError, match="only one of"):
        resolve_cluster(hosts="a:1", cluster="example")


def test_as_cluster_keeps_a_cluster_and_loads_a_name_or_path(tmp_path) -> None:
    mine = Cluster(name="mine", hosts=parse_hosts("a:2"))
    assert as_cluster(mine) is mine
    assert [h.name for h in as_cluster("example").hosts] == ["node1", "node2"]
    p = tmp_path / "two.yaml"
    p.write_text("hosts: 'x:1,y:1'\n")
    assert as_cluster(p).name == "two" and as_cluster(p).slots == 2
    assert as_cluster(None).is_local and as_cluster("local").is_local
    with pytest.raises(HostSpecError, match="not found"):
        as_cluster("no-such-cluster")


def test_host_string_round_trips() -> None:
    c = Cluster("c", parse_hosts("a:2,b:3"))
    assert c.host_string() == "a:2,b:3"
    assert [(h.name, h.slots) for h in parse_hosts(c.host_string())] == [("a", 2), ("b", 3)]


def test_profile_ssh_options_reach_the_cluster() -> None:
    c = cluster_from_dict({"hosts": "a:1", "ssh": {"options": ["-o", "ConnectTimeout=5"]}}, "x")
    assert c.extra["ssh_options"] == ["-o", "ConnectTimeout=5"]
    assert load_profile("example").extra["ssh_options"] == ["-o", "ConnectTimeout=10"]


AGREEMENT_CASES = [
    {"hosts": "a:1"},
    {"hosts": ["a:1", {"name": "b", "slots": 2, "gpus": 0, "ssh_port": 2222}]},
    {"hosts": [{"name": "a", "gpus": "two"}]},
    {"hosts": [{"name": "a", "slots": True}]},
    {"hosts": [{"name": "a", "ssh_port": 70000}]},
    {"hosts": [{"name": ""}]},
    {"hosts": []},
    {"hosts": 3},
    {"hosts": [{"slots": 2}]},
    {"hosts": "a:1", "ssh": {"user": "u", "port": 22, "options": ["-v"]}},
    {"hosts": "a:1", "ssh": {"options": "-v -i k"}},
    {"hosts": "a:1", "ssh": {"options": [1]}},
    {"hosts": "a:1", "hostz": 1},
    {"emulated": {"hosts": 2, "cpu": 0.4, "link": {"bandwidth": "1gbit"}, "sshd": True}},
    {"emulated": {"hosts": 2, "cpu": 0}},
    {"emulated": {"hosts": 2, "cpu": "lots"}},
    {"emulated": {"cpu": 0.4}},
    {"emulated": {"hosts": 2, "nic": "x"}},
]


@pytest.mark.parametrize("data", AGREEMENT_CASES, ids=lambda d: str(d)[:50])
def test_profile_check_agrees_with_jsonschema(data) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from lab.cluster.profile_schema import PROFILE_SCHEMA, check

    reference = jsonschema.Draft202012Validator(PROFILE_SCHEMA)
    assert (check(data, PROFILE_SCHEMA) == []) == reference.is_valid(data)


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ({"name": "node1;touch /tmp/x"}, "hosts[0].name"),
        ({"name": "-oProxyCommand=sh"}, "hosts[0].name"),
        ({"name": "node 1"}, "hosts[0].name"),
        ({"name": "node1", "address": "10.0.0.1 $(id)"}, "hosts[0].address"),
        ({"name": "node1", "address": "-p1"}, "hosts[0].address"),
    ],
)
def test_profile_host_names_and_addresses_are_checked_as_host_strings(host, key) -> None:
    with pytest.raises(HostSpecError, match=rf"{re.escape(key)} .* is not a host name"):
        cluster_from_dict({"hosts": [host]}, "p")


def test_host_strings_may_not_start_with_a_dash() -> None:
    with pytest.raises(HostSpecError, match="is not 'name:slots'"):
        parse_hosts("-oProxyCommand=x:1")


def test_an_emulation_record_with_dot_dot_in_a_cgroup_is_not_ours() -> None:
    from lab.cluster.emulation.state import Record, cgroup_dir

    base = f"/sys/fs/cgroup/{cgroup_dir('abc123')}"
    ok = Record(tag="abc123", subnet="10.9.0.0/24", cgroups=[f"{base}/h1", base])
    assert ok.names_are_ours()
    escaped = Record(tag="abc123", subnet="10.9.0.0/24", cgroups=[f"{base}/../../user.slice"])
    assert not escaped.names_are_ours()
    relative = Record(tag="abc123", subnet="10.9.0.0/24", cgroups=[f"x/{cgroup_dir('abc123')}"])
    assert not relative.names_are_ours()
