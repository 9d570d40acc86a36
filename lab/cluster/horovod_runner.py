"""horovodrun, asking whether Horovod was built with Gloo or MPI once per build, not per launch.

``python -m lab.cluster.horovod_runner ARGS`` is ``horovodrun ARGS``. On every launch
horovodrun 0.28.1 asks whether its controller was built (``horovod.common.util.gloo_built``
/ ``mpi_built``) by importing ``horovod.tensorflow`` in a new process: 3.5 s of TensorFlow
import here, before any rank starts, as long as a smoke run's training. The answer
changes only when Horovod is rebuilt, so it is asked once per build (the TensorFlow
extension's path, size and modification time) and kept in ``~/.cache/distlab``; horovodrun
then runs as it would, with that answer.

``LAB_HOROVOD_BIND`` (set by the horovod launcher for a job on this machine alone, to
127.0.0.1) makes horovodrun's own servers (the Gloo rendezvous, the driver service) listen
on that address instead of every interface: horovodrun binds them to ``('', port)`` with
no option to say otherwise (horovod/runner/util/network.py ``find_port``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def cache_path() -> Path:
    root = os.environ.get("DISTLAB_CACHE") or Path.home() / ".cache" / "distlab"
    return Path(root) / "horovod-built.json"


def build_key() -> str:
    """What identifies this Horovod build: its version and its TensorFlow extension file."""
    import importlib.util

    import horovod

    spec = importlib.util.find_spec("horovod.tensorflow")  # its place, without importing it
    places = list(spec.submodule_search_locations or []) if spec else []
    lib = next((p for d in places for p in sorted(Path(d).glob("mpi_lib*.so"))), None)
    stat = lib.stat() if lib else None
    size, mtime = (stat.st_size, stat.st_mtime_ns) if stat else (0, 0)
    return f"{horovod.__version__}|{lib}|{size}|{mtime}"


def built(controller: str, ask: Callable[[], object], key: str, path: Path) -> bool:
    """Whether Horovod has ``controller``: the cached answer for ``key``, else ``ask()``'s
    (Horovod's own check), then cached."""
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if cached.get("key") == key and controller in cached:
        return bool(cached[controller])
    answer = bool(ask())
    fresh = {"key": key, **(cached if cached.get("key") == key else {}), controller: answer}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(fresh))
    tmp.replace(path)
    return answer


BIND_ENV = "LAB_HOROVOD_BIND"


def bind_servers_to(address: str) -> None:
    """Make horovodrun's ``find_port`` bind its servers to ``address`` only."""
    from horovod.runner.common.util import network as services
    from horovod.runner.http import http_server
    from horovod.runner.util import network

    original = network.find_port

    def find_port(server_factory: Callable[[tuple[str, int]], object]) -> object:
        def narrow(addr: tuple[str, int]) -> object:
            return server_factory((address, addr[1]))

        return original(narrow)

    for module in (network, services, http_server):
        module.find_port = find_port  # each imported the name itself


def main(argv: Sequence[str] | None = None) -> int:
    from horovod.common import util
    from horovod.runner import launch

    if os.environ.get(BIND_ENV):
        bind_servers_to(os.environ[BIND_ENV])

    key, path = build_key(), cache_path()
    checks = {"gloo": util.gloo_built, "mpi": util.mpi_built}
    for name, check in checks.items():

        def cached(verbose: bool = False, name: str = name, check=check) -> bool:
            return built(name, lambda: check(verbose=verbose), key, path)

        setattr(launch, f"{name}_built", cached)
    sys.argv = ["horovodrun", *(sys.argv[1:] if argv is None else argv)]
    launch.run_commandline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
