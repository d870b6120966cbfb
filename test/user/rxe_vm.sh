#!/bin/sh
# The soft-RoCE rig (maint/rxe-vm), in one boot: its self-test, which checks that both
# rxe devices are there and active, then moves verbs traffic between them
# (ibv_rc_pingpong, ib_write_bw); then MPI-ACC's own verbs code, built on the host
# without the library's CUDA runtime: the port list (test/netmod/rdma_ports) and the RC
# connection and RDMA-write layer (test/netmod/rc_write, whose TAP cases are re-emitted
# here, each of which must pass: a skip inside the VM is a failure); then MPI-ACC's library
# in the VM (the CUDA runtime comes from the host, with no GPU or driver): mpiacc_info
# --config lists both rxe ports, and a few MPI programs run with two ranks on two hosts
# (UTS namespaces node0 and node1, MPICH over TCP on the veth pair), host buffers and
# OpenCL buffers on PoCL; p2p_between_nodes proves the ranks saw two nodes. They run with
# the verbs netmod as it chooses by default (auto), forced on (pipeline chunks as RDMA
# writes: p2p_rdma_between_nodes checks the counters, p2p_rdma_fault a wrong rkey) and
# forced off (the mpi netmod carries every chunk). Every case of theirs must pass, none
# skip. The VM's side is test/user/rxe_vm_inside.sh. Runs when
# MPIACC_RXE_VM=1 (root, network to the Debian mirror on the first run: CI sets it);
# otherwise every case skips, by name. TAP output.
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
steps="ibv_devices ibv_rc_pingpong ib_write_bw"
rc_cases="rc_address_round_trips_as_bytes_and_bad_bytes_are_named
rc_gid_choice_prefers_roce_v2_then_global_then_link_local_ipv6
rc_path_mtu_is_the_smaller_of_both_ends
rc_open_of_a_missing_device_says_why
rc_two_processes_connect_through_a_socketpair
rc_two_processes_chunks_arrive_in_order_with_bytes_and_guards
rc_one_process_connects_two_devices_init_rtr_rts
rc_write_refuses_a_post_beyond_max_send_wr
rc_write_chunks_arrive_with_imms_in_order
rc_write_bytes_match_the_pattern_and_guards_are_untouched
rc_layer_refuses_bad_requests_with_messages
rc_write_with_a_wrong_rkey_completes_in_error_with_a_message
rc_queue_pair_refuses_work_after_an_error_completion"
names=""
for s in $steps; do names="$names rxe_vm_$s"; done
names="$names rxe_vm_self_test_status rxe_vm_lists_both_rxe_ports_active_with_gids"
for c in $rc_cases; do names="$names rxe_vm_$c"; done
names="$names rxe_vm_rc_write_exits_cleanly"
# Few, for CI's time: the proof of two nodes (host and cl_mem data), ordering with host
# buffers, every protocol size with cl_mem buffers, every pairing both ways with the
# netmod's counters, and a queue pair failing; as NAME:IB (MPIACC_TEST_IB).
mpi_runs="p2p_rdma_between_nodes:auto
p2p_between_nodes:on p2p_order:on opencl_p2p:on p2p_rdma_between_nodes:on p2p_rdma_fault:on
p2p_between_nodes:off opencl_p2p:off p2p_rdma_between_nodes:off"
# The case of run NAME:IB: auto keeps the name these programs had before the verbs netmod.
run_name() {
  case ${1#*:} in
    auto) echo "rxe_vm_${1%%:*}_across_two_hosts" ;;
    *) echo "rxe_vm_${1%%:*}_across_two_hosts_verbs_${1#*:}" ;;
  esac
}
names="$names rxe_vm_mpiacc_info_loads_and_lists_both_rxe_ports rxe_vm_mpiexec_places_two_ranks_on_two_hosts"
for r in $mpi_runs; do names="$names $(run_name "$r")"; done
set -- $names
echo "1..$#"
if [ "${MPIACC_RXE_VM:-0}" != 1 ]; then
  i=0
  for n in $names; do
    i=$((i + 1))
    echo "ok $i - $n # SKIP set MPIACC_RXE_VM=1 to run it (needs root, QEMU and a Debian mirror)"
  done
  exit 0
