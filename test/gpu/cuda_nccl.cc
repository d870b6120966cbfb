/* The NCCL backend (src/coll/nccl.h) on one rank: libnccl.so.2 loads, nccl_comm_for
 * serves MPI_COMM_SELF and a one-rank duplicate of MPI_COMM_WORLD (each its own NCCL
 * communicator, cached, remade after MPI_Comm_free), and every collective it enqueues
 * leaves the right bytes, in place and not, with the guard bytes after each output
 * untouched. NCCL's own errors come back as MPI classes naming the NCCL call. Skips by
 * name without a CUDA device ("no CUDA device") or without libnccl.so.2.
 * MPIACC-TEST-RANKS: 1 */
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "nccl_util.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
// The values nccl.h declares are the ones src/coll/nccl.h passes to NCCL.
static_assert(static_cast<int>(mpiacc::NcclType::INT8) == ncclInt8 &&
                  static_cast<int>(mpiacc::NcclType::UINT8) == ncclUint8 &&
                  static_cast<int>(mpiacc::NcclType::INT32) == ncclInt32 &&
                  static_cast<int>(mpiacc::NcclType::UINT32) == ncclUint32 &&
                  static_cast<int>(mpiacc::NcclType::INT64) == ncclInt64 &&
                  static_cast<int>(mpiacc::NcclType::UINT64) == ncclUint64 &&
                  static_cast<int>(mpiacc::NcclType::FLOAT32) == ncclFloat32 &&
                  static_cast<int>(mpiacc::NcclType::FLOAT64) == ncclFloat64,
              "NcclType differs from nccl.h's ncclDataType_t");
static_assert(static_cast<int>(mpiacc::NcclOp::SUM) == ncclSum && static_cast<int>(mpiacc::NcclOp::PROD) == ncclProd &&
                  static_cast<int>(mpiacc::NcclOp::MAX) == ncclMax && static_cast<int>(mpiacc::NcclOp::MIN) == ncclMin,
              "NcclOp differs from nccl.h's ncclRedOp_t");
#endif

