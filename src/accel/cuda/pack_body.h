// What one thread of a pack or unpack kernel does (pack_kernel.cu), written once for nvcc
// and for the host compiler: the kernels call these with their thread's place in the
// grid, and test/unit/pack_body_test.cc calls them for every thread of a grid on the CPU,
// so the index arithmetic is checked on machines without a GPU.
//
// No thread reads what another writes, and none waits for another: running the threads
// one after another is a valid schedule.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MPIACC_PACK_HD __host__ __device__ __forceinline__
#else
#define MPIACC_PACK_HD inline
#endif

namespace mpiacc {
namespace cuda {

// A 16-byte word: one 128-bit load or store on the GPU.
#ifdef __CUDACC__
using Word16 = uint4;
#else
struct alignas(16) Word16 {
    std::uint64_t lo, hi;
};
#endif

// Words a thread loads before it stores any: independent loads in flight hide latency.
constexpr unsigned kPackUnroll = 4;
constexpr unsigned kWarpLanes = 32;
constexpr unsigned kMaxLaneShift = 5;  // a group is at most a warp

// The strided kernels: words [0, words) of the packed range, word k at packed[k]. Word k
// is word `w` of block (i0, i1, i2) of the StridedForm; the block is at
// base + i0 * stride0 + i1 * stride1 + i2 * stride2. A thread starts at its own index
// and moves by the grid's thread count, whose digits in the mixed radix
// (block_words, count0, count1, -) are step_*: so a step is additions with carries,
// never a division.
struct StridedArgs {
    char *base;    // the user's buffer at the form's offset
    char *packed;  // the packed range's first byte
    std::uint64_t words;
    std::uint64_t first_word;  // the range's first word in the whole packed stream
    std::uint64_t block_words, count0, count1;
    std::int64_t stride0, stride1, stride2;
    std::uint64_t step_w, step0, step1, step2;
};

struct StridedPlace {
    std::uint64_t w, i0, i1, i2;
};

MPIACC_PACK_HD StridedPlace strided_place(const StridedArgs &a, std::uint64_t word) {
    StridedPlace p;
    std::uint64_t block = word / a.block_words;
    p.w = word - block * a.block_words;
    std::uint64_t rest = block / a.count0;
    p.i0 = block - rest * a.count0;
    p.i2 = rest / a.count1;
    p.i1 = rest - p.i2 * a.count1;
    return p;
}

// Each digit is below its radix before and after, so one carry per digit suffices.
MPIACC_PACK_HD void strided_step(const StridedArgs &a, StridedPlace *p) {
    p->w += a.step_w;
    std::uint64_t carry = p->w >= a.block_words;
    if (carry) p->w -= a.block_words;
    p->i0 += a.step0 + carry;
    carry = p->i0 >= a.count0;
    if (carry) p->i0 -= a.count0;
    p->i1 += a.step1 + carry;
    carry = p->i1 >= a.count1;
    if (carry) p->i1 -= a.count1;
    p->i2 += a.step2 + carry;
}

template <typename Word>
MPIACC_PACK_HD Word *strided_word(const StridedArgs &a, const StridedPlace &p) {
    return reinterpret_cast<Word *>(a.base + static_cast<std::int64_t>(p.i0) * a.stride0 +
                                    static_cast<std::int64_t>(p.i1) * a.stride1 +
                                    static_cast<std::int64_t>(p.i2) * a.stride2) +
           p.w;
}

// Thread `thread` of `threads`: consecutive threads take consecutive words, so a warp's
// stores to the packed range are one coalesced run and its loads are too within a block.
template <typename Word, bool kPack>
MPIACC_PACK_HD void strided_thread(const StridedArgs &a, std::uint64_t thread, std::uint64_t threads) {
    if (thread >= a.words) return;
    StridedPlace place = strided_place(a, a.first_word + thread);
    Word *packed = reinterpret_cast<Word *>(a.packed);
    for (std::uint64_t k = thread; k < a.words; k += kPackUnroll * threads) {
        Word *spread[kPackUnroll];
        Word v[kPackUnroll];
#ifdef __CUDACC__
#pragma unroll
#endif
        for (unsigned u = 0; u < kPackUnroll; ++u) {
            if (k + u * threads < a.words) {
                spread[u] = strided_word<Word>(a, place);
                v[u] = kPack ? *spread[u] : packed[k + u * threads];
                strided_step(a, &place);
            }
        }
#ifdef __CUDACC__
#pragma unroll
#endif
        for (unsigned u = 0; u < kPackUnroll; ++u) {
            if (k + u * threads < a.words) {
                if (kPack)
                    packed[k + u * threads] = v[u];
                else
                    *spread[u] = v[u];
            }
        }
    }
}

// One unit as the device reads it: flat_type.h's WorkUnit, field for field.
struct DeviceUnit {
    std::int64_t offset, packed, length;
};

// The generic kernels: (element, unit) pairs [first_pair, first_pair + pairs), pair
// e * units + u being unit u of element e, each moved by a group of 1 << lane_shift lanes
// of one warp (BRIEF D3's warp per unit where units are long; fewer lanes, and so more
// pairs at once, where they are short). Each pair's bytes are clipped to the packed
// range [first, first + len), which starts at `packed`.
struct UnitsArgs {
    const DeviceUnit *units;
    char *origin;  // the user's buffer argument
    char *packed;
    std::uint64_t unit_count;
    std::int64_t extent, size;
    std::uint64_t first_pair, pairs;
    std::int64_t first, len;
    unsigned lane_shift;
};

template <typename Word>
MPIACC_PACK_HD void group_copy_words(Word *dst, const Word *src, std::uint64_t words, unsigned lane, unsigned lanes) {
    for (std::uint64_t i = lane; i < words; i += kPackUnroll * lanes) {
        Word v[kPackUnroll];
#ifdef __CUDACC__
#pragma unroll
#endif
        for (unsigned u = 0; u < kPackUnroll; ++u)
            if (i + u * lanes < words) v[u] = src[i + u * lanes];
#ifdef __CUDACC__
#pragma unroll
#endif
        for (unsigned u = 0; u < kPackUnroll; ++u)
            if (i + u * lanes < words) dst[i + u * lanes] = v[u];
    }
}

// `n` bytes by lane `lane` of a group of `lanes`. Ends with the same misalignment share a
// word size: bytes up to the source's word boundary, then words, then the tail's bytes
// (the prologue and epilogue of BRIEF D2). The choice depends only on the addresses, so
// the whole group takes the same branch.
MPIACC_PACK_HD void group_copy(char *dst, const char *src, std::uint64_t n, unsigned lane, unsigned lanes) {
    const std::uint64_t skew = reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src);
    const std::uint64_t word = (skew & 15) == 0 ? 16 : (skew & 7) == 0 ? 8 : (skew & 3) == 0 ? 4 : 1;
    std::uint64_t head = (word - (reinterpret_cast<std::uintptr_t>(src) & (word - 1))) & (word - 1);
    if (head > n) head = n;
    for (std::uint64_t i = lane; i < head; i += lanes) dst[i] = src[i];
    const std::uint64_t words = (n - head) / word;
    char *d = dst + head;
    const char *s = src + head;
    switch (word) {
        case 16:
            group_copy_words(reinterpret_cast<Word16 *>(d), reinterpret_cast<const Word16 *>(s), words, lane, lanes);
            break;
        case 8:
            group_copy_words(reinterpret_cast<std::uint64_t *>(d), reinterpret_cast<const std::uint64_t *>(s), words,
                             lane, lanes);
            break;
        case 4:
            group_copy_words(reinterpret_cast<std::uint32_t *>(d), reinterpret_cast<const std::uint32_t *>(s), words,
                             lane, lanes);
            break;
        default: group_copy_words(d, s, words, lane, lanes); break;
    }
    for (std::uint64_t i = head + words * word + lane; i < n; i += lanes) dst[i] = src[i];
}

// Group `group` of `groups`, lane `lane` of the group. The next pair's unit is loaded
// before this pair's bytes move: its latency then overlaps the copy instead of
// following it.
template <bool kPack>
MPIACC_PACK_HD void units_group(const UnitsArgs &a, std::uint64_t group, std::uint64_t groups, unsigned lane) {
    if (group >= a.pairs) return;
    const unsigned lanes = 1u << a.lane_shift;
    std::uint64_t element = (a.first_pair + group) / a.unit_count;
    DeviceUnit unit = a.units[a.first_pair + group - element * a.unit_count];
    for (std::uint64_t k = group; k < a.pairs; k += groups) {
        const std::uint64_t next = k + groups;
        std::uint64_t next_element = 0;
        DeviceUnit next_unit{0, 0, 0};
        if (next < a.pairs) {
            next_element = (a.first_pair + next) / a.unit_count;
            next_unit = a.units[a.first_pair + next - next_element * a.unit_count];
        }
        // The unit's packed bytes in the whole stream, clipped to the range.
        const std::int64_t at = static_cast<std::int64_t>(element) * a.size + unit.packed;
        std::int64_t lo = at, hi = at + unit.length;
        if (lo < a.first) lo = a.first;
        if (hi > a.first + a.len) hi = a.first + a.len;
        if (lo < hi) {
            char *spread = a.origin + static_cast<std::int64_t>(element) * a.extent + unit.offset + (lo - at);
            char *packed = a.packed + (lo - a.first);
            if (kPack)
                group_copy(packed, spread, static_cast<std::uint64_t>(hi - lo), lane, lanes);
            else
                group_copy(spread, packed, static_cast<std::uint64_t>(hi - lo), lane, lanes);
        }
        element = next_element;
        unit = next_unit;
    }
}

// Thread `thread` of `threads` (a multiple of the group size).
template <bool kPack>
MPIACC_PACK_HD void units_thread(const UnitsArgs &a, std::uint64_t thread, std::uint64_t threads) {
    units_group<kPack>(a, thread >> a.lane_shift, threads >> a.lane_shift,
                       static_cast<unsigned>(thread & ((1u << a.lane_shift) - 1)));
}

}  // namespace cuda
}  // namespace mpiacc
