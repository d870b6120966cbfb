// NCCL in a build without CUDA: nothing to load, every communicator refused, every
// collective an error. Callers reach these only through a refusal they ignored.
#include "coll/nccl.h"

namespace mpiacc {

namespace {
constexpr const char *kNoCuda = "NCCL needs CUDA, which this build of MPI-ACC lacks";

int refuse(std::string *why) {
    *why = kNoCuda;
    return MPI_ERR_UNSUPPORTED_OPERATION;
}
}  // namespace

class NcclComm {};

bool nccl_available(std::string *why) {
    *why = kNoCuda;
    return false;
}
int nccl_version() { return 0; }
std::string nccl_status() { return "not built (needs CUDA)"; }

NcclComm *nccl_comm_for(MPI_Comm, std::string *why) {
    *why = kNoCuda;
    return nullptr;
}
int nccl_comm_size(const NcclComm *) { return 0; }
int nccl_comm_device(const NcclComm *) { return -1; }

int nccl_run(NcclComm *, void *, const std::function<int(void *)> &, std::string *why) { return refuse(why); }

int nccl_allreduce(NcclComm *, const void *, void *, std::size_t, const NcclReduction &, void *, std::string *why) {
    return refuse(why);
}
int nccl_bcast(NcclComm *, void *, std::size_t, NcclType, int, void *, std::string *why) { return refuse(why); }
int nccl_reduce(NcclComm *, const void *, void *, std::size_t, const NcclReduction &, int, void *, std::string *why) {
    return refuse(why);
}
int nccl_allgather(NcclComm *, const void *, void *, std::size_t, NcclType, void *, std::string *why) {
    return refuse(why);
}
int nccl_reduce_scatter_block(NcclComm *, const void *, void *, std::size_t, const NcclReduction &, void *,
                              std::string *why) {
    return refuse(why);
}
int nccl_alltoall(NcclComm *, const void *, void *, std::size_t, NcclType, void *, std::string *why) {
    return refuse(why);
}

}  // namespace mpiacc
