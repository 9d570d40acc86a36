#!/usr/bin/env bash
# Keep KungFu's own benchmark scripts (benchmarks/ of the commit env/build_kungfu.sh builds:
# the OSDI'20 artifact's monitoring and system benchmarks) in the cache, outside the
# repository, where lab.experiments.kungfu.artifact finds them when KUNGFU_ARTIFACT is unset:
#   ${DISTLAB_CACHE:-~/.cache/distlab}/kungfu-artifact/b1e1768/benchmarks
# They run unmodified through kungfu-run (the TF1 ones under lab.bench.tf1_compat).
#
# Source: KUNGFU_SOURCE as for env/build_kungfu.sh (a `git archive` tarball of the commit, a
# directory holding its tree, or a git URL; default: the upstream repository).
# Exit codes: 0 kept (or already there); 3 no source could be had: the artifact rows say so.
set -euo pipefail
commit=b1e176834138ead55afc58a25ff32a8614d4c4b8
source=${KUNGFU_SOURCE:-https://github.com/lsds/KungFu.git}
artifact=${DISTLAB_CACHE:-$HOME/.cache/distlab}/kungfu-artifact/${commit:0:7}
log() { printf '[kungfu-artifact] %s\n' "$*" >&2; }

[ -d "$artifact/benchmarks" ] && exit 0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/distlab-kungfu-artifact.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ -f "$source" ]; then
  if command -v git >/dev/null; then  # the commit git archive wrote into the pax header
    got=$( (gzip -dc "$source" 2>/dev/null || cat "$source") | head -c 4096 \
      | git get-tar-commit-id 2>/dev/null || true)
    if [ -n "$got" ] && [ "$got" != "$commit" ]; then
      log "$source is commit $got, not the pinned $commit"; exit 1
    fi
  fi
  timeout 120 tar -xf "$source" -C "$tmp" --strip-components=1 --wildcards '*/benchmarks/*' \
    || true
elif [ -d "$source" ]; then
  [ -d "$source/benchmarks" ] && cp -a "$source/benchmarks" "$tmp"/
elif [[ "$source" == *://* || "$source" == git@* ]]; then
  if ! GIT_TERMINAL_PROMPT=0 timeout 600 git clone --quiet --no-checkout "$source" "$tmp/git" \
     || ! timeout 120 git -C "$tmp/git" checkout --quiet "$commit" -- benchmarks; then
    log "KungFu's source is unreachable ($source): the artifact rows stay unavailable"; exit 3
  fi
  mv "$tmp/git/benchmarks" "$tmp"/
fi
[ -d "$tmp/benchmarks" ] || { log "no benchmarks/ in $source"; exit 3; }
mkdir -p "$artifact"
mv "$tmp/benchmarks" "$artifact"/
log "kept KungFu's benchmarks in $artifact"
