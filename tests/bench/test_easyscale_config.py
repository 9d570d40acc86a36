"""EasyScale stage flags: what is refused before any process starts (pure, no torch)."""

from __future__ import annotations

import sys

import pytest

from lab.bench.easyscale.config import Config, DeviceSpec, parse_device, parse_level
from lab.bench.easyscale.determinism import D2_ENV, apply_env, process_env
from lab.errors import ParameterError


def test_even_and_explicit_placements() -> None:
    assert Config(ests=4, processes=2).counts() == (2, 2)
    cfg = Config(ests=4, processes=3, placement="2,1,1").checked()
    assert [list(cfg.ests_of(r)) for r in range(3)] == [[0, 1], [2], [3]]


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"ests": 2, "processes": 4}, "np"),  # more processes than ESTs
        ({"ests": 4, "processes": 3}, "ests"),  # an even split that does not divide
        ({"ests": 4, "processes": 3, "placement": "2,2"}, "placement"),
        ({"ests": 4, "processes": 3, "placement": "2,1,2"}, "placement"),
        ({"ests": 4, "processes": 2, "placement": "4,0"}, "placement"),
        ({"level": "D3"}, "level"),
        ({"system": "horovod"}, "system"),
        ({"system": "ddp", "ests": 4, "processes": 2}, "ests"),
        ({"ests": 4, "processes": 2, "devices": (DeviceSpec(),) * 3}, "devices"),
        ({"dataset_size": 16, "ests": 4, "batch_size": 8}, "dataset_size"),
    ],
)
def test_bad_stage_is_refused(fields: dict, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        Config(**fields).checked()
    assert err.value.name == name


def test_levels_and_devices_parse() -> None:
    assert parse_level("d1+d2") == (True, True)
    assert parse_level("D2") == (False, True)
    assert parse_device("slow:1:AVX2") == DeviceSpec("slow", 1, "avx2")
    for bad in ("slow", "slow:0:avx2", "slow:1:neon", ":1:avx2"):
        with pytest.raises(ParameterError):
            parse_device(bad)


def test_d2_makes_every_device_type_the_same_process() -> None:
    fast, slow = DeviceSpec("fast", 2, "native"), DeviceSpec("slow", 1, "avx2")
    assert process_env(fast, d2=False) != process_env(slow, d2=False)
    assert process_env(fast, d2=True) == process_env(slow, d2=True)
    assert D2_ENV.items() <= process_env(fast, d2=True).items()


def test_device_settings_refuse_a_process_that_already_loaded_torch(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", object())
    with pytest.raises(RuntimeError, match="before torch"):
        apply_env({"OMP_NUM_THREADS": "1"})


def test_argv_round_trips_through_the_rank_parser() -> None:
    """The rank reads its process count from WORLD_SIZE: no flag carries it."""
    cfg = Config(ests=4, processes=3, placement="2,1,1", level="D1+D2", digest=True, steps=7)
    cfg = cfg.with_(devices=(parse_device("a:2:native"), *[parse_device("b:1:avx2")] * 2))
    argv = cfg.to_argv()
    assert argv[argv.index("--devices") + 1] == "a:2:native,b:1:avx2,b:1:avx2"
    assert not any("processes" in a for a in argv)
    assert Config.from_argv(argv, {"WORLD_SIZE": "3"}) == cfg.checked()
    with pytest.raises(ParameterError) as err:  # three counts, but one process
        Config.from_argv(argv)
    assert err.value.name == "--placement"


@pytest.mark.parametrize(
    ("values", "name", "allowed"),
    [
        ({"devices": "fast:2:native,slow:0:avx2"}, "devices", "THREADS >= 1"),
        ({"devices": ["fast:2:native", "slow"]}, "devices", "NAME:THREADS:ISA"),
        ({"steps": "five"}, "steps", "an integer"),
        ({"level": "D3"}, "level", "D1+D2"),
        ({"processes": 2, "devices": "a:1:native,b:1:native,c:1:native"}, "devices", "np=2"),
    ],
)
def test_the_lab_hears_the_field(values: dict, name: str, allowed: str) -> None:
    with pytest.raises(ParameterError) as err:
        Config.from_values(values)
    assert err.value.name == name and allowed in err.value.allowed


def test_a_stage_command_is_checked_with_the_launch_world_size() -> None:
    """lab.bench.flags parses an EasyScale command as its ranks will, WORLD_SIZE = np."""
    from lab.bench.flags import check_argv, parse_command, ranks_env

    cmd = Config.from_values({"processes": 3, "placement": "2,1,1"}).command(sys.executable)
    assert parse_command(cmd, ranks_env(3)) == Config(processes=3, placement="2,1,1")
    with pytest.raises(ParameterError) as err:
        check_argv(cmd, ranks_env(2))
    assert err.value.name == "--placement"
    with pytest.raises(ParameterError) as err:
        check_argv([*cmd, "--devices", "fast:two:native"], ranks_env(3))
    assert err.value.name == "--devices"
