// What does the host pay to issue IPC pulls, one call per copy or one call per batch? For
// issue 4's 256 KiB windows, where the receiver spends 8.7 us a message and the copy call
// alone 3.4-3.6 us of CPU (two H100s, session 19). Rank 0 exports a buffer on GPU 0; rank
// 1 maps it on GPU 1 and times N pulls of LEN bytes into its own memory, issued as
//   loop      N cudaMemcpyAsync, one cudaEventRecord behind the last
//   loop+ev   N cudaMemcpyAsync, a cudaEventRecord behind each (what the library does)
//   driver    N cuMemcpyDtoDAsync (driver API), one cudaEventRecord
//   batch     one cudaMemcpyBatchAsync of N copies, one cudaEventRecord
// and prints, for each, the CPU time of issuing per copy and the time to the event's end
// per copy (medians of 31 rounds), plus the cost of cudaGetDevice and cudaEventQuery.
//
//   nvcc -O2 -I/usr/include/x86_64-linux-gnu/mpich -o /tmp/batch-pull \
//       maint/diag/batch-pull.cu -lmpich -lcuda
//   mpiexec -n 2 /tmp/batch-pull             (one GPU per rank: cudaSetDevice(rank))
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <vector>

#include "clock_us.h"

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

enum Way { LOOP, LOOP_EV, DRIVER, BATCH, WAYS };
static const char *way_name[] = {"loop", "loop+ev", "driver", "batch"};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    const size_t total = 64u << 20;
    char *mine;
    CK(cudaMalloc(&mine, total));
    CK(cudaMemset(mine, rank + 1, total));
    cudaIpcMemHandle_t h;
    if (rank == 0) CK(cudaIpcGetMemHandle(&h, mine));
    MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 1) {
        char *peer;
        CK(cudaIpcOpenMemHandle((void **)&peer, h, cudaIpcMemLazyEnablePeerAccess));
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        std::vector<cudaEvent_t> ev(64);
        for (auto &e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        printf("# device %d pulls from a cudaIpcOpenMemHandle mapping of device 0 (%d devices)\n", rank % ndev, ndev);
        {
            std::vector<double> g, q;
            for (int r = 0; r < 201; ++r) {
                int d;
                double t0 = now_us();
                cudaGetDevice(&d);
                double t1 = now_us();
                cudaEventQuery(ev[0]);
                double t2 = now_us();
                g.push_back(t1 - t0);
                q.push_back(t2 - t1);
            }
            printf("# cudaGetDevice %.2f us, cudaEventQuery (done event) %.2f us\n", median(g), median(q));
        }
        printf("%-8s %8s %4s %12s %12s %10s\n", "way", "len", "n", "issue_us/cp", "end_us/cp", "GB/s");
        const size_t lens[] = {8, 4096, 262144, 1u << 20};
        const int counts[] = {1, 8, 32};
        for (size_t len : lens)
            for (int n : counts) {
                if ((size_t)n * len > total) continue;
                std::vector<void *> dsts(n), srcs(n);
                std::vector<size_t> sizes(n, len);
                for (int i = 0; i < n; ++i) {
                    dsts[i] = mine + (size_t)i * len;
                    srcs[i] = peer + (size_t)i * len;
                }
                cudaMemcpyAttributes attr = {};
                attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                size_t attr_idx = 0;
                for (int w = 0; w < WAYS; ++w) {
                    std::vector<double> issue, end;
                    bool ok = true;
                    for (int r = 0; r < 31 + 3 && ok; ++r) {
                        double t0 = now_us();
                        if (w == BATCH) {
                            cudaError_t e = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), n, &attr,
                                                                 &attr_idx, 1, s);
                            if (e != cudaSuccess) {
                                printf("%-8s %8zu %4d cudaMemcpyBatchAsync: %s\n", way_name[w], len, n,
                                       cudaGetErrorString(e));
                                cudaGetLastError();
                                ok = false;
                                break;
                            }
                        } else {
                            for (int i = 0; i < n; ++i) {
                                if (w == DRIVER)
                                    cuMemcpyDtoDAsync((CUdeviceptr)dsts[i], (CUdeviceptr)srcs[i], len, (CUstream)s);
                                else
                                    CK(cudaMemcpyAsync(dsts[i], srcs[i], len, cudaMemcpyDefault, s));
                                if (w == LOOP_EV && i + 1 < n) CK(cudaEventRecord(ev[i], s));
                            }
                        }
                        CK(cudaEventRecord(ev[n - 1], s));
                        double t1 = now_us();
                        while (cudaEventQuery(ev[n - 1]) == cudaErrorNotReady) {
                        }
                        double t2 = now_us();
                        if (r >= 3) {
                            issue.push_back((t1 - t0) / n);
                            end.push_back((t2 - t0) / n);
                        }
                    }
                    if (!ok) continue;
                    double e = median(end);
                    printf("%-8s %8zu %4d %12.2f %12.2f %10.2f\n", way_name[w], len, n, median(issue), e,
                           len / (e * 1e3));
                }
            }
        CK(cudaIpcCloseMemHandle(peer));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
