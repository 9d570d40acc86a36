"""What a cluster profile (``env/clusters/*.yaml``) may say, as a JSON Schema.

A typo in a profile (``gpus: two``, ``hostz:``, ``port: "22x"``) must stop before launch
with the file and the key, not surface as a bare ``ValueError`` from ``int()`` deep in the
inventory (DESIGN.md, contract 4). One declarative schema lists every key, its type and
range, nested ones included. It is checked by the small ``check`` below rather than by
the jsonschema package: the inventory stays free of third-party imports (it is loaded
by plain system Pythons too, e.g. the emulation's unprivileged checks), the schema uses
a dozen keywords, and the messages name keys as a profile's author writes them
(``hosts[0].gpus``). Tests check that ``check`` agrees with jsonschema on every case.
The emulated section's values (rates, latencies) are parsed and checked in
lab.cluster.emulation.spec; here only its keys and types.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lab.errors import HostSpecError

_STR = {"type": "string", "minLength": 1}
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_COUNT = {"type": "integer", "minimum": 1}

HOST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": _STR,
        "slots": _COUNT,
        "gpus": {"type": "integer", "minimum": 0},
        "address": _STR,
        "ssh_port": _PORT,
        "ssh_user": _STR,
        "python": _STR,
        "workdir": _STR,  # where this host's ranks start (as the profile's workdir)
        "device_type": _STR,  # a name from the profile's device_types
    },
}

PROFILE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": _STR,
        "description": {"type": "string"},
        "python": _STR,
        # where ranks start on the SSH hosts; without it, the launching directory's path
        # there (mpirun's rule). Ranks on this machine and emulated hosts always start in
        # the launching directory (lab.cluster.launching.placed_in)
        "workdir": _STR,
        "device_types": {"type": "object"},  # checked in detail by lab.cluster.device_types
        "host_device_types": {"type": "object"},
        "ssh": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "user": _STR,
                "port": _PORT,
                "options": {"type": ["array", "string"], "items": {"type": "string"}},
                "insecure_host_keys": {"type": "boolean"},  # lab.cluster.host_keys
            },
        },
        # "node1:4,node2:4", or a list of such strings and host mappings
        "hosts": {
            "type": ["string", "array"],
            "minItems": 1,
            "items": {"type": ["string", "object"], "if": {"type": "object"}, "then": HOST_SCHEMA},
        },
        "emulated": {
            "type": "object",
            "required": ["hosts"],
            "additionalProperties": False,
            "properties": {
                "hosts": _COUNT,
                "slots": _COUNT,
                # GPUs each host declares (a rehearsal: lab.cluster.emulation.lifecycle)
                "gpus": {"type": "integer", "minimum": 0},
                "cpu": {"type": "number", "exclusiveMinimum": 0},
                "link": {"type": "object"},
                "overrides": {"type": "object"},
                "subnet": _STR,
                "sshd": {"type": "boolean"},
                "fair": {"type": ["boolean", "object"]},  # lab.cluster.emulation.fair
                "startup": _STR,  # lab.cluster.emulation.startup
            },
        },
        # hosts come from a Slurm allocation (lab.cluster.slurm.allocation)
        "slurm": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "partition": _STR,
                "account": _STR,
                "time": _STR,  # Slurm's --time, e.g. "00:30:00"
                "nodes": _COUNT,
                "tasks_per_node": _COUNT,
                "gpus_per_node": {"type": "integer", "minimum": 0},
                "gres": _STR,  # e.g. "gpu:4"
                "options": {"type": "array", "items": {"type": "string"}},  # more salloc flags
                "wait": _COUNT,  # seconds a run waits for nodes before it is refused
            },
        },
    },
}


def check_profile(data: Any, where: str) -> None:
    """Raise HostSpecError naming ``where`` and every offending key; None when valid.

    The error has ``profile`` (``where``) and ``keys`` (the offending keys as
    ``hosts[0].gpus``) for callers that want them.
    """
    if not isinstance(data, dict):
        _fail(where, [("", "expected a mapping of keys (name, hosts, ...) at top level")])
    kinds = [k for k in ("hosts", "emulated", "slurm") if k in data]
    if not kinds:
        _fail(where, [("hosts", "'hosts' (or 'emulated', or 'slurm') is required")])
    if len(kinds) > 1:
        _fail(where, [(kinds[1], f"give only one of {', '.join(kinds)}")])
    problems = check(data, PROFILE_SCHEMA)
    if problems:
        _fail(where, problems)


def check(value: Any, schema: dict[str, Any], path: tuple[Any, ...] = ()) -> list[tuple[str, str]]:
    """(key, what is wrong) for every place ``value`` breaks ``schema``.

    Understands the JSON Schema keywords the profile schema uses (type, properties,
    additionalProperties: false, required, items, minItems, minLength, minimum, maximum,
    exclusiveMinimum, if/then on a type), with JSON Schema's meaning (tests compare it
    with jsonschema where that is installed); anything else in a schema is an error.
    """
    unknown = set(schema) - _KEYWORDS
    if unknown:
        raise ValueError(f"schema keywords {sorted(unknown)} are not understood here")
    key = key_path(path)
    wanted = schema.get("type")
    if wanted is not None:
        kinds = wanted if isinstance(wanted, list) else [wanted]
        if not any(_is(value, k) for k in kinds):
            return [(key, f"{value!r} is not {' or '.join(_article(k) for k in kinds)}")]
    out: list[tuple[str, str]] = []
    if "if" in schema and not check(value, schema["if"], path):
        out += check(value, schema["then"], path)
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        out.append((key, f"{value!r} is too short"))
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            out.append((key, f"{value!r} is less than the minimum of {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            out.append((key, f"{value!r} is more than the maximum of {schema['maximum']}"))
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append((key, f"{value!r} must be more than {schema['exclusiveMinimum']}"))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append((key, f"{value!r} should be non-empty"))
        for i, item in enumerate(value):
            out += check(item, schema.get("items", {}), (*path, i))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                out.append((key, f"needs a {name!r}"))
        extra = sorted(str(k) for k in value if k not in props)
        if extra and schema.get("additionalProperties") is False:
            where = key_path((*path, extra[0])) if len(extra) == 1 else key
            out.append((where, f"unknown keys {extra}; allowed: {sorted(props)}"))
        for name, sub in props.items():
            if name in value:
                out += check(value[name], sub, (*path, name))
    return out


_KEYWORDS = {
    "$schema", "type", "properties", "additionalProperties", "required", "items",
    "minItems", "minLength", "minimum", "maximum", "exclusiveMinimum", "if", "then",
}  # fmt: skip


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    types = {
        "string": str, "integer": int, "number": (int, float), "boolean": bool,
        "array": list, "object": dict,
    }  # fmt: skip
    return isinstance(value, types[kind])


def _fail(where: str, problems: list[tuple[str, str]]) -> None:
    lines = [f"{key}: {what}" if key else what for key, what in problems]
    err = HostSpecError(f"cluster profile {where}: " + "; ".join(lines))
    err.profile = where  # type: ignore[attr-defined]
    err.keys = [key for key, _ in problems]  # type: ignore[attr-defined]
    raise err


def key_path(parts: Iterable[Any]) -> str:
    """``["hosts", 0, "gpus"]`` -> ``hosts[0].gpus``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _article(kind: str) -> str:
    words = {"integer": "a whole number", "number": "a number", "boolean": "true or false"}
    return words.get(kind, f"a {kind}" if kind[0] not in "aeiou" else f"an {kind}")
