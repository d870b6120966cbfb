#!/usr/bin/env bash
# maint/diag/lib-ab.sh: this build of libmpiacc against an older one, in interleaved
# rounds on one machine. The GPU machines differ by more from one call to the next than
# most changes move a benchmark, so a change is judged against its parent in the same call.
#
# On the development machine, make the older tree's tarball:
#   bash maint/diag/lib-ab.sh --tarball REV      (writes .device/old.tar.gz, ~1 MB)
# Then on the GPU machine, through maint/gpu-check (which builds this tree first and
# exports MPIEXEC, MPICC and MPICXX):
#   AB_COMMAND='$MPIEXEC -n 2 $AB_ENV bench/pt2pt --rounds 1 --sizes 1M --dirs "D->D" --label $AB_LABEL --csv /dev/stdout' \
#     GPU_CHECK_SCRIPT=maint/diag/lib-ab.sh bash maint/gpu-check
# The old tree is built beside this one and its libmpiacc.so preloaded: AB_COMMAND runs
# once per build and round, new first, with $AB_ENV set to `env` or `env LD_PRELOAD=…`
# (put it after the launcher, so that only the ranks load the old library) and $AB_LABEL
# to new-ROUND or old-ROUND. AB_ROUNDS (default 3); AB_OLD_TARBALL (default
# .device/old.tar.gz).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

if [ "${1:-}" = --tarball ]; then
  # REV's sources with configure made (autogen.sh), without bench/results: older
  # revisions hold tens of MB of results, which would overflow the device tool's 64 MiB
  # carry beside the dependencies.
  rev=${2:?--tarball REV}
  scratch=$(mktemp -d /tmp/mpiacc-ab.XXXXXX)
  if git -C "$root" archive --prefix=mpiacc-old/ "$rev" | tar -x -C "$scratch" &&
    (cd "$scratch/mpiacc-old" && ./autogen.sh) >"$scratch/autogen.log" 2>&1; then
    rm -rf "$scratch/mpiacc-old/bench/results" "$scratch/mpiacc-old/autom4te.cache"
    mkdir -p "$root/.device" && tar -czf "$root/.device/old.tar.gz" -C "$scratch" mpiacc-old
    echo "lib-ab: .device/old.tar.gz is $(git -C "$root" rev-parse --short "$rev")'s sources, autogen'd ($(du -h "$root/.device/old.tar.gz" | cut -f1))"
    rc=0
  else
    tail -n 20 "$scratch/autogen.log"
    rc=1
  fi
  rm -rf "$scratch"
  exit $rc
fi

out=${1:?OUTDIR, or --tarball REV}
: "${AB_COMMAND:?AB_COMMAND: the command line to compare (see the top of this file)}"
# AB_COMMAND is eval'ed: an unquoted direction list (--dirs D->H) is a redirect to a file
# named "D-", and the rounds print nothing.
if [[ "$AB_COMMAND" =~ --dirs[[:space:]]+[A-Z] ]]; then
  echo "lib-ab: quote the --dirs list in AB_COMMAND (--dirs \"D->D,H->D\"): eval reads -> as a redirect" >&2
  exit 2
fi
source "$(dirname "$0")/diag-log.sh"
diag_log lib-ab "AB_COMMAND=$AB_COMMAND"
tarball=${AB_OLD_TARBALL:-$root/.device/old.tar.gz}
old=/tmp/mpiacc-ab-old
rm -rf "$old" && mkdir -p "$old" && tar -xzf "$tarball" -C "$old" || exit 1
src=$(echo "$old"/mpiacc-*/)
if ! (cd "$src" && ./configure --enable-cuda --enable-opencl MPICC="$MPICC" MPICXX="$MPICXX" MPIEXEC="$MPIEXEC" &&
  make -j"$(nproc)") >"$old/build.log" 2>&1; then
  tail -n 20 "$old/build.log"
  exit 1
fi
lib=$(ls "$src".libs/libmpiacc.so.*.*.* | head -n 1)
echo "== old: $lib"
for r in $(seq 1 "${AB_ROUNDS:-3}"); do
  for build in new old; do
    AB_LABEL=$build-$r
    AB_ENV=env
    [ $build = old ] && AB_ENV="env LD_PRELOAD=$lib"
    echo "== $AB_LABEL"
    eval "timeout ${AB_TIMEOUT:-120} $AB_COMMAND"
  done
done
echo "== done $(date -u +%FT%TZ)"
