/* Task 0 of bench/contention: one round trip of a device buffer between the two ranks, in
 * four forms.
 *   mpiacc         MPI_Send/MPI_Recv of the device buffers through MPI-ACC (MPI_BYTE tagged
 *                  MPIX_ACC_BUF_CUDA): CUDA IPC on one node, or its pipeline with MPIACC_IPC=0
 *   mpiacc-stream  the same with MPIX_ACC_STREAM naming task 0's own idle stream, so that
 *                  MPI-ACC orders the buffer after that stream instead of the default streams
 *   staged         by hand: cudaMemcpy to pinned memory, PMPI_Send; PMPI_Recv, cudaMemcpy
 *                  back (the legacy default stream, as a user writes it)
 *   pipeline       by hand: chunks of --chunk bytes, cudaMemcpyAsync on task 0's stream
 *                  through two pinned buffers (double buffering), PMPI_Isend/PMPI_Irecv
 *                  per chunk
 * The hand forms call PMPI, as the MPI of host buffers: MPI-ACC adds nothing to them. */
#include <mpiacc.h>
#include <stdint.h>
#include <string.h>

#include "contention_parts.h"

const char *const task0_names[TASK0_CONFIGS] = {"mpiacc", "mpiacc-stream", "staged", "pipeline"};

static size_t chunk_bytes(const Bench *b, long k) {
    const size_t off = (size_t)k * (size_t)b->o.chunk, n = (size_t)b->o.size;
    return n - off < (size_t)b->o.chunk ? n - off : (size_t)b->o.chunk;
}

static long chunk_count(const Bench *b) { return (b->o.size + b->o.chunk - 1) / b->o.chunk; }

/* ------------------------------------------------------------------ MPI-ACC */

static void mpiacc_send(Bench *b, const char *buf, MPI_Datatype type) {
    CHECK_MPI(MPI_Send(buf, (int)b->o.size, type, b->peer, TAG_DATA, MPI_COMM_WORLD));
}

