"""A run whose Slurm job waits, in a real browser: JupyterLab in headless Chromium runs a
cell that launches on a slurm profile while another allocation holds the node's CPUs; the
run's view says "queued (reason: Resources)" with a Stop button, and Stop withdraws the job
(squeue lists only the holder again within 5 s). Done twice in one page: the cell run a
second time waits and is stopped the same way. Against a real single-node Slurm
(lab.cluster.slurm.testbed)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_pages import open_notebook, run_all, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.root]

LIMIT_S = 5.0  # Stop to the job gone from squeue


@pytest.fixture(scope="module")
def held_slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """A test Slurm whose one node's CPUs another allocation holds, and a slurm profile for
    it in ``DISTLAB_TEST_SLURM_PROFILE``: set before the JupyterLab server starts, so its
    kernels see them (with ``SLURM_CONF``)."""
    from lab.cluster.slurm.testbed import local_slurm, missing_programs

    missing = missing_programs()
    if missing:
        pytest.skip(f"Slurm/munge not installed (missing {', '.join(missing)}; env/setup.sh)")
    if os.geteuid() != 0:
        pytest.skip("the test Slurm's daemons need root")
    profile = tmp_path_factory.mktemp("slurm") / "slurm-test.yaml"
    saved = {k: os.environ.get(k) for k in ("SLURM_CONF", "DISTLAB_TEST_SLURM_PROFILE")}
    with local_slurm(cpus=2, nodes=1) as bed:
        profile.write_text(
            f"name: slurm-test\npython: {sys.executable}\n"
            "slurm: {partition: debug, nodes: 1, tasks_per_node: 2, time: '00:05:00'}\n"
        )
        os.environ.update(SLURM_CONF=str(bed.conf), DISTLAB_TEST_SLURM_PROFILE=str(profile))
        os.environ.pop("SLURM_JOB_ID", None)
        held = bed.run("salloc", "--no-shell", "-N1", f"-n{bed.cpus}", "--time=00:05:00")
        assert "Granted job allocation" in held.stderr, held.stderr
        holder = held.stderr.split("Granted job allocation")[1].split()[0]
        try:
            yield bed, holder
        finally:
            bed.run("scancel", holder)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            assert bed.queue_within(10.0) == [], "a job was left in the queue"


def _wait_queue(bed: Any, want: list[str], within: float) -> float:
    start = time.monotonic()
    while bed.queue() != want and time.monotonic() - start < within:
        time.sleep(0.1)
    return time.monotonic() - start


def test_stop_withdraws_a_queued_run_twice(held_slurm, lab_server, browser_page, tmp_path) -> None:
    bed, holder = held_slurm
    page = browser_page
    open_notebook(page, lab_server, "queued_run.ipynb")
    run_all(page)
    cell = page.locator(".jp-CodeCell").first
    view = cell.locator(".jp-Cell-outputArea")
    for attempt in (1, 2):
        if attempt == 2:  # the same cell again, as a person would rerun it
            cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
        view.get_by_text("queued (reason: Resources)").first.wait_for(timeout=90_000)
        assert len(bed.queue()) == 2, bed.queue()  # the holder's job and the run's, waiting
        page.screenshot(path=str(tmp_path / f"queued-{attempt}.png"), full_page=True)
        stop = view.locator(".widget-button", has_text="Stop").filter(visible=True)
        assert stop.count() == 1
        stop.click()
        clicked = time.monotonic()
        took = _wait_queue(bed, [holder], 2 * LIMIT_S)
        assert bed.queue() == [holder] and took <= LIMIT_S, (attempt, took, bed.queue())
        view.get_by_text("run state: cancelled").wait_for(timeout=30_000)
        headline = view.locator(".distlab-status").first.inner_text()
        assert "stopped from the view" in headline, headline
        wait_idle(page, 30_000)
        page.screenshot(path=str(tmp_path / f"stopped-{attempt}.png"), full_page=True)
        print(f"attempt {attempt}: Stop to job withdrawn {took:.2f} s "
              f"({time.monotonic() - clicked:.2f} s to the cell's end)")  # fmt: skip
