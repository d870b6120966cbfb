#!/bin/sh
# The part of test/user/rxe_vm.sh that runs inside the soft-RoCE VM (maint/rxe-vm), in
# the project directory. Each part prints "== NAME" before its output and
# "rxe-vm: NAME exit RC in S s" after, so one part failing leaves the others' cases
# standing; rxe_vm.sh reads those lines. Arguments: the MPI test programs to run with two
# ranks on two hosts ($MPIEXEC, from maint/rxe-vm), each as NAME:IB, test/mpi/NAME with
# MPIACC_TEST_IB=IB (auto, on: the verbs netmod; off: the mpi netmod); its part is
# "mpi/NAME ib=IB".
ms() { echo $(($(date +%s%N) / 1000000)); }
part() { # name command...
  name=$1
  shift
  echo "== $name"
  t0=$(ms)
  "$@"
  rc=$?
  t=$(($(ms) - t0))
  echo "rxe-vm: $name exit $rc in $((t / 1000)).$((t % 1000 / 100)) s"
}

part self-test /usr/local/bin/rxe-selftest
if [ -x test/netmod/rdma_ports ] && [ -x test/netmod/rc_write ]; then
  part rdma_ports test/netmod/rdma_ports
  part rc_write timeout 300 test/netmod/rc_write
fi
# MPI-ACC itself: the library loads (the CUDA runtime with no driver, MPICH, PoCL) and
# lists the RDMA ports; then MPI programs across the two hosts, OpenCL on PoCL.
[ -e .libs/libmpiacc.so ] || exit 0
part mpiacc_info timeout 60 ./mpiacc_info --config
part hostnames timeout 60 "$MPIEXEC" -n 2 hostname
# Both hosts see both rxe devices: rank 0 (node0) takes rxe0 and rank 1 (node1) rxe1, so
# the verbs traffic crosses the veth pair.
export MPIACC_OPENCL_PLATFORM=Portable MPIACC_TEST_TIMEOUT=120 MPIACC_TEST_IB_DEVICES=rxe0,rxe1
for run in "$@"; do
  t=${run%%:*}
  ib=${run#*:}
  [ -x "test/mpi/$t" ] && MPIACC_TEST_IB=$ib part "mpi/$t ib=$ib" test/run-test "test/mpi/$t"
done
exit 0
