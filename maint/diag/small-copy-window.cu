// How fast can a window of small copies between device and pinned host memory go, when
// each is waited for at once (what staging by hand, and MPI-ACC's nonblocking sends below
// MPIACC_DEVICE_ISEND_EAGER_MAX, do per message) against all issued back to back and then
// seen done in order (what a send that returns before its copy ends would allow)?
// Issue 4 criterion 5: IPC-off windows of 8 B-4 KiB run at 0.82-0.94 of staging by hand.
// One process, no MPI, device 0, a non-blocking stream of the greatest priority:
//   sync        W x cudaMemcpy (explicit kind)
//   waited      W x (cudaMemcpyAsync + cudaEventRecord, cudaEventQuery until done)
//   windowed    W x (cudaMemcpyAsync + cudaEventRecord), then each event queried in order
// for D2H and H2D, one slot of pinned memory per message. Prints the median over ROUNDS of
// microseconds per message, and for windowed the CPU time per issue (copy + record).
//
//   nvcc -O2 -o /tmp/small-window maint/diag/small-copy-window.cu
//   /tmp/small-window [W [ROUNDS]]    (32, 200); sizes 8 B-64 KiB
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "clock_us.h"
#include "cuda_check.h"


static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// One message's copy on stream `s` and the event after it, as the library issues them.
static void issue(bool d2h, char *host, char *dev, size_t len, cudaStream_t s, cudaEvent_t ev) {
    if (d2h)
        CK(cudaMemcpyAsync(host, dev, len, cudaMemcpyDefault, s));
    else
        CK(cudaMemcpyAsync(dev, host, len, cudaMemcpyDefault, s));
    CK(cudaEventRecord(ev, s));
}

int main(int argc, char **argv) {
    const int window = argc > 1 ? atoi(argv[1]) : 32;
    const int rounds = argc > 2 ? atoi(argv[2]) : 200;
    const size_t kMax = 64u << 10;
    CK(cudaSetDevice(0));
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s;
    CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
    std::vector<cudaEvent_t> ev(window);
    for (auto &e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    char *dev, *host;
    CK(cudaMalloc(&dev, kMax * window));
    CK(cudaMallocHost(&host, kMax * window));
    printf("# window %d, rounds %d: us per message (median of rounds); issue = CPU us per copy+record\n", window,
           rounds);
    printf("%-4s %8s %9s %9s %9s %9s\n", "dir", "bytes", "sync", "waited", "windowed", "issue");
    for (int d = 0; d < 2; ++d) {
        const bool d2h = d == 0;
        for (size_t len = 8; len <= kMax; len *= (len < 4096 ? 8 : 4)) {
            std::vector<double> t_sync, t_wait, t_win, t_issue;
            for (int r = 0; r < rounds + 5; ++r) {
                double t0 = now_us();
                for (int i = 0; i < window; ++i) {
                    if (d2h)
                        CK(cudaMemcpy(host + i * kMax, dev + i * kMax, len, cudaMemcpyDeviceToHost));
                    else
                        CK(cudaMemcpy(dev + i * kMax, host + i * kMax, len, cudaMemcpyHostToDevice));
                }
                double t1 = now_us();
                for (int i = 0; i < window; ++i) {
                    issue(d2h, host + i * kMax, dev + i * kMax, len, s, ev[i]);
                    while (cudaEventQuery(ev[i]) == cudaErrorNotReady) {
                    }
                }
                double t2 = now_us();
                for (int i = 0; i < window; ++i) issue(d2h, host + i * kMax, dev + i * kMax, len, s, ev[i]);
                double t3 = now_us();
                for (int i = 0; i < window; ++i)
                    while (cudaEventQuery(ev[i]) == cudaErrorNotReady) {
                    }
                double t4 = now_us();
                if (r < 5) continue;  // warm-up
                t_sync.push_back((t1 - t0) / window);
                t_wait.push_back((t2 - t1) / window);
                t_win.push_back((t4 - t2) / window);
                t_issue.push_back((t3 - t2) / window);
            }
            printf("%-4s %8zu %9.2f %9.2f %9.2f %9.2f\n", d2h ? "D2H" : "H2D", len, median(t_sync), median(t_wait),
                   median(t_win), median(t_issue));
        }
    }
    return 0;
}
