"""What the browser tests do in JupyterLab as a person does: open a notebook and wait for
its kernel, Run All Cells from the menu, wait until the kernel is idle again."""

from __future__ import annotations

from typing import Any

KERNEL_READY = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def open_notebook(page: Any, lab_server: Any, notebook: str) -> None:
    """Open ``notebook`` (under the server's root) and wait until its kernel is idle."""
    page.set_default_timeout(60_000)
    page.goto(lab_server.url(f"lab/tree/{notebook}"))
    wait_idle(page, 90_000)


def run_all(page: Any) -> None:
    """Run > Run All Cells, through the menu bar."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def wait_idle(page: Any, timeout_ms: int = 60_000) -> None:
    """Wait until the open notebook's kernel is connected and idle."""
    page.wait_for_function(KERNEL_READY, timeout=timeout_ms)
