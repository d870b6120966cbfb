#!/bin/sh
# Under the default error handler (MPI_ERRORS_ARE_FATAL) a call MPI-ACC refuses aborts the
# job with the user's call, its argument and MPI-ACC's text: not MPICH's
# "Fatal error in PMPI_Comm_call_errhandler: Unsupported file operation". TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..1"
name=refused_call_under_errors_are_fatal_aborts_naming_the_users_call
out=$(timeout -k 10 60 "$MPIEXEC" -n 1 "$top_builddir/test/user/fatal_child" 2>&1)
rc=$?
want="Fatal error on rank 0: MPI_Allreduce(sendbuf): not supported on device buffers: sendbuf is CUDA memory"
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && printf '%s\n' "$out" | grep -qF "$want" &&
  ! printf '%s\n' "$out" | grep -q 'Comm_call_errhandler\|file operation\|returned'; then
  echo "ok 1 - $name"
else
  echo "not ok 1 - $name"
  echo "# exit $rc; expected a line with: $want"
  printf '%s\n' "$out" | sed 's/^/# /' | head -n 20
fi
