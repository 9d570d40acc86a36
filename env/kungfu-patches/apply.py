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
CONFIG_SERVER = "srcs/go/cmd/kungfu-run/app/builtin-config-server.go"
KUNGFU_RUN = "srcs/go/cmd/kungfu-run/app/kungfu-run.go"

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
    # -- listeners: each on the address the lab gave it, not every interface ------------
    (
        "peers, and kungfu-run in watch mode, listened on 0.0.0.0:port whatever their self "
        "spec said (ListenAddr(false)); bind the peer's own address instead (KUNGFU_SELF_SPEC's "
        "host; kungfu-run's -self, -nic or 127.0.0.1), so a local job listens on loopback "
        "only; an address that is not this host's own now fails at bind, loudly",
        "srcs/go/rchannel/server/server.go",
        r"\bself\.ListenAddr\(false\)",
        "self.ListenAddr(true)",
    ),
    (
        "the builtin config server (unauthenticated /config and /stop) listened on :port; "
        "it takes the address to bind",
        CONFIG_SERVER,
        r'func runBuiltinConfigServer\(port int\) \{(\n.*\n)\taddr := net\.JoinHostPort\("", ',
        r"func runBuiltinConfigServer(host string, port int) {\1\taddr := net.JoinHostPort(host, ",
    ),
    (
        "a config server that cannot bind only logged it, and the peers then waited on a "
        "URL nobody serves: end kungfu-run instead",
        CONFIG_SERVER,
        r'log\.Errorf\("config server stopped: %v", err\)',
        'utils.ExitErr(fmt.Errorf("config server on %s: %v", addr, err))',
    ),
    (
        "the address is the host of -config-server (where the peers read it), else the "
        "runner's own",
        CONFIG_SERVER,
        r"(\nfunc logRequest\()",
        "\n// builtinConfigHost is where the builtin config server binds: the host of the\n"
        "// -config-server URL the peers read, else this runner's own address.\n"
        "func builtinConfigHost(configServer string, self uint32) string {\n"
        "\tif u, err := url.Parse(configServer); err == nil && u.Hostname() != \"\" {\n"
        "\t\treturn u.Hostname()\n\t}\n\treturn plan.FormatIPv4(self)\n}\n\\1",
    ),
    (
        "the packages that needs",
        CONFIG_SERVER,
        r'\t"context"\n\t"net"\n\t"net/http"\n\t"strconv"\n(\n.*\n.*/go/log"\n)',
        '\t"context"\n\t"fmt"\n\t"net"\n\t"net/http"\n\t"net/url"\n\t"strconv"\n\\1'
        '\t"github.com/lsds/KungFu/srcs/go/plan"\n\t"github.com/lsds/KungFu/srcs/go/utils"\n',
    ),
    (
        "kungfu-run started the config server before it knew its own address: start it "
        "once -self/-nic are resolved",
        KUNGFU_RUN,
        r"\tif f\.BuiltinConfigPort > 0 \{\n\t\tgo runBuiltinConfigServer\(f\.BuiltinConfigPort\)\n\t\}\n",
        "",
    ),
    (
        "(there)",
        KUNGFU_RUN,
        r'(\tlog\.Debugf\("Using self=%s", plan\.FormatIPv4\(localhostIPv4\)\)\n)',
        "\\1\tif f.BuiltinConfigPort > 0 {\n\t\tgo runBuiltinConfigServer("
        "builtinConfigHost(f.ConfigServer, localhostIPv4), f.BuiltinConfigPort)\n\t}\n",
    ),
    (
        "with monitoring, each peer's metrics server listened on 0.0.0.0:port+10000 (its "
        "log already names http://<self>:port+10000/metrics): bind the peer's own address",
        "srcs/go/monitor/server.go",
        r'func StartServer\(port int\) \{\n\taddr := net\.JoinHostPort\("0\.0\.0\.0", ',
        "func StartServer(host string, port int) {\n\taddr := net.JoinHostPort(host, ",
    ),
    (
        "(its caller)",
        "srcs/go/kungfu/peer/peer.go",
        r"\bmonitor\.StartServer\(int\(monitoringPort\)\)",
        "monitor.StartServer(plan.FormatIPv4(p.self.IPv4), int(monitoringPort))",
    ),
    (
        "kungfu-run's -debug-port server listened on every interface though its log names "
        "http://127.0.0.1:port/: bind it there",
        "srcs/go/kungfu/runner/watch.go",
        r'net\.JoinHostPort\("", strconv\.Itoa\(debugPort\)\)',
        'net.JoinHostPort("127.0.0.1", strconv.Itoa(debugPort))',
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