fi

ports="test/netmod/rdma_ports"
rc_write="test/netmod/rc_write"
built=yes
[ -x "$srcdir/$ports" ] && [ -x "$srcdir/$rc_write" ] || built=no
lib=yes
[ -e "$srcdir/.libs/libmpiacc.so" ] && [ -x "$srcdir/mpiacc_info" ] || lib=no
log=$(mktemp "${TMPDIR:-/tmp}/mpiacc-rxe-vm-test.XXXXXX") || exit 1
trap 'rm -f "$log" "$log".*' EXIT
# shellcheck disable=SC2086 # one word per program
"$srcdir/maint/rxe-vm" sh test/user/rxe_vm_inside.sh $mpi_runs >"$log" 2>&1
rc=$?
# The output of one part of the VM's run (between its "== NAME" and its exit line).
part_log() { sed -n "\#^== $1\$#,\#^rxe-vm: $1 exit #p" "$log"; }

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
if grep -q '^rxe-vm: self-test exit 0 ' "$log" && grep -q '^rxe-vm: self-test passed' "$log"; then
  echo "ok $i - rxe_vm_self_test_status"
  echo "$summary" | sed 's/^/# /'
else
  echo "not ok $i - rxe_vm_self_test_status"
  echo "# rxe-vm exit $rc"
  tail -n 20 "$log" | sed 's/^/# /'
fi

# The RDMA ports as MPI-ACC lists them (src/netmod/ib/devices.cc, as mpiacc_info
# --config does).
i=$((i + 1))
name=rxe_vm_lists_both_rxe_ports_active_with_gids
if [ $built = no ]; then
  echo "ok $i - $name # SKIP test/netmod not built (configure found no libibverbs)"
else
  part_log rdma_ports >"$log.ports"
  if grep -q '^rxe-vm: rdma_ports exit 0 ' "$log.ports" &&
    grep -q '^RDMA: rxe0 port 1: ACTIVE, Ethernet, MTU [0-9]*, GID ' "$log.ports" &&
    grep -q '^RDMA: rxe1 port 1: ACTIVE, Ethernet, MTU [0-9]*, GID ' "$log.ports"; then
    echo "ok $i - $name"
    grep '^RDMA: ' "$log.ports" | sed 's/^/# /'
  else
    echo "not ok $i - $name"
    grep '^RDMA: \|^rxe-vm: rdma_ports exit' "$log.ports" | sed 's/^/# /'
  fi
fi

# rc_write's own cases, by name, with the comment lines that follow each.
part_log rc_write >"$log.rc"
for c in $rc_cases; do
  i=$((i + 1))
  if [ $built = no ]; then
    echo "ok $i - rxe_vm_$c # SKIP test/netmod not built (configure found no libibverbs)"
    continue
  fi
  line=$(grep -E "^(not )?ok [0-9]+ - $c( |\$)" "$log.rc")
  case $line in
    "ok "*" - $c") echo "ok $i - rxe_vm_$c" ;;
    "") echo "not ok $i - rxe_vm_$c" && echo "# not reported by $rc_write" ;;
    *) echo "not ok $i - rxe_vm_$c" && echo "# $line" ;;
  esac
  awk -v c="$c" '$0 ~ ("^(not )?ok [0-9]+ - " c "( |$)") {on = 1; next} on && /^# [0-9]+ of [0-9]+ failed$/ {on = 0} on && /^#/ {print; next} {on = 0}' \
    "$log.rc"
done
i=$((i + 1))
if [ $built = no ]; then
  echo "ok $i - rxe_vm_rc_write_exits_cleanly # SKIP test/netmod not built (configure found no libibverbs)"
