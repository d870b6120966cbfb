// Is the host slow right after a kernel launch on this machine, without MPI-ACC? For
// test/gpu/cuda_stream's 50 us bound on MPI_Isend with a pending stream. Rank 0 times
// reference operations (a CPU loop, dependent loads over 8 MiB, cudaGetDevice,
// cudaEventRecord, a plain MPICH MPI_Isend of 200 bytes) in a quiet window and right
// after launching a 10 ms spin kernel and a 64 MiB fill, as the test does, while rank 1
// has just allocated and set 64 MiB on its GPU, as the test's receiver has. Medians of 7.
//
//   nvcc -O2 -I/usr/include/x86_64-linux-gnu/mpich -o /tmp/launch-window \
//       maint/diag/launch-window.cu -lmpich
//   mpiexec -n 2 /tmp/launch-window          (one GPU per rank: cudaSetDevice(rank))
//
// Two H100s, session 19: the 200-byte MPI_Isend took 4.4 us quiet and 5.3-14.5 us after
// the launches, and the dependent loads up to 3.4x longer (bench/results/
// explore-2026-11-25-h100x2-s19.txt).
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <vector>

__global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
__global__ void fill(unsigned char *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)i;
}
static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
static volatile unsigned long long sink;
static double cpu_loop() {
    double t0 = now();
    unsigned long long x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
    sink = x;
    return now() - t0;
}
static double mem_walk(std::vector<size_t> &v) {  // dependent loads over 8 MiB
    double t0 = now();
    size_t j = 0;
    for (int i = 0; i < 4000; i++) j = v[j];
    sink = j;
    return now() - t0;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cudaSetDevice(rank);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const size_t n = 64u << 20;
    unsigned char *d;
    cudaMalloc(&d, n);
    std::vector<size_t> v(1u << 20);
    for (size_t i = 0; i < v.size(); i++) v[i] = (i * 7919 + 13) % v.size();
    char env[200] = {0}, got[200];
    const char *modes[] = {"quiet", "spin only", "spin+fill64M", "spin+fill64M, peer idle"};
    for (int m = 0; m < 4; m++) {
        std::vector<double> a, b, c, e, f;
        for (int tr = 0; tr < 7; tr++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);  // "ready"
                if (m >= 1) spin<<<1, 1, 0, s>>>(10000000ull);
                if (m >= 2) fill<<<1024, 256, 0, s>>>(d, n);
                a.push_back(cpu_loop());
                b.push_back(mem_walk(v));
                double t0 = now();
                int dev;
                for (int k = 0; k < 10; k++) cudaGetDevice(&dev);
                c.push_back((now() - t0) / 10);
                t0 = now();
                cudaEvent_t ev;
                cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
                double t1 = now();
                cudaEventRecord(ev, s);
                e.push_back(now() - t1);
                MPI_Request r;
                t0 = now();
                MPI_Isend(env, 200, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &r);
                f.push_back(now() - t0);
                MPI_Wait(&r, MPI_STATUS_IGNORE);
                cudaStreamSynchronize(s);
                cudaEventDestroy(ev);
            } else {
                unsigned char *x = NULL;
                if (m != 3) { cudaMalloc(&x, n + 4096); cudaMemset(x, 1, n + 4096); cudaDeviceSynchronize(); }
                MPI_Send(NULL, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
                MPI_Recv(got, 200, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (x) cudaFree(x);
            }
        }
        if (rank == 0) {
            auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
            printf("window %-26s cpu_loop %7.1f us  mem_walk %7.1f us  cudaGetDevice %5.2f us  cudaEventRecord %5.2f us  MPI_Isend(200B) %5.2f us\n",
                   modes[m], med(a), med(b), med(c), med(e), med(f));
            fflush(stdout);
        }
    }
    MPI_Finalize();
    return 0;
}
