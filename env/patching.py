"""The rule loop distlab's patches of installed packages share (env/*-patches/apply.py).

A rule is (why, glob of files under the package, regex, replacement, text present once
applied). A rule that matches nothing in a tree it has not already patched fails, so a
changed upstream is noticed instead of half-patched; applying twice changes nothing.
Standard library only: it runs before the virtual environment has anything else.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

Rule = tuple[str, str, str, str, str]


def package_dir(name: str) -> Path:
    """The installed package ``name`` of this interpreter, found without importing it
    (importing can be what fails before the patch)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{name} is not installed in this Python")
    return Path(spec.origin).parent


def apply(root: Path, rules: tuple[Rule, ...]) -> list[str]:
    """Apply every rule under ``root``; one line per rule; raise if one matches nothing."""
    done = []
    for why, pattern, regex, replacement, applied in rules:
        total = already = 0
        for path in sorted(root.glob(pattern)):
            text = path.read_text()
            new, n = re.subn(regex, replacement, text)
            if n:
                path.write_text(new)
                total += n
            already += text.count(applied)
        if total == 0 and already == 0:
            raise SystemExit(f"patch rule matched nothing ({pattern}: {regex!r}): {why}")
        state = f"{total:3d} x" if total else "  (applied)"
        done.append(f"{state} {pattern}: {why[:80]}...")
    return done


def main(package: str, rules: tuple[Rule, ...]) -> None:
    """``apply.py [PACKAGE_DIR]``: patch that directory, or this Python's ``package``."""
    if len(sys.argv) > 2:
        raise SystemExit(f"usage: apply.py [{package.upper()}_PACKAGE_DIR]")
    target = Path(sys.argv[1]) if len(sys.argv) == 2 else package_dir(package)
    for line in apply(target, rules):
        print(line)
