// Collectives on CUDA buffers through NCCL. libnccl.so.2 is loaded at run time (dlopen,
// no link dependency; MPIACC_TEST_NCCL=0 never loads it), one NCCL communicator is made
// per MPI communicator on first use and cached on it, and the collectives are enqueued on
// the caller's stream. What NCCL cannot serve (an op or type it lacks, ranks sharing a
// GPU, an intercommunicator) is a refusal with a reason, never an error: the caller then
// takes MPI-ACC's own algorithms.
//
// Builds without CUDA answer every question with a refusal (nccl_absent.cc).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <string>

namespace mpiacc {

// NCCL's element types and reduction ops, by their values in NCCL's ABI (ncclDataType_t
// and ncclRedOp_t of nccl.h; the same from NCCL 2.0 to 2.28). Only those MPI types map to:
// NCCL's half, bfloat16 and fp8 have no MPI type.
enum class NcclType : int {
    INT8 = 0,
    UINT8 = 1,
    INT32 = 2,
    UINT32 = 3,
    INT64 = 4,
    UINT64 = 5,
    FLOAT32 = 7,
    FLOAT64 = 8
};
enum class NcclOp : int { SUM = 0, PROD = 1, MAX = 2, MIN = 3 };

// Bytes in one element of `type`.
std::size_t nccl_type_size(NcclType type);

// What NCCL computes for one MPI (op, type) pair.
struct NcclReduction {
    NcclOp op = NcclOp::SUM;
    NcclType type = NcclType::INT8;
};

// Whether NCCL can compute `op` on `type` (MPI_SUM, MPI_PROD, MPI_MAX and MPI_MIN on the
// 8-, 32- and 64-bit integers, float and double, tagged duplicates included): true with
// *out set, or false with *why naming the pair and what NCCL lacks (logical and bitwise
// ops, MINLOC/MAXLOC, complex and 16-bit types, user ops, derived types, pairs MPI does
// not define). Never an error; needs MPI initialised (it reads type envelopes).
bool nccl_reduction(MPI_Op op, MPI_Datatype type, NcclReduction *out, std::string *why);

// Loads libnccl.so.2 on the first call (once per process; thread-safe) and says whether
// it is usable here: false with *why when MPIACC_TEST_NCCL=0, CUDA is not built, the
// library is missing, or it lacks a function used here. Local: ranks may differ, which
// nccl_comm_for settles.
bool nccl_available(std::string *why);
// The loaded library's version as NCCL numbers it (2.28.9 is 22809); 0 when not loaded.
int nccl_version();
// One line for mpiacc_info: "loaded libnccl.so.2, version 2.28.9", or why it is not.
std::string nccl_status();

// An NCCL communicator standing for one MPI communicator (opaque; owned by the cache).
class NcclComm;

// The NCCL communicator of `comm`, made on the first call and cached on `comm` (an
// attribute: MPI_Comm_free destroys it, MPI_Finalize destroys those still alive), or null
// with *why when NCCL cannot serve `comm`. Collective: every rank of `comm` calls it, in
// the same order with respect to other collectives on `comm`; it blocks on the first
// call only (MPICH's nonblocking allgather and broadcast, waited for with MPI-ACC's
// progress, after any queued collective on `comm`; then ncclCommInitRank). The answer,
// success or refusal, is the same on every rank and is cached too. Refused: an
// intercommunicator, NCCL not available on some rank or in different versions, a rank
// without a CUDA device, or two ranks on one GPU ("ranks 0 and 1 share GPU 0000:41:00.0:
// NCCL takes one rank per GPU"). The NCCL communicator uses the CUDA device current at
// the first call.
NcclComm *nccl_comm_for(MPI_Comm comm, std::string *why);
// Ranks of the MPI communicator it stands for (ranks are the same in both).
int nccl_comm_size(const NcclComm *nc);
// The CUDA device it runs on (the buffers handed to it must be that device's memory).
int nccl_comm_device(const NcclComm *nc);

// The collectives, enqueued on `stream` (a cudaStream_t; null: the legacy default stream)
// and not waited for: the caller records an event after them. Counts are elements of the
// NCCL type; buffers are device memory of the communicator's GPU. MPI_SUCCESS, or an MPI
// error class (MPI_ERR_ARG for arguments NCCL rejects, MPI_ERR_OTHER otherwise) with *why
// naming the NCCL function and NCCL's error text. MPI_IN_PLACE is taken as `sendbuf`
// where MPI allows it, with MPI's meaning.

// One blocking collective: `enqueue(stream)` on the communicator's own stream, after the
// work on `user_stream` (the buffers' MPIX_ACC_STREAM; null: none beyond the legacy
// default stream's), then waits for it. MPI_SUCCESS or enqueue's error, or MPI_ERR_OTHER
// with *why when the GPU reports a failure.
int nccl_run(NcclComm *nc, void *user_stream, const std::function<int(void *stream)> &enqueue, std::string *why);

// recvbuf = op over ranks of sendbuf (in place: sendbuf == recvbuf or MPI_IN_PLACE).
int nccl_allreduce(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t count, const NcclReduction &red,
                   void *stream, std::string *why);
// buf of `root` to every rank's buf.
int nccl_bcast(NcclComm *nc, void *buf, std::size_t count, NcclType type, int root, void *stream, std::string *why);
// root's recvbuf = op over ranks of sendbuf (recvbuf is ignored elsewhere; at the root
// MPI_IN_PLACE or sendbuf == recvbuf reduces in place; MPI_IN_PLACE elsewhere is
// MPI_ERR_BUFFER, nothing enqueued).
int nccl_reduce(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t count, const NcclReduction &red, int root,
                void *stream, std::string *why);
// recvbuf = every rank's `sendcount` elements in rank order (MPI_IN_PLACE: this rank's
// block is already in place in recvbuf).
int nccl_allgather(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t sendcount, NcclType type, void *stream,
                   std::string *why);
// recvbuf = block `rank` (recvcount elements) of op over ranks of sendbuf (size *
// recvcount elements). MPI_IN_PLACE: the input is recvbuf, and the result lands at its
// start, as MPI_Reduce_scatter_block defines.
int nccl_reduce_scatter_block(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t recvcount,
                              const NcclReduction &red, void *stream, std::string *why);
// Block j (count elements) of sendbuf to rank j, block i of recvbuf from rank i: one
// ncclSend and one ncclRecv per rank in a group. MPI_IN_PLACE is refused
// (MPI_ERR_UNSUPPORTED_OPERATION, nothing enqueued): a send would read what a receive
// overwrites.
int nccl_alltoall(NcclComm *nc, const void *sendbuf, void *recvbuf, std::size_t count, NcclType type, void *stream,
                  std::string *why);

}  // namespace mpiacc
