"""A workload's parameters as one frozen, typed dataclass (DESIGN.md, "A point's way down").

A rank parses its command line with ``Config.from_argv``; the lab builds the same config
from a point with ``Config.from_values`` and writes the rank's flags with ``to_argv``.
Both ways end in the config's own ``checked()``, the one place its values are checked, so
a bad value is refused before any process starts, naming the field (``batch_size``) to
the lab and the flag (``--batch-size``) to a person at a shell. The flags are made from
the fields (name, type, default, help), so a field and its flag cannot drift apart. A
field the launch sets rather than a flag (``given``: a process count from WORLD_SIZE) is
read from the rank's environment, and from the environment the launch will give when the
lab checks a command.

Only the standard library and ``lab.errors`` are imported here: the check runs in the
lab's process, and in ranks of other interpreters (the MXNet venv), before any engine.
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
import os
import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from lab.errors import ParameterError

C = TypeVar("C", bound="WorkloadConfig")


def flag(default: Any, help: str = "") -> Any:
    """A config field with the help text its command-line flag shows."""
    return dataclasses.field(default=default, metadata={"help": help})


def given(default: Any, env: str, help: str = "") -> Any:
    """A config field that is no flag: the launch sets it through the environment
    variable ``env`` (e.g. the ranks' number, WORLD_SIZE), and ``from_argv`` reads it from
    the environment it is handed; the lab sets it by name (``from_values``)."""
    return dataclasses.field(default=default, metadata={"help": help, "env": env})


@typing.runtime_checkable
class Textual(typing.Protocol):
    """An item of a tuple field other than an int (e.g. a device type ``fast:2:native``):
    written with ``text()``, read back with the class's ``from_text``, which raises
    ParameterError (its ``allowed`` says what the text may be)."""

    def text(self) -> str: ...


def field_of(name: str) -> str:
    """``--batch-size`` or ``batch-size`` -> ``batch_size``."""
    return name.lstrip("-").replace("-", "_")


def flag_of(name: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises ParameterError where argparse would print and exit
    (an unknown or ambiguous flag, a flag without its value): the lab calls it in its own
    process, where exiting is not an answer."""

    def error(self, message: str) -> typing.NoReturn:
        raise ParameterError("flags", message, f"the flags of {self.prog} (see --help)")


@dataclasses.dataclass(frozen=True)
class WorkloadConfig:
    """Base of every workload's config: a frozen dataclass whose fields are its flags.

    A subclass sets ``MODULE`` (what ``python -m`` runs) and ``DESCRIPTION``, declares
    its fields with defaults (``flag(default, help)``), and overrides ``checked()``.
    Field types are ``int``, ``float``, ``str``, ``bool``, ``tuple[int, ...]``, a tuple of
    a ``Textual`` type (``tuple[DeviceSpec, ...]``), or one of these ``| None``. A field
    the launch sets (``given``) has no flag and is read from the environment.
    """

    MODULE: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""

    def checked(self: C) -> C:
        """This config with its names resolved (e.g. a model's canonical name), after every
        check; ParameterError naming the first bad field. Subclasses extend it."""
        return self

    # -- the rank's way: argv ------------------------------------------------------

    @classmethod
    def parser(cls) -> argparse.ArgumentParser:
        """The command line, one flag per field (``--help`` lists them with defaults)."""
        p = _Parser(  # exit_on_error False: an ArgumentError reaches from_argv, which names it
            prog=f"python -m {cls.MODULE}", description=cls.DESCRIPTION, exit_on_error=False
        )
        for f in dataclasses.fields(cls):
            if "env" in f.metadata:
                continue  # the launch sets it: no flag
            kind = _kinds(cls)[f.name]
            text, default = f.metadata.get("help", ""), _text(f.default)
            shown = f"{text} (default: {default})" if text else f"default: {default}"
            if kind.name == "bool":
                action: Any = argparse.BooleanOptionalAction
                p.add_argument(
                    flag_of(f.name), action=action, default=argparse.SUPPRESS, help=shown
                )
            else:
                p.add_argument(flag_of(f.name), default=argparse.SUPPRESS, help=shown)
        return p

    @classmethod
    def from_argv(cls: type[C], argv: Sequence[str], env: Mapping[str, str] | None = None) -> C:
        """The checked config of a rank's flags (what follows ``python -m MODULE``), its
        ``given`` fields read from ``env`` (the rank's environment, or the one the launch
        will give it; their defaults where a variable is missing or ``env`` is None).

        Raises:
            ParameterError: naming the flag (``--batch-size``), or the variable of a given
                field, and what it allows.
        """
        try:
            ns, extra = cls.parser().parse_known_args(list(argv))
        except argparse.ArgumentError as exc:
            raise ParameterError(exc.argument_name or "flags", None, exc.message) from None
        if extra:
            raise ParameterError("flags", " ".join(extra), f"the flags of python -m {cls.MODULE}")
        variables = _variables(cls)
        values = {n: env[v] for n, v in variables.items() if env is not None and v in env}
        return cls._build({**values, **vars(ns)}, lambda n: variables.get(n) or flag_of(n))

    @classmethod
    def main_config(cls: type[C], argv: Sequence[str] | None = None) -> C:
        """``from_argv`` for a rank's ``main``, in the rank's environment: a bad flag
        prints the usage and what is allowed on stderr and exits with 2, as argparse does."""
        argv = sys.argv[1:] if argv is None else argv
        try:
            return cls.from_argv(argv, os.environ)
        except ParameterError as exc:
            cls.usage_error(str(exc))

    @classmethod
    def usage_error(cls, message: str) -> typing.NoReturn:
        """In a rank: print the usage and ``message`` on stderr and exit with 2 (for what
        only the rank can see, e.g. that no GPU is visible)."""
        parser = cls.parser()
        parser.print_usage(sys.stderr)
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    def to_argv(self) -> list[str]:
        """The flags that give this config back through ``from_argv``: every field, the
        workload's own first (``--backend``), then those it shares with others; a field
        left unset (None or "") is left out, so no empty argument crosses a launcher or a
        shell, a bool is written only where it differs from its default, and a ``given``
        field not at all (the launch sets it)."""
        out: list[str] = []
        kinds = _kinds(type(self))
        fields = {f.name: f for f in dataclasses.fields(self)}
        for name in _own_first(type(self)):
            f, value = fields[name], getattr(self, name)
            if "env" in f.metadata:
                continue
            if kinds[f.name].name == "bool":
                if value != f.default:
                    out.append(flag_of(f.name) if value else "--no-" + f.name.replace("_", "-"))
            elif value is None or value == "":
                continue
            else:
                out += [flag_of(f.name), _text(value)]
        return out

    def command(self, python: str = "python") -> list[str]:
        """The rank's command line: ``python -m MODULE`` and ``to_argv()`` (a bare
        ``python`` is resolved by the launch, for the cluster's hosts)."""
        return [python, "-m", self.MODULE, *self.to_argv()]

    # -- the lab's way: values (a point) --------------------------------------------

    @classmethod
    def from_values(cls: type[C], values: Mapping[str, Any]) -> C:
        """The checked config of settings by field name (a point's, a notebook's).

        Raises:
            ParameterError: naming the field (``batch_size``): an unknown one, a value of
                the wrong type, or one ``checked()`` refuses.
        """
        return cls._build(values, lambda name: name)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def _build(cls: type[C], values: Mapping[str, Any], spell: Any) -> C:
        """Convert, construct and check; a ParameterError names the field as ``spell``
        writes it."""
        kinds = _kinds(cls)
        unknown = sorted(set(values) - set(kinds))
        if unknown:
            allowed = f"settings of python -m {cls.MODULE}: {', '.join(kinds)}"
            raise ParameterError(spell(unknown[0]), values[unknown[0]], allowed)
        try:
            typed = {k: _convert(k, kinds[k], v) for k, v in values.items()}
            return cls(**typed).checked()
        except ParameterError as exc:
            name = field_of(exc.name)
            if name not in kinds:
                raise
            raise ParameterError(spell(name), exc.value, exc.allowed) from None


def _own_first(cls: type) -> list[str]:
    """The field names, those a subclass declares before those it inherits."""
    names = set(cls.field_names())
    out: list[str] = []
    for klass in cls.__mro__:
        for name in vars(klass).get("__annotations__", {}):
            if name in names and name not in out:
                out.append(name)
    return out


@dataclasses.dataclass(frozen=True)
class _Kind:
    """A field's type as its flag carries it: ``int``, ``float``, ``str``, ``bool`` or
    ``tuple`` (of ``item``: int or a Textual type), ``optional`` where None is allowed."""

    name: str
    optional: bool = False
    item: type | None = None


_KINDS: dict[type, dict[str, _Kind]] = {}
_ALLOWED = {"int": "an integer", "float": "a number", "bool": "true or false"}


def _kinds(cls: type) -> dict[str, _Kind]:
    """Field name -> its kind; TypeError for a field no flag can carry."""
    if cls not in _KINDS:
        hints = typing.get_type_hints(cls)
        out = {}
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            optional = type(None) in typing.get_args(hint)
            base = args[0] if optional and len(args) == 1 else hint
            item = None
            if typing.get_origin(base) is tuple:
                name, item = "tuple", typing.get_args(base)[0]
                if item is not int and not hasattr(item, "from_text"):
                    raise TypeError(f"{cls.__name__}.{f.name}: a flag cannot carry {hint}")
            else:
                name = getattr(base, "__name__", str(base))
            if name not in ("int", "float", "str", "bool", "tuple"):
                raise TypeError(f"{cls.__name__}.{f.name}: a flag cannot carry {hint}")
            out[f.name] = _Kind(name, optional, item)
        _KINDS[cls] = out
    return _KINDS[cls]


def _variables(cls: type) -> dict[str, str]:
    """Given field name -> the environment variable the launch sets it with."""
    return {f.name: f.metadata["env"] for f in dataclasses.fields(cls) if "env" in f.metadata}


def _text(value: Any) -> str:
    """A value as its flag writes it: a tuple comma-separated, its items by ``text()``."""
    if isinstance(value, tuple):
        return ",".join(v.text() if isinstance(v, Textual) else str(v) for v in value)
    return str(value)


def _convert(name: str, kind: _Kind, value: Any) -> Any:
    """``value`` as the field's type (a flag's text, or a point's value); ParameterError
    naming ``name`` when it is not one."""
    if kind.optional and (value is None or (isinstance(value, str) and value.lower() == "none")):
        return None
    try:
        if kind.name == "str":
            return value if isinstance(value, str) else str(value)
        if kind.name == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError(value)
        if kind.name == "tuple":
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(_item(kind.item, v) for v in items if str(v).strip())
        return _number(int if kind.name == "int" else float, value)
    except ParameterError as exc:  # an item's own check (from_text)
        raise ParameterError(name, value, f"comma-separated {exc.allowed}") from None
    except (TypeError, ValueError):
        allowed = _ALLOWED.get(kind.name, "comma-separated integers")
        raise ParameterError(name, value, allowed) from None


def _item(item: Any, value: Any) -> Any:
    """One item of a tuple field: an int, or the Textual type's ``from_text``."""
    if item is int:
        return _number(int, value)
    return value if isinstance(value, item) else item.from_text(str(value).strip())


def _number(kind: type, value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(value)
    if kind is int:
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real) and float(value).is_integer():
            return int(value)
        return int(str(value).strip())
    if isinstance(value, numbers.Real):
        return float(value)
    return float(str(value).strip())
