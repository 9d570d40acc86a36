#!/usr/bin/env bash
# Create or refresh distlab's virtual environment (.venv). Idempotent: when nothing it
# depends on changed, it checks and returns in seconds.
#
# Steps: system packages the tests need (sshd, chromium, iproute2, Slurm and munge; root +
# apt only),
# MXNet 1.9.1 in its own venv beside this one (env/setup_mxnet.sh),
# the pinned Python packages (torchvision's Python files patched for a CPU-only torch:
# env/torchvision-patches), Horovod from the cached wheel (env/build_horovod.sh builds
# it once per version set) with its Python files patched (env/horovod-patches), and
# distlab itself in editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
python=${PYTHON:-python3}
cache=${DISTLAB_CACHE:-$HOME/.cache/distlab}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$cache/pip}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
log() { printf '[setup] %s\n' "$*"; }

# -- system packages (only what is missing; never fatal when we cannot install) --------
missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
command -v chromium >/dev/null || missing+=(chromium)
command -v ip >/dev/null && command -v tc >/dev/null || missing+=(iproute2)
# a single-machine Slurm for the tests of the slurm cluster kind (tests/cluster/test_slurm*.py)
command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
  && command -v srun >/dev/null || missing+=(slurm-wlm)
command -v munged >/dev/null || missing+=(munge)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing system packages: ${missing[*]}"
    timeout 900 apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive timeout 1200 apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    log "warning: missing ${missing[*]}; tests that need them will be skipped"
  fi
fi

# -- MXNet's own venv (.venv-mxnet: MXNet 1.9.1 needs numpy < 1.24; never fatal) ------
env/setup_mxnet.sh || log "warning: MXNet is not installed; the MXNet rows will say so"

# -- Python environment --------------------------------------------------------------
want=$(cat requirements.txt pyproject.toml env/setup.sh env/build_*.sh env/kungfu-patches/* env/horovod-patches/* env/torchvision-patches/* env/patching.py | sha256sum | cut -c1-16)
stamp="$venv/.distlab-setup"
# KUNGFU_SOURCE set where KungFu is missing (its source was unreachable the last time)
# is a change too: build_kungfu.sh's message tells the user to set it and run setup again
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$venv/bin/python" -c 'import lab, horovod, papermill' 2>/dev/null \
   && { [ -z "${KUNGFU_SOURCE:-}" ] || "$venv/bin/python" -c 'import kungfu' 2>/dev/null; }; then
  log "$venv is up to date"
  exit 0
fi

[ -x "$venv/bin/python" ] || { log "creating $venv"; "$python" -m venv "$venv"; }
pip=("$venv/bin/python" -m pip)
log "installing pinned packages (requirements.txt)"
reqs=$(mktemp)
trap 'rm -f "$reqs"' EXIT
grep -v '^horovod==' requirements.txt > "$reqs"
timeout 3600 "${pip[@]}" install --quiet -r "$reqs"
# PyPI's torchvision is the CUDA build: beside the CPU torch its compiled operators cannot
# load, and an unconditional registration made the import fail; patched so its models
# import (env/torchvision-patches/apply.py says why; nothing changes where they load)
"$venv/bin/python" env/torchvision-patches/apply.py >/dev/null

log "Horovod: cached wheel, or a one-time build"
wheel=$(env/build_horovod.sh "$venv" | tail -n 1)
timeout 600 "${pip[@]}" install --quiet --no-deps --force-reinstall "$wheel"
"$venv/bin/python" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("horovod")
root = pathlib.Path(spec.origin).parent
for framework, lib in (("TensorFlow", "tensorflow/mpi_lib*.so"), ("PyTorch", "torch/mpi_lib_v2*.so")):
    if not list(root.glob(lib)):
        sys.exit(f"Horovod at {root} has no {framework} ops: a hollow build; remove the cached wheel")
PY
# its Python files patched where installed (each rule says why): no rebuild of the wheel
"$venv/bin/python" env/horovod-patches/apply.py >/dev/null

timeout 600 "${pip[@]}" install --quiet --no-deps --no-build-isolation -e .
env/build_kungfu.sh "$venv" >/dev/null || [ $? = 3 ]  # 3: no KungFu source; runs without it
env/build_kungfu_artifact.sh || [ $? = 3 ]  # its benchmark scripts, into ~/.cache/distlab
echo "$want" > "$stamp"
log "done: $("$venv/bin/python" -c 'import lab; print("distlab", lab.__version__)')"
