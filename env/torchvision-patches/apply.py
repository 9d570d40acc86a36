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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from patching import main  # noqa: E402  (env/patching.py: the shared rule loop)

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


if __name__ == "__main__":
    main("torchvision", RULES)
