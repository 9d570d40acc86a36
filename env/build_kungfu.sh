#!/usr/bin/env bash
# Build KungFu (github.com/lsds/KungFu, Apache-2.0) against the TensorFlow in a virtual env,
# once per version set; cache the wheel beside Horovod's and install it.
#
# Why a script: KungFu is not on PyPI and its last commit predates TensorFlow 2.16+, GCC 12
# and Python 3.11. We build a pinned commit with distlab's own fixes, kept as checked rules
# in env/kungfu-patches/apply.py (each says why). The Go half needs Debian's golang-go (Go
# 1.19 works; KungFu's go.mod has no external modules, so the build is offline).
#
# Source: KUNGFU_SOURCE = a `git archive` tarball of the commit, a directory holding the
# commit's tree, or a git URL (default: the upstream repository). A tarball's or checkout's
# commit is verified where git can tell it.
#
# Exit codes: 0 installed; 3 no source could be had (KUNGFU_SOURCE unset and upstream
# unreachable): the lab runs without KungFu; anything else is a real failure.
#
# Usage: env/build_kungfu.sh VENV   -> prints the path of the cached wheel last
set -euo pipefail
venv=$(realpath "${1:?usage: build_kungfu.sh VENV}")
py="$venv/bin/python"
here=$(cd "$(dirname "$0")" && pwd)
commit=b1e176834138ead55afc58a25ff32a8614d4c4b8
kf_version=0.2.2
upstream=https://github.com/lsds/KungFu.git
source=${KUNGFU_SOURCE:-$upstream}
log() { printf '[kungfu] %s\n' "$*" >&2; }
tf_version=$("$py" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
py_tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
recipe=$(cat "$0" "$here"/kungfu-patches/* | sha256sum | cut -c1-8)
cache=${DISTLAB_CACHE:-$HOME/.cache/distlab}/wheels/kungfu-$kf_version-${commit:0:7}-tf$tf_version-$py_tag-$recipe

install_wheel() {
  timeout 600 "$py" -m pip install --quiet --no-deps --force-reinstall "$1" >&2
  # The op library must load against this TensorFlow, and kungfu-run must be there.
  TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3 timeout 300 "$py" -c \
    'import kungfu.tensorflow.ops, kungfu.tensorflow.optimizers' >&2
  [ -x "$venv/bin/kungfu-run" ] || { log "kungfu-run missing from $venv/bin"; exit 1; }
  echo "$1"
}

if ls "$cache"/kungfu-*.whl >/dev/null 2>&1; then
  install_wheel "$(ls "$cache"/kungfu-*.whl | head -n 1)"
  exit 0
fi

# -- the tools: Go (Debian golang-go, as root), CMake and a C++ compiler -------------
if ! command -v go >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing golang-go"
    timeout 900 apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive timeout 1200 apt-get install -y -qq \
      --no-install-recommends golang-go >/dev/null
  fi
fi
for tool in go cmake c++ tar; do
  command -v "$tool" >/dev/null || { log "cannot build KungFu: $tool is missing"; exit 1; }
done

# -- the source, at the pinned commit -------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/distlab-kungfu.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src="$work/src"
if [ -f "$source" ]; then
  if command -v git >/dev/null; then
    # git archive writes the commit into the tar's pax header; read it without unpacking.
    got=$( (gzip -dc "$source" 2>/dev/null || cat "$source") | head -c 4096 \
      | git get-tar-commit-id 2>/dev/null || true)
    if [ -n "$got" ] && [ "$got" != "$commit" ]; then
      log "$source is commit $got, not the pinned $commit"; exit 1
    fi
  fi
  mkdir -p "$src"
  timeout 300 tar -xf "$source" -C "$src" --strip-components=1
elif [ -d "$source" ]; then
  if [ -e "$source/.git" ] && command -v git >/dev/null; then
    got=$(timeout 60 git -C "$source" rev-parse HEAD)
    [ "$got" = "$commit" ] || { log "$source is at $got, not the pinned $commit"; exit 1; }
  fi
  cp -a "$source" "$src"
  rm -rf "$src/.git"
elif [[ "$source" == *://* || "$source" == git@* ]]; then
  log "fetching $source at ${commit:0:7}"
  if ! GIT_TERMINAL_PROMPT=0 timeout 600 git clone --quiet "$source" "$src" >&2 \
     || ! timeout 120 git -C "$src" -c advice.detachedHead=false checkout --quiet "$commit"; then
    if [ -z "${KUNGFU_SOURCE:-}" ]; then
      log "KungFu's source is unreachable ($source); the lab runs without KungFu." \
        "Set KUNGFU_SOURCE to a tarball or checkout of $commit and run make setup again"
      exit 3
    fi
    log "cannot fetch KUNGFU_SOURCE=$source at $commit"; exit 1
  fi
else
  log "KUNGFU_SOURCE=$source is neither a file, a directory nor a git URL"; exit 1
fi
[ -f "$src/setup_tensorflow.py" ] || { log "no KungFu tree in $source"; exit 1; }

# -- patch, build, cache --------------------------------------------------------------
log "applying distlab's patches (env/kungfu-patches)"
"$py" "$here/kungfu-patches/apply.py" "$src" >&2
log "building KungFu ${commit:0:7} for tensorflow $tf_version (about 2 min on 2 cores) ..."
export PATH="$venv/bin:$PATH"
# Go keeps its caches in the build's temp dir; nothing is downloaded (GOPROXY=off).
export GOCACHE="$work/gocache" GOPATH="$work/gopath" GOPROXY=off GOFLAGS=-mod=mod
export GO111MODULE=on GOTOOLCHAIN=local CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
mkdir -p "$work/dist"
start=$(date +%s)
timeout 3600 "$py" -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/dist" "$src" >&2
log "built in $(( $(date +%s) - start )) s"
whl=$(ls "$work"/dist/kungfu-*.whl)
listing=$("$py" -m zipfile -l "$whl")
if ! grep -q 'kungfu_tensorflow_ops\.cpython' <<<"$listing"; then
  log "the wheel has no TensorFlow op library (kungfu_tensorflow_ops.cpython-*.so)"; exit 1
fi
mkdir -p "$cache"
mv "$whl" "$cache"/
install_wheel "$(ls "$cache"/kungfu-*.whl | head -n 1)"