elif grep -q '^rxe-vm: rc_write exit 0 ' "$log.rc" && grep -q '^# 0 of 13 failed$' "$log.rc"; then
  echo "ok $i - rxe_vm_rc_write_exits_cleanly"
  grep '^rxe-vm: boot to power-off' "$log" | sed 's/^/# /'
else
  echo "not ok $i - rxe_vm_rc_write_exits_cleanly"
  grep '^rxe-vm: rc_write exit\|^# [0-9]* of [0-9]* failed' "$log.rc" | sed 's/^/# /'
  tail -n 20 "$log" | sed 's/^/# /'
fi

# MPI-ACC's library in the VM: it loads, and lists both ports as on a real node.
i=$((i + 1))
name=rxe_vm_mpiacc_info_loads_and_lists_both_rxe_ports
part_log mpiacc_info >"$log.info"
if [ $lib = no ]; then
  echo "ok $i - $name # SKIP libmpiacc not built"
elif [ $built = no ]; then
  echo "ok $i - $name # SKIP built without libibverbs (configure found none)"
elif grep -q '^rxe-vm: mpiacc_info exit 0 ' "$log.info" &&
  grep -q '^RDMA: *rxe0 port 1: ACTIVE, Ethernet, MTU [0-9]*, GID ' "$log.info" &&
  grep -q '^RDMA: *rxe1 port 1: ACTIVE, Ethernet, MTU [0-9]*, GID ' "$log.info"; then
  echo "ok $i - $name"
  grep '^accel cuda:\|^RDMA:\|^rxe-vm: mpiacc_info exit' "$log.info" | sed 's/^/# /'
else
  echo "not ok $i - $name"
  sed 's/^/# /' "$log.info" | tail -n 20
fi

# Hydra places rank 0 on node0 and rank 1 on node1.
i=$((i + 1))
name=rxe_vm_mpiexec_places_two_ranks_on_two_hosts
part_log hostnames >"$log.hosts"
if [ $lib = no ]; then
  echo "ok $i - $name # SKIP libmpiacc not built"
elif grep -q '^rxe-vm: hostnames exit 0 ' "$log.hosts" &&
  [ "$(grep -c '^node[01]$' "$log.hosts")" = 2 ] && grep -q '^node0$' "$log.hosts" && grep -q '^node1$' "$log.hosts"; then
  echo "ok $i - $name"
  grep '^rxe-vm: hostnames exit' "$log.hosts" | sed 's/^/# /'
else
  echo "not ok $i - $name"
  sed 's/^/# /' "$log.hosts" | tail -n 20
fi

# The MPI programs: exit 0, every case ok and none skipped (a skip of
# ranks_on_two_hosts_are_two_nodes would mean one node).
for r in $mpi_runs; do
  i=$((i + 1))
  t=${r%%:*}
  part="mpi/$t ib=${r#*:}"
  name=$(run_name "$r")
  part_log "$part" >"$log.mpi"
  passed=$(grep -c '^ok ' "$log.mpi")
  if [ $lib = no ] || [ ! -x "$srcdir/test/mpi/$t" ]; then
    echo "ok $i - $name # SKIP test/mpi/$t not built"
  elif grep -q "^rxe-vm: $part exit 0 " "$log.mpi" && [ "$passed" -gt 0 ] &&
    ! grep -q '^not ok\|^Bail out\|^ok .*# SKIP' "$log.mpi"; then
    echo "ok $i - $name # $passed passed, $(sed -n "s#^rxe-vm: $part exit 0 in ##p" "$log.mpi")"
    grep '^# verbs: \|^# mpi: \|^# rank [01].s ' "$log.mpi" | sed 's/^/# /'
  else
    echo "not ok $i - $name"
    grep -v '^ok [0-9]* - [a-z0-9_]*$' "$log.mpi" | tail -n 20 | sed 's/^/# /'
  fi
done
