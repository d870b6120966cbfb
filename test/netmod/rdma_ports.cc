// The RDMA ports rdma-core's verbs see, printed as `mpiacc_info --config` prints them, by
// a program that needs no device runtime: test/user/rxe_vm.sh runs it inside the
// soft-RoCE VM, which has no CUDA, and checks that both rxe devices are listed ACTIVE.
#include <cstdio>

#include "netmod/ib/devices.h"

int main() {
    for (const std::string &l : mpiacc::rdma_port_lines()) std::printf("RDMA: %s\n", l.c_str());
    return 0;
}
