"""distlab's changes to KungFu b1e1768 so it builds and runs against TensorFlow 2.21 on Python 3.11.

Run as ``python apply.py SOURCE_DIR`` on an unmodified checkout of that commit. Every fix is
a (files, pattern, replacement) rule with the reason it is needed; a rule that matches
nothing fails the build, so a changed source tree is noticed instead of half-patched.
Standard library only: it runs before the virtual environment has anything else.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

OPS = "srcs/cpp/src/tensorflow/ops/*/*.cpp"
PY = "srcs/python/kungfu"

# (why, glob of files, regex, replacement)
RULES: tuple[tuple[str, str, str, str], ...] = (
    (
        "GCC 12 with -Werror: peer.cpp uses fprintf/exit without their headers",
        "srcs/cpp/src/peer.cpp",
        r"\A#include <kungfu/peer.hpp>\n",
        "#include <cstdio>\n#include <cstdlib>\n#include <kungfu/peer.hpp>\n",
    ),
    (
        "TensorFlow 2.21's headers (abseil) need C++17",
        "CMakeLists.txt",
        r"SET\(CMAKE_CXX_STANDARD 14\)",
        "SET(CMAKE_CXX_STANDARD 17)",
    ),
    (
        "tensorflow::Status is absl::Status now and has no OK()",
        OPS,
        r"\bStatus::OK\(\)",
        "absl::OkStatus()",
    ),
    (
        "errors::InvalidArgument is deprecated (an error under -Werror); one-string uses only",
        OPS,
        r"\berrors::InvalidArgument\(",
        "absl::InvalidArgumentError(",
    ),
    (
        "Python 3 has no sysconfig 'SO': the op library was named ...opsNone (setup.py links here)",
        "setup_tensorflow.py",
        r"get_config_var\('SO'\)",
        "get_config_var('EXT_SUFFIX')",
    ),
    (
        "the same when CMake is run by hand",
        "srcs/cmake/tf-op.cmake",
        r"get_config_var\('SO'\)",
        "get_config_var('EXT_SUFFIX')",
    ),
    (
        "the same where Python loads the op library",
        f"{PY}/tensorflow/ops/_tf_oplib.py",
        r"EXT_SUFFIX_KEY = 'SO'",
        "EXT_SUFFIX_KEY = 'EXT_SUFFIX'",
    ),
    (
        "tf.estimator is gone from TensorFlow 2.16+; the hook class lives in compat.v1",
        f"{PY}/tensorflow/compat/__init__.py",
        r"_tf_hook = tf\.estimator\.SessionRunHook",
        "_tf_hook = tf.compat.v1.train.SessionRunHook",
    ),
    (
        "the same for the policy hook",
        f"{PY}/tensorflow/policy/policy_hook.py",
        r"\btf\.estimator\.SessionRunHook",
        "tf.compat.v1.train.SessionRunHook",
    ),
    (
        "tf.mod is TF1-only: the monitors' interval test",
        f"{PY}/tensorflow/optimizers/grad_*.py",
        r"\btf\.mod\(",
        "tf.math.floormod(",
    ),
    (
        "step counters made in __init__ are an eager constant 0 under TF2: pair averaging "
        "re-saved its model behind a barrier every step (lock-step, not asynchronous); count "
        "where the step's graph is built (the same op as before in TF1 graph mode)",
        f"{PY}/tensorflow/optimizers/async_sgd.py",
        r"tf\.equal\(self\._step, 0\)",
        "tf.equal(counter(), 0)",
    ),
    (
        "the same for the monitors' interval (TF2 ignored monitor_interval)",
        f"{PY}/tensorflow/optimizers/grad_*.py",
        r"tf\.math\.floormod\(self\._step, self\._interval\)",
        "tf.math.floormod(counter(), self._interval)",
    ),
    (
        "SaveVariable(s) have no output and were not stateful: a TF2 tf.function prunes them, "
        "so pair averaging's peers kept reading each other's initial model",
        "srcs/cpp/src/tensorflow/ops/cpu/local.cpp",
        r'(\.Input\("(?:input: T|vars: NumTensors \* T)"\));',
        r"\1\n    .SetIsStateful();",
    ),
    (
        "tf.assign / tf.global_variables are TF1-only: graph-mode broadcast",
        f"{PY}/tensorflow/initializer/__init__.py",
        r"\btf\.(assign|global_variables)\(",
        r"tf.compat.v1.\1(",
    ),
    (
        "the same in the adaptive SGD optimizer",
        f"{PY}/tensorflow/optimizers/ada_sgd.py",
        r"\btf\.(assign|global_variables)\(",
        r"tf.compat.v1.\1(",
    ),
    (
        "the same in the elastic hook (graph mode, used by the elastic examples)",
        f"{PY}/tensorflow/hooks/elastic.py",
        r"\btf\.global_variables\(",
        "tf.compat.v1.global_variables(",
    ),
    (
        "a peer's unix socket was named by its port alone: the lab's emulated hosts share one "
        "/tmp, so peers at the same port on two hosts took over (and removed) each other's "
        "socket, and could fail to bind when they started together; name it by address too "
        "(one address per real host, so nothing changes there)",
        "srcs/go/plan/addr.go",
        r"fmt\.Sprintf\(`/tmp/kungfu-run-%d\.sock`, a\.Port\)",
        "fmt.Sprintf(`/tmp/kungfu-run-%s-%d.sock`, FormatIPv4(a.IPv4), a.Port)",
    ),
)


def apply(root: Path) -> list[str]:
    """Apply every rule under ``root``; return one line per rule, raise if one matches nothing."""
    done = []
    for why, pattern, regex, replacement in RULES:
        files = sorted(root.glob(pattern))
        total = 0
        for path in files:
            text = path.read_text()
            new, n = re.subn(regex, replacement, text)
            if n:
                path.write_text(new)
                total += n
        if total == 0:
            raise SystemExit(f"patch rule matched nothing ({pattern}: {regex!r}): {why}")
        done.append(f"{total:3d} x {pattern}: {why}")
    return done


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: apply.py KUNGFU_SOURCE_DIR")
    for line in apply(Path(sys.argv[1])):
        print(line)
