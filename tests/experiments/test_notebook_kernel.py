"""The batch runner's kernel: no transport warning in every `make run` notebook."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from lab.experiments.notebooks import run_notebook


@pytest.mark.slow
def test_kernel_runs_without_the_tcp_transport_warning(tmp_path: Path, capfd) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('scale = "smoke"\ncluster = "local"')
    params.metadata["tags"] = ["parameters"]
    where = "import json\nfrom ipykernel.connect import get_connection_info\n"
    where += "print(json.loads(get_connection_info())['ip'])"
    nb.cells = [params, nbformat.v4.new_code_cell(where), nbformat.v4.new_code_cell("print(42)")]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    src = tmp_path / "k.ipynb"
    nbformat.write(nb, src)
    result = run_notebook(src, tmp_path / "out.ipynb", {"scale": "smoke"})
    assert result.ok, result.error
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "42\n"
    sockets = Path(executed.cells[-2].outputs[0]["text"].strip())
    assert sockets.is_absolute() and tmp_path not in sockets.parents  # not beside the notebook
    assert not sockets.parent.exists()  # its temporary folder is gone
    err = capfd.readouterr().err
    assert "without encryption" not in err  # ipykernel's warning for a plain-TCP kernel
    assert not list(tmp_path.glob("*-ipc*"))  # the kernel's sockets were cleaned up
