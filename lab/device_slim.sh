#!/usr/bin/env bash
# A device call sends the checkout (tracked files, untracked ones not ignored, the carried paths), 64 MiB
# at most. The tracked exports under results/ are a few MiB (results/README.md), but carried paths (a
# resume store, compiler cache pieces) can need that room too; the device reads none of the exports, so
# they can be set aside in out/ (ignored, not carried) while the calls run, then put back unchanged.
#   bash lab/device_slim.sh size [CARRY...]   what a call would send, in MiB
#   bash lab/device_slim.sh hide              before the first call
#   bash lab/device_slim.sh restore           after the last (git status is clean again)
set -eu
cd "$(dirname "$0")/.."
STASH=out/device-stash.tar
case "${1:-}" in
size)
  shift
  tree=$({ git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 -r stat -c %s 2>/dev/null | awk '{t += $1} END {print t + 0}')
  carried=0
  [ $# -gt 0 ] && carried=$(du -sb "$@" | awk '{t += $1} END {print t + 0}')
  echo "tree $((tree / 1048576)) MiB + carried $((carried / 1048576)) MiB = $(((tree + carried) / 1048576)) MiB of 64"
  [ $((tree + carried)) -le $((64 * 1048576)) ] ;;
hide)
  if [ -e "$STASH" ]; then echo "device_slim: $STASH exists: restore first" >&2; exit 2; fi
  mkdir -p out
  git ls-files -z 'results/*.gz' | tar --null -cf "$STASH" -T -
  git ls-files -z 'results/*.gz' | xargs -0 -r rm -f
  echo "set aside $(tar tf "$STASH" | wc -l) files ($(du -m "$STASH" | cut -f1) MiB) in $STASH" ;;
restore)
  if [ ! -e "$STASH" ]; then echo "device_slim: nothing is set aside ($STASH)" >&2; exit 2; fi
  tar xf "$STASH" && rm "$STASH"
  echo "restored; changed under results/: $(git status --porcelain results | grep -c . || true)" ;;
*)
  echo "usage: bash lab/device_slim.sh size [CARRY...] | hide | restore" >&2; exit 2 ;;
esac
