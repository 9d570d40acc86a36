#!/usr/bin/env bash
# Create or refresh the MXNet venv (.venv-mxnet) beside .venv. Idempotent: when
# env/requirements-mxnet.txt did not change and mxnet imports, it returns in a second.
#
# MXNet 1.9.1 needs numpy < 1.24, which the lab's venv cannot have, so MXNet ranks run this
# interpreter (lab/cluster/launchers/dmlc.py). When it cannot be installed (no wheel for
# this platform, no network) setup says so and goes on: the MXNet rows then read
# "not installed". Exit codes: 0 installed or up to date, 3 not installed.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${MXNET_VENV:-.venv-mxnet}
python=${PYTHON:-python3}
cache=${DISTLAB_CACHE:-$HOME/.cache/distlab}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$cache/pip}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
log() { printf '[setup-mxnet] %s\n' "$*"; }

want=$(cat env/requirements-mxnet.txt env/setup_mxnet.sh | sha256sum | cut -c1-16)
stamp="$venv/.distlab-setup"
check='import mxnet, numpy; assert mxnet.__version__ == "1.9.1", mxnet.__version__'
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$venv/bin/python" -c "$check" 2>/dev/null; then
  log "$venv is up to date"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv"
  timeout 300 "$python" -m venv "$venv" || { log "not installed: cannot create $venv"; exit 3; }
fi
log "installing MXNet 1.9.1 (env/requirements-mxnet.txt)"
if ! timeout 1800 "$venv/bin/python" -m pip install --quiet -r env/requirements-mxnet.txt; then
  log "not installed: pip could not install env/requirements-mxnet.txt into $venv;"
  log "the MXNet rows of the P3 notebooks will say 'not installed'"
  exit 3
fi
if ! "$venv/bin/python" -c "$check"; then
  log "not installed: mxnet does not import in $venv"
  exit 3
fi
echo "$want" > "$stamp"
log "done: $("$venv/bin/python" -c 'import mxnet, numpy; print("mxnet", mxnet.__version__, "numpy", numpy.__version__)')"
