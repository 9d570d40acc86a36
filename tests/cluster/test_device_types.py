"""Device types in cluster profiles: hosts carry them, ranks inherit them, typos fail."""

from __future__ import annotations

import pytest

from lab.cluster.inventory import DeviceType, allocate, cluster_from_dict, load_profile
from lab.errors import HostSpecError, ParameterError

TYPES = {"fast": {"threads": 2}, "slow": {"threads": 1, "isa": "avx2", "cpu": 0.3}}


def test_hosts_carry_their_device_type_and_ranks_inherit_it() -> None:
    data = {
        "device_types": TYPES,
        "hosts": [
            {"name": "n1", "slots": 1, "device_type": "fast"},
            {"name": "n2", "slots": 2, "device_type": "slow"},
        ],
    }
    cluster = cluster_from_dict(data, "x")
    assert [s.host.device_type for s in allocate(cluster, 3)] == ["fast", "slow", "slow"]
    assert cluster.device_type("slow") == DeviceType("slow", 1, "avx2", 0.3)
    with pytest.raises(ParameterError) as err:
        cluster.device_type("v100")
    assert err.value.name == "device_type"


def test_emulated_hosts_get_their_type_and_its_cpu_share() -> None:
    data = {
        "device_types": TYPES,
        "emulated": {"hosts": 3, "cpu": 0.5, "overrides": {"h3": {"cpu": 0.2}}},
        "host_device_types": {"h1": "fast", "h2": "slow", "h3": "slow"},
    }
    cluster = cluster_from_dict(data, "x")
    assert [h.device_type for h in cluster.hosts] == ["fast", "slow", "slow"]
    # the type's share fills in where the profile names none; an explicit override wins
    assert cluster.emulated["overrides"] == {"h2": {"cpu": 0.3}, "h3": {"cpu": 0.2}}


@pytest.mark.parametrize(
    "data",
    [
        {"hosts": [{"name": "n1", "device_type": "fast"}]},  # no device_types at all
        {"device_types": TYPES, "hosts": [{"name": "n1", "device_type": "gpu"}]},
        {"device_types": TYPES, "hosts": "n1:2", "host_device_types": {"n9": "fast"}},
        {"device_types": {"x": {"isa": "neon"}}, "hosts": "n1:2"},
        {"device_types": {"x": {"threads": 0}}, "hosts": "n1:2"},
        {"device_types": {"x": {"gpus": 1}}, "hosts": "n1:2"},
    ],
)
def test_bad_device_types_fail_when_the_profile_loads(data: dict) -> None:
    with pytest.raises(HostSpecError):
        cluster_from_dict(data, "x")


def test_the_easyscale_profile_has_two_device_types() -> None:
    cluster = load_profile("easyscale-local")
    assert {dt.name for dt in cluster.device_types} == {"fast", "slow"}
    assert cluster.is_local
