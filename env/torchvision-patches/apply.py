"""distlab's change to the installed torchvision 0.28.0 Python files, for a CPU-only torch.

PyPI's torchvision wheel is the CUDA build: its compiled operators (``torchvision/_C.so``:
``nms``, ``roi_align``, ``deform_conv2d`` ...) link ``libc10_cuda.so`` and
``libtorch_cuda.so``, which the CPU build of torch does not ship, so loading ``_C`` fails
(``torchvision.extension`` catches that and reports ``_has_ops() == False``). torchvision
then still registered fake kernels for ``torchvision::nms`` and ``torchvision::qnms``
unconditionally in ``_meta_registrations.py``, and ``import torchvision`` died with
``RuntimeError: operator torchvision::nms does not exist``. The rule below registers
them only where the operators loaded, as the file's other registrations already do
(``register_meta``). Where ``_C`` loads (a GPU node: CUDA torch and this same torchvision,
env/gpu-node.txt) nothing changes. On a CPU-only torch the classification models
(``torchvision.models``) import and run; the detection operators stay unavailable and
raise torchvision's own "Couldn't load custom C++ ops" when called.

Run as ``python apply.py [TORCHVISION_PACKAGE_DIR]`` after torchvision is installed
(env/setup.sh does). A rule that matches nothing in a tree it has not already patched
fails, so a changed torchvision is noticed instead of half-patched; running it twice
changes nothing. Standard library only.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

# (why, glob of files under torchvision/, regex, replacement, text present once applied)
RULES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "fake kernels for nms/qnms were registered even where torchvision's compiled "
        "operators did not load (CUDA wheel beside CPU torch), and the import failed",
        "_meta_registrations.py",
        r'(?m)^@torch\.library\.register_fake\("(torchvision::\w+)"\)$',
        r'@(torch.library.register_fake("\1") if torchvision.extension._has_ops() '
        r"else lambda fn: fn)  # distlab: only where _C loaded",
        "# distlab: only where _C loaded",
    ),
)


def torchvision_dir() -> Path:
    """The installed ``torchvision`` package of this interpreter, found without importing it
    (importing is what fails before the patch)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise SystemExit("torchvision is not installed in this Python")
    return Path(spec.origin).parent


def apply(root: Path) -> list[str]:
    """Apply every rule under ``root``; one line per rule; raise if one matches nothing."""
    done = []
    for why, pattern, regex, replacement, applied in RULES:
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


if __name__ == "__main__":
    if len(sys.argv) > 2:
        raise SystemExit("usage: apply.py [TORCHVISION_PACKAGE_DIR]")
    target = Path(sys.argv[1]) if len(sys.argv) == 2 else torchvision_dir()
    for line in apply(target):
        print(line)
