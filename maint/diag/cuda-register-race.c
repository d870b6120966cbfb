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
 * copy out of the registered mapping is checked on the device. */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { BYTES = 4 << 20, WORDS = BYTES / 8 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint64_t word(int trial, size_t i) { return 0xC0FFEE0000000000ull ^ (uint64_t)trial << 32 ^ i; }

struct Writer {
    uint64_t *to;
    int trial;
    atomic_int go;
};

static void *write_once(void *arg) {
    struct Writer *w = arg;
    while (!atomic_load(&w->go)) {
    }
    double until = now_s() + 1e-6 * (double)(w->trial * 37 % 1000);
    while (now_s() < until) {
    }
    for (size_t i = 0; i < WORDS; i++) w->to[i] = word(w->trial, i);
    return NULL;
}

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 200;
    if (cudaSetDevice(0) != cudaSuccess) {
        fprintf(stderr, "cuda-register-race: no CUDA device\n");
        return 1;
    }
    uint64_t *dev, *back = malloc(BYTES);
    if (cudaMalloc((void **)&dev, BYTES) != cudaSuccess) return 1;
    long lost_trials = 0, lost_bytes = 0, wrong_copies = 0;
    double reg_s = 0;
    for (int trial = 0; trial < trials; trial++) {
        int fd = memfd_create("register-race", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, BYTES) != 0 || posix_fallocate(fd, 0, BYTES) != 0) {
            perror("memfd");
            return 1;
        }
        uint64_t *sender = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        char *receiver = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (sender == MAP_FAILED || receiver == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        struct Writer w = {sender, trial, 0};
        pthread_t t;
        pthread_create(&t, NULL, write_once, &w);
        atomic_store(&w.go, 1);
        double t0 = now_s();
        cudaError_t e = cudaHostRegister(receiver, BYTES, cudaHostRegisterPortable);
        reg_s += now_s() - t0;
        pthread_join(t, NULL);
        if (e != cudaSuccess) {
            fprintf(stderr, "cuda-register-race: cudaHostRegister: %s\n", cudaGetErrorString(e));
            return 1;
        }
        long lost = 0;
        for (size_t i = 0; i < WORDS; i++) lost += sender[i] != word(trial, i);
        lost_trials += lost != 0;
        lost_bytes += lost * 8;
        cudaMemcpy(dev, receiver, BYTES, cudaMemcpyHostToDevice);
        cudaMemcpy(back, dev, BYTES, cudaMemcpyDeviceToHost);
        wrong_copies += memcmp(back, sender, BYTES) != 0;
        cudaHostUnregister(receiver);
        munmap(sender, BYTES);
        munmap(receiver, BYTES);
    }
    printf(
        "cudaHostRegister(PORTABLE) racing a first write: %ld of %d trials lost bytes (%ld in all); "
        "%ld copies to the device wrong; %.0f us a registration\n",
        lost_trials, trials, lost_bytes, wrong_copies, 1e6 * reg_s / trials);
    return lost_trials || wrong_copies;
}