namespace {

using mpiacc::NcclComm;
using mpiacc::NcclOp;
using mpiacc::NcclReduction;
using mpiacc::NcclType;

constexpr size_t kCount = (1 << 18) + 3;  // elements: not a multiple of anything NCCL likes
cudaStream_t stream;
NcclComm *self_nc;

void finish(const char *what, int rc, const std::string &why) {
    MT_CHECK(rc == MPI_SUCCESS, "%s returned %d: %s", what, rc, why.c_str());
    CK(cudaStreamSynchronize(stream));
}

// Values of the element type as bytes: real numbers for float and double.
std::vector<unsigned char> values(NcclType t, size_t count, uint64_t seed) {
    std::vector<unsigned char> v = nccl_pattern(count * mpiacc::nccl_type_size(t), seed);
    if (t == NcclType::FLOAT32)
        for (size_t i = 0; i < count; ++i) {
            float f = static_cast<float>(i % 1000) * 0.25f - 7.0f;
            memcpy(&v[i * 4], &f, 4);
        }
    if (t == NcclType::FLOAT64)
        for (size_t i = 0; i < count; ++i) {
            double d = static_cast<double>(i) * 0.125 - 11.0;
            memcpy(&v[i * 8], &d, 8);
        }
    return v;
}

void comms() {
    MT_CASE("nccl_comm_for_serves_mpi_comm_self_and_caches_it") {
        std::string why;
        NcclComm *again = mpiacc::nccl_comm_for(MPI_COMM_SELF, &why);
        MT_CHECK(self_nc && again == self_nc, "MPI_COMM_SELF: %p then %p (%s)", static_cast<void *>(self_nc),
                 static_cast<void *>(again), why.c_str());
        MT_CHECK(mpiacc::nccl_comm_size(self_nc) == 1, "size %d", mpiacc::nccl_comm_size(self_nc));
        MT_CHECK(mpiacc::nccl_comm_device(self_nc) == 0, "on device %d, not the current 0",
                 mpiacc::nccl_comm_device(self_nc));
    }
    MT_CASE("nccl_comm_for_serves_a_one_rank_duplicate_of_world_and_remakes_it_after_mpi_comm_free") {
        for (int round = 0; round < 2; ++round) {
            MPI_Comm dup = MPI_COMM_NULL;
            MPI_Comm_dup(MPI_COMM_WORLD, &dup);
            std::string why;
            NcclComm *nc = mpiacc::nccl_comm_for(dup, &why);
            MT_CHECK(nc && nc != self_nc, "round %d: %p (%s)", round, static_cast<void *>(nc), why.c_str());
            if (nc) {
                DeviceBuffer in(64), out(64);
                std::vector<unsigned char> want = nccl_pattern(64, 40 + round);
                in.upload(want);
                NcclReduction sum;
                sum.type = NcclType::UINT8;
                finish("nccl_allreduce", mpiacc::nccl_allreduce(nc, in.get(), out.get(), 64, sum, stream, &why), why);
                NCCL_CHECK_BYTES(out.download(), 0, want, 64, "allreduce on the duplicate");
            }
            MPI_Comm_free(&dup);  // destroys its NCCL communicator
        }
    }
}

void allreduce() {
    const struct {
        NcclOp op;
        NcclType type;
        const char *name;
    } cases[] = {{NcclOp::SUM, NcclType::FLOAT32, "SUM float"},  {NcclOp::PROD, NcclType::INT32, "PROD int32"},
                 {NcclOp::MAX, NcclType::INT64, "MAX int64"},    {NcclOp::MIN, NcclType::UINT8, "MIN uint8"},
                 {NcclOp::SUM, NcclType::FLOAT64, "SUM double"}, {NcclOp::MAX, NcclType::UINT64, "MAX uint64"}};
    MT_CASE("nccl_allreduce_out_of_place_and_in_place_leaves_the_bytes_of_the_one_rank") {
        for (const auto &c : cases)
            for (int in_place = 0; in_place < 3; ++in_place) {  // apart, MPI_IN_PLACE, sendbuf == recvbuf
                const size_t bytes = kCount * mpiacc::nccl_type_size(c.type);
                const std::vector<unsigned char> want = values(c.type, kCount, 7);
                DeviceBuffer send(bytes), recv(bytes);
                (in_place ? recv : send).upload(want);
                NcclReduction red;
                red.op = c.op;
                red.type = c.type;
                const void *sendbuf = in_place == 0 ? send.get() : in_place == 1 ? MPI_IN_PLACE : recv.get();
                std::string why;
                finish(c.name, mpiacc::nccl_allreduce(self_nc, sendbuf, recv.get(), kCount, red, stream, &why), why);
                std::string what = std::string("allreduce ") + c.name + (in_place ? " in place" : "");
                NCCL_CHECK_BYTES(recv.download(), 0, want, bytes, what.c_str());
            }
    }
}

void rooted_and_gathers() {
    const size_t bytes = kCount * 4;
    const std::vector<unsigned char> want = values(NcclType::UINT32, kCount, 11);
    MT_CASE("nccl_bcast_from_the_root_leaves_its_bytes") {
        DeviceBuffer buf(bytes);
        buf.upload(want);
        std::string why;
        finish("nccl_bcast", mpiacc::nccl_bcast(self_nc, buf.get(), kCount, NcclType::UINT32, 0, stream, &why), why);
        NCCL_CHECK_BYTES(buf.download(), 0, want, bytes, "bcast");
    }
    MT_CASE("nccl_reduce_to_the_root_out_of_place_and_in_place") {
        for (int in_place = 0; in_place < 2; ++in_place) {
            DeviceBuffer send(bytes), recv(bytes);
            (in_place ? recv : send).upload(want);
            NcclReduction red;
            red.op = NcclOp::MIN;
            red.type = NcclType::UINT32;
            std::string why;
            finish("nccl_reduce",
                   mpiacc::nccl_reduce(self_nc, in_place ? MPI_IN_PLACE : send.get(), recv.get(), kCount, red, 0,
                                       stream, &why),
                   why);
            NCCL_CHECK_BYTES(recv.download(), 0, want, bytes, in_place ? "reduce in place" : "reduce");
        }
    }
    MT_CASE("nccl_allgather_out_of_place_and_in_place") {
        for (int in_place = 0; in_place < 2; ++in_place) {
            DeviceBuffer send(bytes), recv(bytes);
            (in_place ? recv : send).upload(want);
            std::string why;
            finish("nccl_allgather",
                   mpiacc::nccl_allgather(self_nc, in_place ? MPI_IN_PLACE : send.get(), recv.get(), kCount,
                                          NcclType::UINT32, stream, &why),
                   why);
            NCCL_CHECK_BYTES(recv.download(), 0, want, bytes, in_place ? "allgather in place" : "allgather");
        }
    }
    MT_CASE("nccl_reduce_scatter_block_out_of_place_and_in_place") {
        for (int in_place = 0; in_place < 2; ++in_place) {
            DeviceBuffer send(bytes), recv(bytes);
            (in_place ? recv : send).upload(want);
            NcclReduction red;
            red.op = NcclOp::SUM;
            red.type = NcclType::UINT32;
            std::string why;
            finish("nccl_reduce_scatter_block",
                   mpiacc::nccl_reduce_scatter_block(self_nc, in_place ? MPI_IN_PLACE : send.get(), recv.get(), kCount,
                                                     red, stream, &why),
                   why);
            NCCL_CHECK_BYTES(recv.download(), 0, want, bytes, in_place ? "reduce_scatter in place" : "reduce_scatter");
        }
    }
    MT_CASE("nccl_alltoall_sends_each_block_and_refuses_mpi_in_place") {
        DeviceBuffer send(bytes), recv(bytes);
        send.upload(want);
        std::string why;
        finish("nccl_alltoall",
               mpiacc::nccl_alltoall(self_nc, send.get(), recv.get(), kCount, NcclType::UINT32, stream, &why), why);
        NCCL_CHECK_BYTES(recv.download(), 0, want, bytes, "alltoall");
        DeviceBuffer untouched(bytes);
        int rc = mpiacc::nccl_alltoall(self_nc, MPI_IN_PLACE, untouched.get(), kCount, NcclType::UINT32, stream, &why);
        MT_CHECK(rc == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_IN_PLACE: returned %d", rc);
        MT_CHECK(why.find("MPI_IN_PLACE") != std::string::npos, "MPI_IN_PLACE: \"%s\"", why.c_str());
        CK(cudaStreamSynchronize(stream));
        NCCL_CHECK_BYTES(untouched.download(), 0, std::vector<unsigned char>(bytes, NCCL_SENTINEL), bytes,
                         "alltoall MPI_IN_PLACE");
    }
}

void errors() {
    MT_CASE("an_nccl_error_is_an_mpi_class_naming_the_nccl_call") {
        DeviceBuffer buf(64);
        std::string why;
        int rc = mpiacc::nccl_bcast(self_nc, buf.get(), 64, NcclType::UINT8, 3, stream, &why);  // no rank 3
        MT_CHECK(rc == MPI_ERR_ARG, "root 3 of 1 rank: returned %d (%s)", rc, why.c_str());
        MT_CHECK(why.rfind("ncclBroadcast: ", 0) == 0, "the reason \"%s\" does not name ncclBroadcast", why.c_str());
        CK(cudaStreamSynchronize(stream));
    }
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    const char *names[] = {"nccl_comm_for_serves_mpi_comm_self_and_caches_it",
                           "nccl_comm_for_serves_a_one_rank_duplicate_of_world_and_remakes_it_after_mpi_comm_free",
                           "nccl_allreduce_out_of_place_and_in_place_leaves_the_bytes_of_the_one_rank",
                           "nccl_bcast_from_the_root_leaves_its_bytes",
                           "nccl_reduce_to_the_root_out_of_place_and_in_place",
                           "nccl_allgather_out_of_place_and_in_place",
                           "nccl_reduce_scatter_block_out_of_place_and_in_place",
                           "nccl_alltoall_sends_each_block_and_refuses_mpi_in_place",
                           "an_nccl_error_is_an_mpi_class_naming_the_nccl_call"};
    std::string skip = nccl_skip_reason();
    std::string why;
    if (skip.empty()) {
        CK(cudaSetDevice(0));
        CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        gpu_arm("nccl_comm_for(MPI_COMM_SELF)", 120);
        self_nc = mpiacc::nccl_comm_for(MPI_COMM_SELF, &why);
        alarm(0);
    }
    if (!skip.empty()) {
        for (const char *name : names) mt_skip(name, skip.c_str());
        return mt_finalize();
    }
    if (!self_nc) {  // NCCL loaded and a GPU here: a refusal is a failure
        for (const char *name : names)
            MT_CASE(name) MT_CHECK(0, "nccl_comm_for(MPI_COMM_SELF) refused: %s", why.c_str());
        return mt_finalize();
    }
    printf("# %s\n", mpiacc::nccl_status().c_str());
    gpu_arm("the NCCL cases", 300);
    comms();
    allreduce();
    rooted_and_gathers();
    errors();
    alarm(0);
    CK(cudaStreamDestroy(stream));
    return mt_finalize();  // destroys the NCCL communicator of MPI_COMM_SELF
}