static void mpiacc_recv(Bench *b, char *buf, MPI_Datatype type) {
    CHECK_MPI(MPI_Recv(buf, (int)b->o.size, type, b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

/* ------------------------------------------------------------------ staging by hand */

static void staged_send(Bench *b, const char *buf) {
    CHECK_CUDA(cudaMemcpy(b->pinned, buf, (size_t)b->o.size, cudaMemcpyDeviceToHost));
    CHECK_MPI(PMPI_Send(b->pinned, (int)b->o.size, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD));
}

static void staged_recv(Bench *b, char *buf) {
    CHECK_MPI(PMPI_Recv(b->pinned, (int)b->o.size, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_CUDA(cudaMemcpy(buf, b->pinned, (size_t)b->o.size, cudaMemcpyHostToDevice));
}

/* ------------------------------------------------------------------ a pipeline by hand */

/* The copy of chunk k + 1 runs while chunk k is sent; a buffer is copied into again once
 * the send that read it has completed. */
static void pipeline_send(Bench *b, const char *buf) {
    const long n = chunk_count(b);
    MPI_Request sent[PIPE_SLOTS] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    for (long k = 0; k <= n; k++) {
        if (k < n) {
            const int s = (int)(k % PIPE_SLOTS);
            CHECK_MPI(PMPI_Wait(&sent[s], MPI_STATUS_IGNORE));
            CHECK_CUDA(cudaMemcpyAsync(b->slot[s], buf + (size_t)k * (size_t)b->o.chunk, chunk_bytes(b, k),
                                       cudaMemcpyDeviceToHost, b->stream));
            CHECK_CUDA(cudaEventRecord(b->slot_ready[s], b->stream));
        }
        if (k >= 1) {
            const int s = (int)((k - 1) % PIPE_SLOTS);
            CHECK_CUDA(cudaEventSynchronize(b->slot_ready[s]));
            CHECK_MPI(PMPI_Isend(b->slot[s], (int)chunk_bytes(b, k - 1), MPI_BYTE, b->peer, TAG_CHUNK, MPI_COMM_WORLD,
                                 &sent[s]));
        }
    }
    for (int s = 0; s < PIPE_SLOTS; s++) CHECK_MPI(PMPI_Wait(&sent[s], MPI_STATUS_IGNORE));
}

/* Chunk k + 1 arrives while chunk k is copied to the device; a buffer takes the next
 * chunk once the copy that read it has completed. */
static void pipeline_recv(Bench *b, char *buf) {
    const long n = chunk_count(b);
    MPI_Request got[PIPE_SLOTS] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    for (long k = 0; k < n && k < PIPE_SLOTS; k++)
        CHECK_MPI(
            PMPI_Irecv(b->slot[k], (int)chunk_bytes(b, k), MPI_BYTE, b->peer, TAG_CHUNK, MPI_COMM_WORLD, &got[k]));
    for (long k = 0; k < n; k++) {
        const int s = (int)(k % PIPE_SLOTS);
        CHECK_MPI(PMPI_Wait(&got[s], MPI_STATUS_IGNORE));
        CHECK_CUDA(cudaMemcpyAsync(buf + (size_t)k * (size_t)b->o.chunk, b->slot[s], chunk_bytes(b, k),
                                   cudaMemcpyHostToDevice, b->stream));
        CHECK_CUDA(cudaEventRecord(b->slot_ready[s], b->stream));
        if (k + PIPE_SLOTS < n) {
            CHECK_CUDA(cudaEventSynchronize(b->slot_ready[s]));
            CHECK_MPI(PMPI_Irecv(b->slot[s], (int)chunk_bytes(b, k + PIPE_SLOTS), MPI_BYTE, b->peer, TAG_CHUNK,
                                 MPI_COMM_WORLD, &got[s]));
        }
    }
    CHECK_CUDA(cudaStreamSynchronize(b->stream));
}

/* ------------------------------------------------------------------ one round trip */

static void send_message(Bench *b, Task0Kind kind, const char *buf) {
    switch (kind) {
        case TASK0_MPIACC: mpiacc_send(b, buf, b->cuda_bytes); break;
        case TASK0_MPIACC_STREAM: mpiacc_send(b, buf, b->stream_bytes); break;
        case TASK0_STAGED: staged_send(b, buf); break;
        case TASK0_PIPELINE: pipeline_send(b, buf); break;
        default: break;
    }
}

static void recv_message(Bench *b, Task0Kind kind, char *buf) {
    switch (kind) {
        case TASK0_MPIACC: mpiacc_recv(b, buf, b->cuda_bytes); break;
        case TASK0_MPIACC_STREAM: mpiacc_recv(b, buf, b->stream_bytes); break;
        case TASK0_STAGED: staged_recv(b, buf); break;
        case TASK0_PIPELINE: pipeline_recv(b, buf); break;
        default: break;
    }
}

void task0_round_trip(Bench *b, Task0Kind kind) {
    if (b->rank == 0) {
        send_message(b, kind, b->dev_send);
        recv_message(b, kind, b->dev_recv);
    } else {
        recv_message(b, kind, b->dev_recv);
        send_message(b, kind, b->dev_recv);
    }
}

/* ------------------------------------------------------------------ setup */

void task0_setup(Bench *b) {
    const size_t n = (size_t)b->o.size;
    CHECK_CUDA(cudaMalloc((void **)&b->dev_send, n));
    CHECK_CUDA(cudaMalloc((void **)&b->dev_recv, n));
    CHECK_CUDA(cudaMallocHost((void **)&b->pinned, n));
    CHECK_CUDA(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    for (int s = 0; s < PIPE_SLOTS; s++) {
        CHECK_CUDA(cudaMallocHost((void **)&b->slot[s], (size_t)b->o.chunk));
        CHECK_CUDA(cudaEventCreateWithFlags(&b->slot_ready[s], cudaEventDisableTiming));
    }
    CHECK_MPI(MPI_Type_dup(MPI_BYTE, &b->cuda_bytes));
    CHECK_MPI(MPI_Type_set_attr(b->cuda_bytes, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA));
    CHECK_MPI(MPI_Type_dup(MPI_BYTE, &b->stream_bytes));
    CHECK_MPI(MPI_Type_set_attr(b->stream_bytes, MPIX_ACC_BUF_TYPE, (void *)(intptr_t)MPIX_ACC_BUF_CUDA));
    CHECK_MPI(MPI_Type_set_attr(b->stream_bytes, MPIX_ACC_STREAM, (void *)b->stream));
}

void task0_teardown(Bench *b) {
    CHECK_MPI(MPI_Type_free(&b->stream_bytes));
    CHECK_MPI(MPI_Type_free(&b->cuda_bytes));
    for (int s = 0; s < PIPE_SLOTS; s++) {
        CHECK_CUDA(cudaEventDestroy(b->slot_ready[s]));
        CHECK_CUDA(cudaFreeHost(b->slot[s]));
    }
    CHECK_CUDA(cudaStreamDestroy(b->stream));
    CHECK_CUDA(cudaFreeHost(b->pinned));
    CHECK_CUDA(cudaFree(b->dev_recv));
    CHECK_CUDA(cudaFree(b->dev_send));
}
