#!/bin/sh
# The MPI suite across two "hosts" on this machine (maint/multihost: network namespaces
# with their own hostnames, Hydra placing ranks across them), so that MPI-ACC runs its
# path between nodes: every program under test/mpi (their own rank counts, 2 to 4),
# p2p_between_nodes among them, which proves the ranks are on two nodes and the pipeline
# carries device data; tests of modes that only exist inside one node skip there by name.
# Runs when MPIACC_MULTIHOST=1 (root, network namespaces: CI sets it); otherwise one case
# skips, by name. TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
tests=$(sed -n 's#^check_PROGRAMS += ##p' "$srcdir/test/mpi/Makefile.inc" "$srcdir/test/mpi/opencl.inc" |
  tr ' ' '\n' | sed -n 's#^test/mpi/##p' | sort -u)
if [ "${MPIACC_MULTIHOST:-0}" != 1 ]; then
  echo "1..1"
  echo "ok 1 - mpi_tests_across_two_hosts # SKIP set MPIACC_MULTIHOST=1 to run them (needs root and network namespaces)"
  exit 0
fi
n=$(echo $tests | wc -w)
echo "1..$n"
out=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-multihost-test.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
# One rig for all the tests: each runs under the rig's mpiexec (test/run-test reads
# MPIEXEC), its TAP lines kept, and passes when it exits 0 with no "not ok" line.
MPIACC_OPENCL_PLATFORM=${MPIACC_OPENCL_PLATFORM:-Portable} "$srcdir/maint/multihost" -n 2 sh -c '
  for t in '"$(echo $tests)"'; do
    "'"$top_builddir"'/test/run-test" "'"$top_builddir"'/test/mpi/$t" >"'"$out"'/$t.log" 2>&1
    echo $? >"'"$out"'/$t.rc"
  done'
i=0
for t in $tests; do
  i=$((i + 1))
  rc=$(cat "$out/$t.rc" 2>/dev/null || echo none)
  passed=$(grep -c '^ok ' "$out/$t.log" 2>/dev/null)
  skipped=$(grep -c '^ok .*# SKIP' "$out/$t.log" 2>/dev/null)
  if [ "$rc" = 0 ] && ! grep -q '^not ok\|^Bail out' "$out/$t.log" && [ "$passed" -gt "$skipped" ]; then
    echo "ok $i - ${t}_across_two_hosts # $((passed - skipped)) passed, $skipped skipped"
  elif [ "$rc" = 0 ] && ! grep -q '^not ok\|^Bail out' "$out/$t.log" && [ "$passed" -gt 0 ]; then
    echo "ok $i - ${t}_across_two_hosts # SKIP every case skipped: $(grep -m 1 -o '# SKIP .*' "$out/$t.log" | cut -c8-)"
  else
    echo "not ok $i - ${t}_across_two_hosts"
    echo "# exit $rc"
    grep -v '^ok ' "$out/$t.log" 2>/dev/null | tail -n 8 | sed 's/^/# /'
  fi
done
