/* The CUDA side of maint/diag/ocl-wrap-writeback.c's race, for the GPU machine: a CUDA
 * receiver in SHARED mode pins a peer's staging segment with cudaHostRegister(PORTABLE)
 * the first time a notice names it, while the peer may still be copying its next chunk
 * into fresh pages of that segment. Does the registration ever lose the peer's bytes?
 *
 *   gcc -O2 -pthread -I/usr/local/cuda/include -o /tmp/cuda-register-race \
 *       maint/diag/cuda-register-race.c -L/usr/local/cuda/lib64 -lcudart
 *   /tmp/cuda-register-race [TRIALS]        (default 200)
 *
 * Each trial: a fresh 4 MiB memfd segment (posix_fallocate'd, never touched) mapped twice;
 * a thread writes it once through the first mapping, starting 0-1000 us after the
 * registration of the second begins; then every word is checked, and a host-to-device
 * copy out of the registered mapping is checked on the device (the race itself:
 * first_write_race.h). */
#include "first_write_race.h"

#include <cuda_runtime.h>
#include <string.h>

enum { BYTES = 4 << 20 };

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 200;
    if (cudaSetDevice(0) != cudaSuccess) {
        fprintf(stderr, "cuda-register-race: no CUDA device\n");
        return 1;
    }
    uint64_t *dev, *back = malloc(BYTES);
    if (cudaMalloc((void **)&dev, BYTES) != cudaSuccess) return 1;
    long lost_trials = 0, lost_bytes = 0, wrong_copies = 0;
    double reg_us = 0;
    for (int trial = 0; trial < trials; trial++) {
        RaceSegment segment;
        RaceWriter writer;
        race_begin(&segment, &writer, BYTES, trial);
        double t0 = now_us();
        cudaError_t e = cudaHostRegister(segment.receiver, BYTES, cudaHostRegisterPortable);
        reg_us += now_us() - t0;
        size_t first = 0;
        const size_t lost = race_writer_join(&writer, &first);
        if (e != cudaSuccess) {
            fprintf(stderr, "cuda-register-race: cudaHostRegister: %s\n", cudaGetErrorString(e));
            return 1;
        }
        lost_trials += lost != 0;
        lost_bytes += (long)lost * 8;
        const int copied = cudaMemcpy(dev, segment.receiver, BYTES, cudaMemcpyHostToDevice) == cudaSuccess &&
                           cudaMemcpy(back, dev, BYTES, cudaMemcpyDeviceToHost) == cudaSuccess;
        wrong_copies += !copied || memcmp(back, segment.sender, BYTES) != 0;
        cudaHostUnregister(segment.receiver);
        race_segment_free(&segment);
    }
    printf(
        "cudaHostRegister(PORTABLE) racing a first write: %ld of %d trials lost bytes (%ld in all); "
        "%ld copies to the device wrong; %.0f us a registration\n",
        lost_trials, trials, lost_bytes, wrong_copies, reg_us / trials);
    return lost_trials || wrong_copies;
}
