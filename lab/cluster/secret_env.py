"""Secret environment values: they reach ranks, never a file the lab writes or a command line.

A variable is secret when the user declares it (``LaunchRequest.secret_env``, ``--secret``,
``$DISTLAB_SECRET_ENV``: names, comma-separated) or its name matches one of
``SECRET_PATTERNS`` (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*KEY*``, any case). Its
value is recorded as ``<secret>`` (``redact``: the manifest's ``env``, ``launched_by.argv``,
``processes[].env``, ``argv`` and ``started_argv``), passed to local processes and mpirun
through their environment (mpirun forwards it by name: ``-x NAME``), and to remote ranks
over the SSH channel (the guards' ``--send-env`` / ``--stdin-env``), not on the ssh command
line. Environments are private to their user; command lines are not (``ps``,
``/proc/PID/cmdline``).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_PATTERNS = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*KEY*")
SECRET_ENV_VAR = "DISTLAB_SECRET_ENV"
REDACTED = "<secret>"
MIN_SEARCHED = 4  # shorter values are redacted where named (NAME=value), not searched for


def declared(names: Iterable[str] = ()) -> frozenset[str]:
    """The names declared secret: ``names`` and those in ``$DISTLAB_SECRET_ENV``."""
    from_env = os.environ.get(SECRET_ENV_VAR, "").replace(",", " ").split()
    return frozenset([*names, *from_env])


def is_secret(name: str, names: Iterable[str] = ()) -> bool:
    """Whether variable ``name`` is secret: declared in ``names`` or matching a pattern."""
    upper = name.upper()
    return name in names or any(fnmatch.fnmatchcase(upper, p) for p in SECRET_PATTERNS)


def secrets_of(env: Mapping[str, str], names: Iterable[str] = ()) -> dict[str, str]:
    """The secret variables of ``env`` (declared ``names`` or matching a pattern)."""
    names = frozenset(names)
    return {k: str(v) for k, v in env.items() if is_secret(k, names)}


def redact(value: Any, secrets: Mapping[str, str]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every secret's value replaced by
    ``<secret>``: under its name as a key, after ``NAME=`` in a string, after ``NAME`` in an
    argv (``-genv NAME value``), and anywhere in a string when it is at least MIN_SEARCHED
    characters long."""
    if not secrets:
        return value
    if isinstance(value, Mapping):
        return {k: REDACTED if k in secrets else redact(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = [redact(v, secrets) for v in value]
        for i in range(1, len(value)):
            name = value[i - 1]
            if isinstance(name, str) and name in secrets and value[i] == secrets[name]:
                out[i] = REDACTED
        return out if isinstance(value, list) else tuple(out)
    if isinstance(value, str):
        for name, secret in secrets.items():
            if secret:
                value = value.replace(f"{name}={secret}", f"{name}={REDACTED}")
            if len(secret) >= MIN_SEARCHED:
                value = value.replace(secret, REDACTED)
        return value
    return value


__all__ = ["REDACTED", "SECRET_PATTERNS", "declared", "is_secret", "redact", "secrets_of"]
