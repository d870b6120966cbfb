#!/bin/sh
# Under the default error handler (MPI_ERRORS_ARE_FATAL) a call MPI-ACC refuses aborts the
# job with the user's call, its argument and MPI-ACC's text: not MPICH's
# "Fatal error in PMPI_Comm_call_errhandler: Unsupported file operation". TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..2"
n=0
check() { # NAME EXPECTED-TEXT [CHILD-ARGS...]
  n=$((n + 1))
  name=$1 want=$2
  shift 2
  out=$(timeout -k 10 60 "$MPIEXEC" -n 1 "$top_builddir/test/user/fatal_child" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && printf '%s\n' "$out" | grep -qF "Fatal error on rank 0: $want" &&
    ! printf '%s\n' "$out" | grep -q 'call_errhandler\|file operation\|returned'; then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name"
    echo "# exit $rc; expected a line with: Fatal error on rank 0: $want"
    printf '%s\n' "$out" | sed 's/^/# /' | head -n 20
  fi
}
check refused_collective_under_errors_are_fatal_aborts_naming_the_users_call \
  "MPI_Allreduce(sendbuf): not supported on device buffers: sendbuf is CUDA memory"
check refused_put_under_the_windows_default_handler_aborts_naming_the_users_call \
  "MPI_Put(origin_addr): not supported on device buffers: origin_addr is CUDA memory" win
