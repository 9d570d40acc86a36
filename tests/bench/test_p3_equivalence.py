"""The schedules change how parameters travel, never the math: after K steps from the same
seed, two real ranks (launched by lab.cluster.launch, talking over TCP) hold exactly the
parameters of plain SGD on the summed gradients, under every schedule."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lab.bench.p3.config import P3Config
from lab.metrics.records import parse_record

torch = pytest.importorskip("torch")
STEPS, WORLD = 3, 2
RANK_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reference(cfg: P3Config) -> list:
    """Plain SGD on the sum of both ranks' gradients, in one process."""
    from lab.bench.p3 import models

    torch.manual_seed(cfg.seed)
    model = models.build(cfg.model)
    params = list(model.parameters())
    data = []
    for rank in range(WORLD):
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + rank)
        size = cfg.image_size
        data.append(
            (
                torch.rand(cfg.batch_size, 3, size, size, generator=gen),
                torch.randint(0, 10, (cfg.batch_size,), generator=gen),
            )
        )
    for _ in range(cfg.warmup_steps + cfg.steps):
        summed = [torch.zeros_like(p) for p in params]
        for x, y in data:
            for p in params:
                p.grad = None
            torch.nn.functional.cross_entropy(model(x), y).backward()
            for s, p in zip(summed, params, strict=True):
                s.add_(p.grad)
        with torch.no_grad():
            for s, p in zip(summed, params, strict=True):
                p.sub_(s, alpha=cfg.lr)
    return [p.detach() for p in params]


def run_and_compare(cfg: P3Config, tmp_path: Path) -> list[dict]:
    """Run ``cfg`` on two local ranks, check both ranks' final parameters against plain
    SGD, and return every record the ranks printed."""
    from lab.cluster import launch

    result = launch(
        cfg.command(),
        np=WORLD,
        launcher="local",
        cluster="local",
        experiment="test/p3",
        env=RANK_ENV,
        options={"master_port": free_port()},
        view=None,
        timeout=120,
    )
    want = reference(cfg)
    for rank in range(WORLD):
        got = torch.load(tmp_path / "params" / f"rank{rank}.pt")
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    # the run moved the parameters (a test that passes on untouched weights asserts nothing)
    torch.manual_seed(cfg.seed)
    from lab.bench.p3 import models

    init = [p.detach() for p in models.build("tiny").parameters()]
    assert max(float((g - i).abs().max()) for g, i in zip(got, init, strict=True)) > 1e-3
    records = []
    for log in Path(result.run_dir).glob("rank-*.log"):
        records += [r for r in map(parse_record, log.read_text().splitlines()) if r]
    return records


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_alternating_schedules_in_one_run_is_still_plain_sgd(tmp_path: Path) -> None:
    # baseline and p3 take turns every 2 steps over the same parameters (warm-up: every
    # step); each hands over to the other once its values of the step before are all in
    cfg = P3Config(
        schedule="p3",
        alternate=2,
        model="tiny",
        image_size=8,
        batch_size=8,
        steps=6,
        warmup_steps=2,
        slice_elements=100,
        big_bound=500,
        lr=0.05,
        trace_steps=3,
        dump=str(tmp_path / "params"),
    ).check(WORLD)
    records = run_and_compare(cfg, tmp_path)
    for rank in range(WORLD):
        mine = [r for r in records if r.get("rank") == rank]
        tags = [r["schedule"] for r in sorted(mine, key=lambda r: r.get("step", -1))
                if r["kind"] == "step"]  # fmt: skip
        assert tags == ["baseline", "p3"] + ["baseline"] * 2 + ["p3"] * 2 + ["baseline"] * 2
        (summary,) = [r for r in mine if r["kind"] == "summary"]
        # per schedule: its timed steps but each block's last one and the run's last one
        phases = summary["phases"]
        assert {s: p["steps"] for s, p in phases.items()} == {"baseline": 2, "p3": 1}
        for ph in phases.values():
            assert ph["img_per_sec"] == pytest.approx(8 * ph["steps"] / ph["seconds"], rel=1e-3)
            assert ph["cpu_seconds"] > 0
        # a traced step's slices are keys of the schedule it ran under
        slices = [r for r in mine if r.get("name") == "slice"]
        by_step = {r["step"]: r["schedule"] for r in mine if r.get("name") == "iteration"}
        assert set(by_step.values()) == {"baseline", "p3"}
        assert all(r["schedule"] == by_step[r["step"]] for r in slices)


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("schedule", ["baseline", "slicing", "p3"])
def test_every_schedule_is_plain_sgd_on_summed_gradients(schedule: str, tmp_path: Path) -> None:
    cfg = P3Config(
        schedule=schedule,
        model="tiny",
        image_size=8,
        batch_size=8,
        steps=STEPS,
        warmup_steps=0,
        slice_elements=100,  # many slices on a tiny model, each one message with its header
        big_bound=500,  # and the baseline's split of big tensors, payloads of more than
        # slice_elements received into buffers of their own
        lr=0.05,
        dump=str(tmp_path / "params"),
    ).check(WORLD)
    steps = run_and_compare(cfg, tmp_path)
    assert len([r for r in steps if r["kind"] == "step"]) == WORLD * STEPS
    # each step's record ends where the next forward pass starts, the last one's where its
    # backward ends: the wait for its own values is the drain, counted once, in the summary
    for rank in range(WORLD):
        mine = [r for r in steps if r.get("rank") == rank]
        (summary,) = [r for r in mine if r["kind"] == "summary"]
        stepped = sum(r["seconds"] for r in mine if r["kind"] == "step")
        assert summary["drain_seconds"] > 0
        timed = pytest.approx(summary["timed_seconds"], abs=1e-4)
        assert stepped + summary["drain_seconds"] == timed
    # the messages' sockets got small kernel buffers (the kernel reports twice the request)
    headers = [r for r in steps if r["kind"] == "header"]
    assert len(headers) == WORLD
    for h in headers:
        assert h["socket_buffers"], h
        assert all(snd <= 2 * cfg.sockbuf for snd, _ in h["socket_buffers"])
    slices = [r for r in steps if r.get("name") == "slice"]
    assert slices and all("value" in r and "push_sent" in r for r in slices)
