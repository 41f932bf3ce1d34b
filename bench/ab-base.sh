#!/usr/bin/env bash
# bench/ab-base.sh - build gpugate of git revision REV in a worktree DIR.
#
#   bench/ab-base.sh REV DIR [MAKE-VARIABLE=VALUE...]
#
# DIR (make bench-ab uses build/ab-base) becomes a detached `git worktree` of
# REV, and `make` runs there with the variables given (make bench-ab passes
# the same CC and CFLAGS as this tree's build), so DIR/build/gpugate is REV's
# binary built by REV's own Makefile, whatever its source layout.  When DIR
# already holds REV it is reused (make only rebuilds what changed: nothing);
# a DIR of another revision is removed and made anew, local edits in it
# included.  `make clean` removes it; so does
#   git worktree remove --force build/ab-base
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: bench/ab-base.sh REV DIR [MAKE-VARIABLE=VALUE...]" >&2; exit 2; }
rev=$1 dir=$2
shift 2
die() { printf 'ab-base: error: %s\n' "$*" >&2; exit 1; }

[ -n "$rev" ] || die "no base revision (make bench-ab BASE=REV; the default, the merge base with main, was not found)"
commit=$(git rev-parse --verify --quiet "$rev^{commit}") || die "'$rev' is not a commit of this repository"
short=$(git rev-parse --short "$commit")

if [ -e "$dir" ]; then
  have=$(git -C "$dir" rev-parse --verify --quiet HEAD 2>/dev/null || true)
  top=$(git -C "$dir" rev-parse --show-toplevel 2>/dev/null || true)
  if [ "$have" = "$commit" ] && [ "$top" = "$(cd "$dir" && pwd -P)" ]; then
    echo "ab-base: reusing $dir ($short)" >&2
  elif [ -n "$top" ] && [ "$top" = "$(cd "$dir" && pwd -P)" ]; then
    echo "ab-base: $dir holds ${have:0:7}; replacing it with $short" >&2
    git worktree remove --force "$dir"
  else
    die "$dir exists and is not a worktree of this repository: remove it"
  fi
fi
if [ ! -e "$dir" ]; then
  echo "ab-base: git worktree add --detach $dir $short" >&2
  mkdir -p "$(dirname "$dir")"
  # -f: a worktree registered there but deleted (rm -rf build) is taken over
  git worktree add -f --detach --quiet "$dir" "$commit"
fi

echo "ab-base: make -C $dir $*" >&2
make -C "$dir" --no-print-directory "$@" >&2
[ -x "$dir/build/gpugate" ] || die "make in $dir did not produce build/gpugate"
