#!/bin/sh
# The soft-RoCE rig (maint/rxe-vm): boots the VM and runs its self-test, which checks
# that both rxe devices are there and active, then moves verbs traffic between the two
# namespaces (ibv_rc_pingpong, ib_write_bw). One case per step, from the step lines the
# VM prints, and one for the VM's exit status. Runs when MPIACC_RXE_VM=1 (root, network
# to the Debian mirror on the first run: CI sets it); otherwise one case skips, by name.
# TAP output.
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
steps="ibv_devices ibv_rc_pingpong ib_write_bw"
if [ "${MPIACC_RXE_VM:-0}" != 1 ]; then
  echo "1..1"
  echo "ok 1 - rxe_vm_self_test # SKIP set MPIACC_RXE_VM=1 to run it (needs root, QEMU and a Debian mirror)"
  exit 0
fi
set -- $steps
n=$(($# + 2))
echo "1..$n"
log=$(mktemp "${TMPDIR:-/tmp}/mpiacc-rxe-vm-test.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
"$srcdir/maint/rxe-vm" >"$log" 2>&1
rc=$?
i=0
for s in $steps; do
  i=$((i + 1))
  if grep -q "^rxe-vm: step $s ok\$" "$log"; then
    echo "ok $i - rxe_vm_$s"
  else
    echo "not ok $i - rxe_vm_$s"
    grep -A 20 "^rxe-vm: step $s " "$log" | sed 's/^/# /'
  fi
done
i=$((i + 1))
summary=$(grep '^rxe-vm: self-test\|^rxe-vm: boot to power-off\|^rxe-vm: image built' "$log")
if [ "$rc" = 0 ] && grep -q '^rxe-vm: self-test passed' "$log"; then
  echo "ok $i - rxe_vm_self_test_status"
  echo "$summary" | sed 's/^/# /'
else
  echo "not ok $i - rxe_vm_self_test_status"
  echo "# exit $rc"
  tail -n 20 "$log" | sed 's/^/# /'
fi

# The RDMA ports as MPI-ACC lists them (src/netmod/ib/devices.cc, as mpiacc_info
# --config does), from a program built on the host without the library's CUDA runtime.
i=$((i + 1))
ports="$srcdir/test/netmod/rdma_ports"
if [ ! -x "$ports" ]; then
  echo "ok $i - rxe_vm_lists_both_rxe_ports_active_with_gids # SKIP test/netmod/rdma_ports not built (configure found no libibverbs)"
else
  "$srcdir/maint/rxe-vm" test/netmod/rdma_ports >"$log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && grep -q '^RDMA: rxe0 port 1: ACTIVE, Ethernet, MTU [0-9]*, GID ' "$log" &&
    grep -q '^RDMA: rxe1 port 1: ACTIVE, Ethernet, MTU [0-9]*, GID ' "$log"; then
    echo "ok $i - rxe_vm_lists_both_rxe_ports_active_with_gids"
    grep '^RDMA: ' "$log" | sed 's/^/# /'
  else
    echo "not ok $i - rxe_vm_lists_both_rxe_ports_active_with_gids"
    echo "# exit $rc"
    tail -n 20 "$log" | sed 's/^/# /'
  fi
fi
