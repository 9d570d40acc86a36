"""env/torchvision-patches/apply.py: with PyPI's CUDA torchvision beside the CPU torch,
``torchvision.models`` imports and ResNet-50 runs a forward pass; the patch leaves the
registration alone where the compiled operators load, and a second run changes nothing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
APPLY = REPO / "env" / "torchvision-patches" / "apply.py"

# The lines of torchvision 0.28.0's _meta_registrations.py the rule rewrites
ORIGINAL = """import torchvision.extension


@torch.library.register_fake("torchvision::nms")
def meta_nms(dets, scores, iou_threshold):
    return dets


@torch.library.register_fake("torchvision::qnms")
def meta_qnms(dets, scores, iou_threshold):
    return dets
"""


def _apply(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-B", str(APPLY), str(root)], capture_output=True, text=True, timeout=60
    )


def test_patch_registers_fakes_only_where_the_operators_loaded(tmp_path: Path) -> None:
    root = tmp_path / "torchvision"
    root.mkdir()
    (root / "_meta_registrations.py").write_text(ORIGINAL)
    first = _apply(root)
    assert first.returncode == 0, first.stderr
    text = (root / "_meta_registrations.py").read_text()
    assert text.count("if torchvision.extension._has_ops() else lambda fn: fn") == 2
    assert '@torch.library.register_fake("torchvision::nms")\n' not in text
    second = _apply(root)
    assert second.returncode == 0 and "(applied)" in second.stdout
    assert (root / "_meta_registrations.py").read_text() == text
    for ops, registered in ((True, ["torchvision::nms", "torchvision::qnms"]), (False, [])):
        assert _registered(text, ops) == registered  # unchanged where _C loads (a GPU node)


def _registered(text: str, has_ops: bool) -> list[str]:
    """Which fakes the patched module registers, run against stand-ins of torch's API."""
    calls: list[str] = []

    class Library:
        @staticmethod
        def register_fake(name: str):  # type: ignore[no-untyped-def]
            calls.append(name)
            return lambda fn: fn

    class Extension:
        @staticmethod
        def _has_ops() -> bool:
            return has_ops

    torch = type("torch", (), {"library": Library})
    torchvision = type("torchvision", (), {"extension": Extension})
    body = text.replace("import torchvision.extension\n", "")
    names = {"torch": torch, "torchvision": torchvision}
    exec(compile(body, "_meta_registrations.py", "exec"), names)
    return calls


def test_unknown_tree_fails(tmp_path: Path) -> None:
    (tmp_path / "_meta_registrations.py").write_text("import torch\n")
    done = _apply(tmp_path)
    assert done.returncode != 0 and "matched nothing" in done.stderr


def test_venv_torchvision_models_import_and_run() -> None:
    """The venv as env/setup.sh leaves it: ``import torchvision.models`` in a fresh
    interpreter, ResNet-50 forward on 1x3x32x32; detection operators say they are missing."""
    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed")
    probe = (
        "import torch, torchvision.models as m, torchvision.ops as ops\n"
        "net = m.resnet50().eval()\n"
        "with torch.no_grad(): print(tuple(net(torch.zeros(1, 3, 32, 32)).shape))\n"
        "if not torch.cuda.is_available():\n"
        "    try: ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)\n"
        "    except RuntimeError as e: print('nms:', 'custom C++ ops' in str(e))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "(1, 1000)"
    if len(lines) > 1:  # a CPU torch: the compiled operators stay unavailable, and say so
        assert lines[1] == "nms: True"
