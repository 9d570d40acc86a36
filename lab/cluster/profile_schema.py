"""What a cluster profile (``env/clusters/*.yaml``) may say, as a JSON Schema.

A typo in a profile (``gpus: two``, ``hostz:``, ``port: "22x"``) must stop before launch
with the file and the key, not surface as a bare ``ValueError`` from ``int()`` deep in the
inventory (DESIGN.md, contract 4). The schema is checked with ``jsonschema`` (already in
the lab's environment through nbformat; pinned in requirements.txt): one declarative
place lists every key, its type and range, nested ones included, and its errors carry
the path of the offending key, which a hand-written check would have to thread through
every level. The emulated section's values (rates, latencies) are parsed and checked in
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
        "workdir": _STR,
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
        "workdir": _STR,
        "ssh": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "user": _STR,
                "port": _PORT,
                "options": {"type": ["array", "string"], "items": {"type": "string"}},
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
                "cpu": {"type": "number", "exclusiveMinimum": 0},
                "link": {"type": "object"},
                "overrides": {"type": "object"},
                "subnet": _STR,
                "sshd": {"type": "boolean"},
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
    if "hosts" not in data and "emulated" not in data:
        _fail(where, [("hosts", "'hosts' (or 'emulated') is required")])
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(PROFILE_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.path])
    if errors:
        _fail(where, [_describe(e) for e in errors])


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


def _describe(error: Any) -> tuple[str, str]:
    """(the key, what is wrong with it) in the words a profile's author uses."""
    path = list(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(schema.get("properties", {})))
        allowed = sorted(schema.get("properties", {}))
        return key_path([*path, extra[0]]) if len(extra) == 1 else key_path(path), (
            f"unknown keys {extra}; allowed: {allowed}"
        )
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return key_path(path), f"needs a {missing[0]!r}"
    if error.validator == "type":
        wanted = error.validator_value
        wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
        return key_path(path), f"{error.instance!r} is not {_article(wanted)}"
    return key_path(path), error.message


def _article(kind: str) -> str:
    words = {"integer": "a whole number", "number": "a number", "boolean": "true or false"}
    return words.get(kind, f"a {kind}" if kind[0] not in "aeiou" else f"an {kind}")
