/* Helpers of the NCCL backend's GPU tests (cuda_nccl*.cc, C++: they call src/coll/nccl.h):
 * whether the cases can run here, agreed by every rank (a CUDA device, libnccl.so.2),
 * checked CUDA calls that take the job down with a message, a per-case watchdog, device
 * buffers with guard bytes, and the one reduction every case checks. */
#ifndef NCCL_UTIL_H_INCLUDED
#define NCCL_UTIL_H_INCLUDED

#include <cuda_runtime_api.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "coll/nccl.h"
#include "gpu_util.h" /* gpu_die, CK, gpu_arm */

#define NCCL_GUARD GPU_GUARD
#define NCCL_SENTINEL GPU_SENTINEL

/* ------------------------------------------------------------------ whether to run */

/* Why the cases skip on every rank, or "" when they run: a CUDA device on every rank,
 * then libnccl.so.2 loaded on every rank. The first rank with a reason gives it. */
inline std::string nccl_skip_reason() {
    char why[256] = "";
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        snprintf(why, sizeof why, "no CUDA device (cudaGetDeviceCount: %s, %d devices)",
                 e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), count);
        (void)cudaGetLastError();
    } else {
        std::string text;
        if (!mpiacc::nccl_available(&text)) snprintf(why, sizeof why, "%s", text.c_str());
    }
    int mine = why[0] ? mt_rank : mt_size, first = mt_size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == mt_size) return "";
    MPI_Bcast(why, sizeof why, MPI_CHAR, first, MPI_COMM_WORLD);
    return first == 0 ? std::string(why) : "rank " + std::to_string(first) + ": " + why;
}

/* Each rank's text, gathered: true when every rank has the same. */
inline bool nccl_same_on_every_rank(const std::string &text, MPI_Comm comm) {
    char mine[512] = {0};
    snprintf(mine, sizeof mine, "%s", text.c_str());
    int size = 0;
    MPI_Comm_size(comm, &size);
    std::vector<char> all(sizeof mine * static_cast<size_t>(size));
    MPI_Allgather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, comm);
    for (int r = 0; r < size; ++r)
        if (std::string(&all[sizeof mine * r]) != text) return false;
    return true;
}

/* ------------------------------------------------------------------ device buffers */

/* `bytes` of device memory followed by NCCL_GUARD guard bytes, all set to `fill`. */
struct DeviceBuffer {
    explicit DeviceBuffer(size_t bytes, int fill = NCCL_SENTINEL) : bytes_(bytes) {
        CK(cudaMalloc(&p_, bytes + NCCL_GUARD));
        CK(cudaMemset(p_, fill, bytes + NCCL_GUARD));
        CK(cudaDeviceSynchronize());
    }
    ~DeviceBuffer() { cudaFree(p_); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;

    void *get() const { return p_; }
    void upload(const std::vector<unsigned char> &host, size_t at = 0) {
        CK(cudaMemcpy(static_cast<char *>(p_) + at, host.data(), host.size(), cudaMemcpyHostToDevice));
    }
    /* The buffer and its guard bytes. */
    std::vector<unsigned char> download() const {
        std::vector<unsigned char> out(bytes_ + NCCL_GUARD);
        CK(cudaMemcpy(out.data(), p_, out.size(), cudaMemcpyDeviceToHost));
        return out;
    }

private:
    void *p_ = nullptr;
    size_t bytes_;
};

inline std::vector<unsigned char> nccl_pattern(size_t bytes, uint64_t seed) {
    std::vector<unsigned char> v(bytes);
    mt_fill(v.data(), bytes, seed);
    return v;
}

/* got[at, at + want.size()) is `want` and got's guard bytes (after `bytes`) are untouched. */
#define NCCL_CHECK_BYTES(got, at, want, bytes, what)                                                          \
    do {                                                                                                      \
        const std::vector<unsigned char> &g_ = (got);                                                         \
        const std::vector<unsigned char> &w_ = (want);                                                        \
        size_t bad_ = SIZE_MAX;                                                                               \
        for (size_t i_ = 0; i_ < w_.size() && bad_ == SIZE_MAX; ++i_)                                         \
            if (g_[(at) + i_] != w_[i_]) bad_ = i_;                                                           \
        MT_CHECK(bad_ == SIZE_MAX, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", (what), bad_, w_.size(), \
                 bad_ == SIZE_MAX ? 0 : g_[(at) + bad_], bad_ == SIZE_MAX ? 0 : w_[bad_]);                    \
        size_t touched_ = SIZE_MAX;                                                                           \
        for (size_t i_ = (bytes); i_ < (bytes) + NCCL_GUARD && touched_ == SIZE_MAX; ++i_)                    \
            if (g_[i_] != NCCL_SENTINEL) touched_ = i_ - (bytes);                                             \
        MT_CHECK(touched_ == SIZE_MAX, "%s: guard byte %zu after the buffer was written", (what), touched_);  \
    } while (0)

#endif
