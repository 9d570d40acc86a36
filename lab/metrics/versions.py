"""Results written once, each under its own name, and a relative link naming the latest.

A verdict, a figure, an executed notebook or a summary written again must not replace the
one before it (DESIGN.md, contract 2): each goes to ``<folder>/<stem>/<version><suffix>``,
a version being ``<YYYYmmdd-HHMMSS>-<6 hex>`` like a run's id, and ``<folder>/<stem><suffix>``
becomes a *relative* symbolic link to it, swapped atomically. Whatever reads the latest
reads it by the path it always had, and the results folder can be moved or copied whole.

A plain file found where a link goes (written before results were kept by version) is moved
into the history as ``legacy<suffix>`` first, never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

LEGACY = "legacy"  # the version name of a file written before results were kept by version
LOCK = ".lock"


def new_version(epoch: float | None = None) -> str:
    """A fresh version name, ``<YYYYmmdd-HHMMSS>-<6 hex>`` (local time): sorts by time, and
    two written in the same second differ."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(epoch))}-{secrets.token_hex(3)}"


def version_path(latest: Path, version: str, stem: str | None = None) -> Path:
    """Where ``version`` of the file whose latest is ``latest`` is kept.

    Args:
        latest: the path readers use (``figures/kungfu/smoke/fig_8.plotly.json``).
        version: from ``new_version``.
        stem: the part of its name before the suffix (``fig_8``); default ``latest.stem``.
    """
    stem = latest.stem if stem is None else stem
    if not latest.name.startswith(stem):
        raise ValueError(f"{latest.name!r} does not start with {stem!r}")
    return latest.parent / stem / f"{version}{latest.name[len(stem) :]}"


def resolved(path: Path) -> Path:
    """The file a latest link points at (``path`` itself when it is no link), without
    making it absolute: a page that links to it keeps working when results/ moves."""
    if not path.is_symlink():
        return path
    return Path(os.path.normpath(path.parent / os.readlink(path)))


def write_new(files: Mapping[Path, str | bytes]) -> None:
    """Write every file or none, never replacing one that exists.

    Each is written in full under a temporary name beside it, then hard-linked to its name
    (which fails if that name is taken); when any step fails, what was written is removed.
    """
    staged: list[Path] = []
    placed: list[Path] = []
    try:
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append(Path(tmp))
            with os.fdopen(fd, "wb") as out:
                out.write(content.encode("utf-8") if isinstance(content, str) else content)
        for tmp, path in zip(staged, files, strict=True):
            os.link(tmp, path)
            placed.append(path)
    except BaseException:
        for path in placed:
            path.unlink(missing_ok=True)
        raise
    finally:
        for tmp in staged:
            tmp.unlink(missing_ok=True)


def point(links: Mapping[Path, Path]) -> None:
    """Make each latest path a relative link to its version, one after another in order.

    Readers trust the last link (a verdict after its figure), so swaps that end with the
    same link are serialised by a lock in that link's history folder: two writers of one
    figure leave one writer's files linked, not a mixture.
    """
    if not links:
        return
    last = list(links.values())[-1]
    with _locked(last.parent / LOCK):
        for latest, target in links.items():
            _swap(latest, target)


def save_version(
    files: Mapping[Path, str | bytes], stem: str | None = None, version: str | None = None
) -> dict[Path, Path]:
    """Write ``files`` (keyed by their latest paths) as one new version, all or none, then
    link each latest path to it in order; return each latest path's version file."""
    for _ in range(100):
        chosen = version or new_version()
        kept = {latest: version_path(latest, chosen, stem) for latest in files}
        try:
            write_new({kept[latest]: content for latest, content in files.items()})
        except FileExistsError:
            if version:
                raise
            continue
        point(kept)
        return kept
    raise OSError(f"no free version name for {list(files)}")


def keep_plain(latest: Path, stem: str | None = None) -> Path | None:
    """Move a plain file at ``latest`` into its history as ``legacy<suffix>`` (or, when that
    is taken, ``legacy-<version>``); return where it went (None for a link or nothing)."""
    if latest.is_symlink() or not latest.is_file():
        return None
    for name in (LEGACY, *(f"{LEGACY}-{new_version()}" for _ in range(100))):
        kept = version_path(latest, name, stem)
        kept.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(latest, kept)
        except FileExistsError:
            continue
        latest.unlink()
        return kept
    raise OSError(f"no free name in the history of {latest}")


def _swap(latest: Path, target: Path) -> None:
    stem = target.parent.name
    keep_plain(latest, stem if latest.name.startswith(stem) else None)
    latest.parent.mkdir(parents=True, exist_ok=True)
    tmp = latest.with_name(f".{latest.name}.{secrets.token_hex(4)}.link")
    os.symlink(os.path.relpath(target, latest.parent), tmp)
    try:
        os.replace(tmp, latest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
