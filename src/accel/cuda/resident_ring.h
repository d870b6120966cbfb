/* The command ring between the host and mpiacc_resident_copy (copy_kernel.cu), in pinned
 * host memory mapped into the device. Shared by the kernel (nvcc) and ResidentCopier
 * (resident_copier.cc), so plain C.
 *
 * Command n goes into slot n % MPIACC_RESIDENT_SLOTS as MPIACC_RESIDENT_WORDS 8-byte
 * words, each the low 32 bits of n + 1 above 32 bits of data (as in NCCL's LL protocol):
 * the host writes each word whole and the kernel reads each whole, so a kernel that sees
 * every word carry the current flag has the whole command, in whatever order the words
 * reached it. Words: source low and high, destination low and high, length.
 *
 * The kernel writes n + 1 into done[n % SLOTS] once command n's bytes are visible to the
 * whole system; `started` is the generation of the kernel that runs (each launch has its
 * own); `exited` is that generation << 40 | the first command it did not take, written as
 * it leaves. A command at or past that number is never copied by that kernel: the host
 * copies it another way. `stop` asks the kernel to leave now. Each word has a 64-byte
 * line of its own, so that the host's polling of one never shares a line with the
 * kernel's polling of another. */
#ifndef MPIACC_ACCEL_CUDA_RESIDENT_RING_H
#define MPIACC_ACCEL_CUDA_RESIDENT_RING_H

#define MPIACC_RESIDENT_SLOTS 64
#define MPIACC_RESIDENT_WORDS 5
#define MPIACC_RESIDENT_GEN_SHIFT 40

struct mpiacc_resident_line {
    unsigned long long word[8];
};

struct mpiacc_resident_ring {
    struct mpiacc_resident_line slot[MPIACC_RESIDENT_SLOTS];
    struct mpiacc_resident_line done[MPIACC_RESIDENT_SLOTS]; /* word[0] */
    struct mpiacc_resident_line stop;                        /* word[0] */
    struct mpiacc_resident_line started;                     /* word[0] */
    struct mpiacc_resident_line exited;                      /* word[0] */
};

#endif
