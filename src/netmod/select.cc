// Which netmod the protocol talks to: `mpi` everywhere, with `ib` in front of it where
// verbs is built in and not turned off. `ib` decides peer by peer and hands `mpi`
// everything it does not place itself, so the protocol sees one table either way.
#include "config.h"
#include "netmod/netmod.h"

namespace mpiacc {

namespace {

struct Selected {
    Netmod *in_use = nullptr;
    std::unique_ptr<Netmod> ib;
    std::string choice = "mpi";
};

Selected &selected() {
    static Selected s;
    return s;
}

}  // namespace

int initialize_netmod(MPI_Comm private_comm, const NetmodOptions &options) {
    Selected &s = selected();
    Netmod &mpi = mpi_netmod(private_comm);
    s.in_use = &mpi;
    s.choice = "mpi";
#ifdef MPIACC_HAVE_IB
    if (options.ib_policy != "off") {
        s.ib = make_ib_netmod(mpi, private_comm, options);
        s.in_use = s.ib.get();
    }
#else
    (void)private_comm;
#endif
    s.choice = describe_netmod_choice(options.ib_policy);
    return MPI_SUCCESS;
}

void finalize_netmod() {
    Selected &s = selected();
    s.ib.reset();  // queue pairs, registrations and the device go before MPI does
    s.in_use = &mpi_netmod(MPI_COMM_NULL);
}

Netmod &netmod() {
    Selected &s = selected();
    return s.in_use ? *s.in_use : mpi_netmod(MPI_COMM_NULL);
}

std::string netmod_choice() { return selected().choice; }

std::string describe_netmod_choice(const std::string &ib_policy) {
#ifdef MPIACC_HAVE_IB
    if (ib_policy == "off") return "mpi (the verbs netmod is off: MPIACC_TEST_IB=off)";
    if (ib_policy == "on") return "ib: chunks as RDMA writes to every peer a device reaches, else mpi";
    return "ib: chunks as RDMA writes to peers on other nodes a device reaches, else mpi";
#else
    (void)ib_policy;
    return "mpi (built without verbs)";
#endif
}

}  // namespace mpiacc
