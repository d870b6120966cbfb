/* The NCCL backend with two ranks on one GPU (both on device 0, whatever the machine
 * has): nccl_comm_for(MPI_COMM_WORLD) refuses on every rank with the same reason, naming
 * both ranks and the GPU's PCI bus id, before NCCL is asked (NCCL fails or aborts on
 * two ranks of a communicator on one GPU); the refusal is cached, so that a second call
 * needs no other rank; a duplicate is refused alike; and each rank alone (a one-rank
 * communicator, a GPU of its own in NCCL's eyes) is served and computes. Skips by name
 * without a CUDA device ("no CUDA device") or without libnccl.so.2.
 * MPIACC-TEST-RANKS: 2 */
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "nccl_util.h"

namespace {

using mpiacc::NcclComm;

std::string shared_reason() {
    char bus[32] = "";
    CK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
    return std::string("ranks 0 and 1 share GPU ") + bus + ": NCCL takes one rank per GPU";
}

void world_is_refused() {
    const std::string want = shared_reason();
    MT_CASE("nccl_comm_for_world_refuses_two_ranks_on_one_gpu_alike_on_every_rank") {
        std::string why;
        NcclComm *nc = mpiacc::nccl_comm_for(MPI_COMM_WORLD, &why);
        MT_CHECK(nc == nullptr, "MPI_COMM_WORLD is served");
        MT_CHECK(why == want, "the reason is \"%s\", expected \"%s\"", why.c_str(), want.c_str());
        MT_CHECK(nccl_same_on_every_rank(why, MPI_COMM_WORLD), "the ranks give different reasons");
    }
    MT_CASE("the_refusal_is_cached_and_a_second_call_needs_no_other_rank") {
        // Rank 1 does not call: a second collective check on rank 0 would hang (watchdog).
        if (mt_rank == 0) {
            std::string why;
            MT_CHECK(mpiacc::nccl_comm_for(MPI_COMM_WORLD, &why) == nullptr, "served the second time");
            MT_CHECK(why == want, "the second reason is \"%s\"", why.c_str());
        }
    }
    MT_CASE("a_duplicate_of_world_is_refused_alike") {
        MPI_Comm dup = MPI_COMM_NULL;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        std::string why;
        MT_CHECK(mpiacc::nccl_comm_for(dup, &why) == nullptr, "the duplicate is served");
        MT_CHECK(why == want, "the reason is \"%s\"", why.c_str());
        MT_CHECK(nccl_same_on_every_rank(why, MPI_COMM_WORLD), "the ranks give different reasons");
        MPI_Comm_free(&dup);
    }
}

void each_rank_alone_is_served() {
    MT_CASE("each_rank_alone_on_the_shared_gpu_is_served_and_computes") {
        for (int round = 0; round < 2; ++round) {  // the second after MPI_Comm_free destroyed the first
            MPI_Comm alone = MPI_COMM_NULL;
            MPI_Comm_split(MPI_COMM_WORLD, mt_rank, 0, &alone);
            std::string why;
            NcclComm *nc = mpiacc::nccl_comm_for(alone, &why);
            MT_CHECK(nc != nullptr, "round %d: refused: %s", round, why.c_str());
            if (nc) {
                const size_t count = 4099;
                std::vector<unsigned char> want(count * 8);
                for (size_t i = 0; i < count; ++i) {
                    double d = static_cast<double>(i) * 0.5 + mt_rank;
                    memcpy(&want[i * 8], &d, 8);
                }
                DeviceBuffer buf(want.size());
                buf.upload(want);
                std::string err;
                mpiacc::NcclReduction sum;
                sum.type = mpiacc::NcclType::FLOAT64;
                int rc = mpiacc::nccl_allreduce(nc, MPI_IN_PLACE, buf.get(), count, sum, nullptr, &err);
                MT_CHECK(rc == MPI_SUCCESS, "nccl_allreduce: %d: %s", rc, err.c_str());
                CK(cudaDeviceSynchronize());
                NCCL_CHECK_BYTES(buf.download(), 0, want, want.size(), "allreduce of one rank in place");
            }
            MPI_Comm_free(&alone);
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const char *names[] = {"nccl_comm_for_world_refuses_two_ranks_on_one_gpu_alike_on_every_rank",
                           "the_refusal_is_cached_and_a_second_call_needs_no_other_rank",
                           "a_duplicate_of_world_is_refused_alike",
                           "each_rank_alone_on_the_shared_gpu_is_served_and_computes"};
    std::string skip = mt_size == 2 ? nccl_skip_reason() : "needs exactly 2 ranks";
    if (!skip.empty()) {
        for (const char *name : names) mt_skip(name, skip.c_str());
        return mt_finalize();
    }
    CK(cudaSetDevice(0));  // both ranks, on purpose
    CK(cudaFree(nullptr));
    printf("# %s\n", mpiacc::nccl_status().c_str());
    gpu_arm("the shared-GPU cases", 120);
    world_is_refused();
    each_rank_alone_is_served();
    alarm(0);
    return mt_finalize();
}
