"""Let a widget's clicks reach the kernel while the cell that launched a run still blocks.

A run call blocks its cell until the ranks exit (so papermill saves every output), and a
kernel handles its main shell's messages one at a time, so a Stop button's click would
wait for the very run it should stop. ipykernel 7 runs *subshells*: extra shell threads,
each with its own event loop, and routes a comm's messages to the subshell its
``_reply_subshell_for`` names. Here the view opens a subshell for its Stop button and
points the button's comm at it; on kernels without subshells the button still works
once the cell is free, and Kernel > Interrupt stops a run in any case.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_CREATE_TIMEOUT = 15.0


def route_off_main_shell(widget: Any) -> Callable[[], None] | None:
    """Handle ``widget``'s messages from the frontend in a subshell thread.

    Returns:
        A function that undoes the routing and closes the subshell, or None when the
        kernel has no subshells (not ipykernel >= 7, or no kernel at all).
    """
    try:
        from ipykernel.kernelbase import Kernel
    except ImportError:
        return None
    if not Kernel.initialized():
        return None
    kernel = Kernel.instance()
    channel = getattr(kernel, "shell_channel_thread", None)
    comm = getattr(widget, "comm", None)
    manager = getattr(channel, "manager", None)
    if channel is None or manager is None or comm is None:
        return None
    if not hasattr(comm, "_reply_subshell_for") or not hasattr(manager, "_create_subshell"):
        return None

    made: dict[str, Any] = {}
    done = threading.Event()
    lock = threading.Lock()

    def create() -> None:  # runs in the shell channel thread, as the manager requires
        try:
            subshell = manager._create_subshell()
        except Exception as exc:  # an unexpected ipykernel: keep the plain button
            made["error"] = exc
            done.set()
            return
        with lock:
            if made.get("abandoned"):  # too late: nobody will use or close it
                manager._delete_subshell(subshell)
            else:
                made["id"] = subshell
            done.set()

    channel.io_loop.add_callback(create)
    done.wait(_CREATE_TIMEOUT)
    with lock:
        if "id" not in made:
            made["abandoned"] = True
            log.info("no subshell for the Stop button (%s)", made.get("error", "timeout"))
            return None
    subshell_id = made["id"]
    comm._reply_subshell_for = lambda data, default: subshell_id

    def release() -> None:
        comm.__dict__.pop("_reply_subshell_for", None)

        def delete() -> None:
            try:
                manager._delete_subshell(subshell_id)
            except Exception:  # already gone with the kernel
                log.debug("subshell %s already closed", subshell_id)

        channel.io_loop.add_callback(delete)

    return release


def in_notebook_kernel() -> bool:
    """True in a Jupyter kernel (a ZMQ shell) with ipywidgets importable."""
    shell_mod = sys.modules.get("IPython")
    if shell_mod is None:
        return False
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
            return False
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
