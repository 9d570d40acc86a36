"""A rank the lab launches imports TensorFlow without pandas and scipy
(common.skip_imports_ranks_do_not_use); any other process imports it whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lab.bench.backends import common
from lab.cluster.request import RANK_ENV_DEFAULTS

PROBE = """
import json, sys
from lab.bench.backends import common
tf = common.setup_tensorflow(1)
x = tf.keras.layers.Dense(2)(tf.ones([3, 4]))  # tf-keras still builds and runs a layer
print(json.dumps({
    "shape": list(x.shape),
    "marked": {m: m in sys.modules and sys.modules[m] is None for m in common.NOT_FOR_RANKS},
    "imported": {m: sys.modules.get(m) is not None for m in common.NOT_FOR_RANKS},
}))
"""


def _probe(lean: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != common.LEAN_IMPORT_ENV}
    env |= {common.LEAN_IMPORT_ENV: "1"} if lean else {}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_launched_ranks_skip_what_they_do_not_use_and_others_do_not() -> None:
    assert RANK_ENV_DEFAULTS[common.LEAN_IMPORT_ENV] == "1"
    lean, whole = _probe(lean=True), _probe(lean=False)
    assert lean["shape"] == whole["shape"] == [3, 2]
    assert lean["marked"] == dict.fromkeys(common.NOT_FOR_RANKS, True)
    assert not any(lean["imported"].values())
    # without the variable TensorFlow imports both itself: the skip is not a no-op
    assert whole["imported"] == dict.fromkeys(common.NOT_FOR_RANKS, True)
    assert not any(whole["marked"].values())
