"""The EST runtime's SGD computes torch.optim.SGD's bits without importing its compiler."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from lab import REPO_ROOT

pytestmark = pytest.mark.slow


def test_sgd_equals_torch_optim_sgd_bit_for_bit_and_restores_its_state() -> None:
    import torch

    from lab.bench.easyscale.optim import SGD

    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 3))
    ours, resumed = copy.deepcopy(ref), copy.deepcopy(ref)
    kw = {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}
    opts = [
        (ref, torch.optim.SGD(ref.parameters(), foreach=False, **kw)),
        (ours, SGD(ours.parameters(), **kw)),
        (resumed, SGD(resumed.parameters(), **kw)),
    ]
    for step in range(4):
        x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
        if step == 2:  # a restart: the third model's optimizer comes back from a state dict
            opts[2] = (resumed, SGD(resumed.parameters(), **kw))
            opts[2][1].load_state_dict(copy.deepcopy(opts[1][1].state_dict()))
        for model, opt in opts:
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    for a, b, c in zip(ref.parameters(), ours.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_an_est_rank_turns_on_deterministic_kernels_without_the_compiler_stack() -> None:
    code = (
        "import sys, torch\n"
        "from lab.bench.easyscale.config import Config, DeviceSpec\n"
        "from lab.bench.easyscale import determinism, runtime\n"
        "s = determinism.configure_torch(DeviceSpec(), d1=True)\n"
        "runtime.make_optimizer(list(torch.nn.Linear(2, 2).parameters()), Config())\n"
        "print(s['deterministic'], 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["True", "False"]
