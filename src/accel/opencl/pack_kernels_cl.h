// OpenCL C source of the datatype pack and unpack kernels (pack.cc builds it once per
// cache entry). OpenCL C 1.2: NVIDIA's OpenCL compiles nothing newer.
//
// Every kernel moves packed bytes [first, end) of `count` elements between the typed
// buffer (byte `origin` is the type's origin) and the packed buffer (packed byte `first`
// at byte `packed_start`). Offsets are bytes from the start of each cl_mem, whose base is
// aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (at least 16 bytes), so a word access is
// aligned when its offset is.
#pragma once

namespace mpiacc {
namespace opencl {

inline constexpr const char *kPackKernelsSource = R"CLC(
// Strided form: packed word w (W bytes) lies in block b = w / block_words, at word
// in = w - b * block_words of it; b's coordinates (i0, i1, i2) give the block's typed
// offset. A work-item divides once, then steps by the grid's size in that mixed radix
// (carries, no division: 32-bit division alone costs more than moving a word). The host
// picks W so that no word straddles a block and both sides are W-aligned; the words at
// the two ends of [first, end) may be partial and move byte by byte. IDX is uint when the
// word indices fit.
#define STRIDED_KERNEL(NAME, T, W, IDX, TO_PACKED)                                                                  \
    kernel void NAME(global uchar *typed, long base, global uchar *packed, long packed_start, long block_words,     \
                     long c0, long c1, long s0, long s1, long s2, long first, long end) {                           \
        const IDX wend = (IDX)((end + W - 1) / W), bw = (IDX)block_words, n0 = (IDX)c0, n1 = (IDX)c1;              \
        IDX w = (IDX)(first / W) + (IDX)get_global_id(0);                                                           \
        if (w >= wend) return;                                                                                      \
        const IDX step = (IDX)get_global_size(0), step_b = step / bw, step_r = step_b / n0;                         \
        const IDX step_in = step - step_b * bw, step_i0 = step_b - step_r * n0, step_i1 = step_r % n1,              \
                  step_i2 = step_r / n1;                                                                            \
        const IDX b = w / bw, r = b / n0;                                                                           \
        IDX in = w - b * bw, i0 = b - r * n0, i1 = r % n1, i2 = r / n1;                                            \
        for (; w < wend; w += step) {                                                                               \
            const long t = base + (long)i0 * s0 + (long)i1 * s1 + (long)i2 * s2 + (long)in * W;                     \
            const long p = (long)w * W, q = packed_start + (p - first);                                             \
            if (p >= first && p + W <= end) {                                                                       \
                if (TO_PACKED)                                                                                      \
                    *(global T *)(packed + q) = *(global const T *)(typed + t);                                     \
                else                                                                                                \
                    *(global T *)(typed + t) = *(global const T *)(packed + q);                                     \
            } else {                                                                                                \
                const long hi = min(p + W, end) - p;                                                                \
                for (long j = max(p, first) - p; j < hi; ++j) {                                                     \
                    if (TO_PACKED)                                                                                  \
                        packed[q + j] = typed[t + j];                                                               \
                    else                                                                                            \
                        typed[t + j] = packed[q + j];                                                               \
                }                                                                                                   \
            }                                                                                                       \
            in += step_in;                                                                                          \
            IDX carry = in >= bw ? 1 : 0;                                                                           \
            in -= carry * bw;                                                                                       \
            i0 += step_i0 + carry;                                                                                  \
            carry = i0 >= n0 ? 1 : 0;                                                                               \
            i0 -= carry * n0;                                                                                       \
            i1 += step_i1 + carry;                                                                                  \
            carry = i1 >= n1 ? 1 : 0;                                                                               \
            i1 -= carry * n1;                                                                                       \
            i2 += step_i2 + carry;                                                                                  \
        }                                                                                                           \
    }

#define STRIDED_PAIR(T, W)                                                   \
    STRIDED_KERNEL(pack_strided_w##W, T, W, uint, 1)                         \
    STRIDED_KERNEL(unpack_strided_w##W, T, W, uint, 0)                       \
    STRIDED_KERNEL(pack_strided_w##W##_wide, T, W, ulong, 1)                 \
    STRIDED_KERNEL(unpack_strided_w##W##_wide, T, W, ulong, 0)

STRIDED_PAIR(uchar, 1)
STRIDED_PAIR(ushort, 2)
STRIDED_PAIR(uint, 4)
STRIDED_PAIR(ulong, 8)
STRIDED_PAIR(ulong2, 16)

// n bytes from src + s to dst + d, moved by the work-items [lid, lid + step, ...): a byte
// prologue up to the widest word both sides share an alignment for, words, a byte tail.
void copy_span(global uchar *dst, long d, global const uchar *src, long s, long n, long lid, long step) {
    const long rel = d - s;
    const int shift = (rel & 15) == 0 ? 4 : (rel & 7) == 0 ? 3 : (rel & 3) == 0 ? 2 : 0;
    long head = n, words = 0;
    if (shift) {
        const long mask = (1L << shift) - 1;
        head = min(n, ((mask + 1) - (s & mask)) & mask);
        words = (n - head) >> shift;
    }
    for (long i = lid; i < head; i += step) dst[d + i] = src[s + i];
    global uchar *dw = dst + d + head;
    global const uchar *sw = src + s + head;
    if (shift == 4)
        for (long i = lid; i < words; i += step) ((global ulong2 *)dw)[i] = ((global const ulong2 *)sw)[i];
    else if (shift == 3)
        for (long i = lid; i < words; i += step) ((global ulong *)dw)[i] = ((global const ulong *)sw)[i];
    else if (shift == 2)
        for (long i = lid; i < words; i += step) ((global uint *)dw)[i] = ((global const uint *)sw)[i];
    for (long i = head + (words << shift) + lid; i < n; i += step) dst[d + i] = src[s + i];
}

// Work units: pair (element e, unit u) is pair e * nunits + u, in packed order. units
// holds (offset, packed, length) triples (WorkUnit). Pairs [pair_begin, pair_end) are
// those that overlap [first, end). Returns the unit's clipped span, or n = 0.
void unit_span(long pair, global const long *units, long nunits, long size, long extent, long origin,
               long packed_start, long first, long end, long *t, long *q, long *n) {
    const long e = pair / nunits, u = pair - e * nunits;
    const long start = e * size + units[3 * u + 1];
    const long lo = max(start, first), hi = min(start + units[3 * u + 2], end);
    *n = hi > lo ? hi - lo : 0;
    *t = origin + e * extent + units[3 * u] + (lo - start);
    *q = packed_start + (lo - first);
}

// One work-group per pair, for units long enough to keep a group busy (BRIEF D3).
#define UNITS_GROUP_KERNEL(NAME, TO_PACKED)                                                                        \
    kernel void NAME(global uchar *typed, long origin, long extent, global uchar *packed, long packed_start,       \
                     global const long *units, long nunits, long size, long pair_begin, long pair_end, long first, \
                     long end) {                                                                                   \
        for (long pair = pair_begin + get_group_id(0); pair < pair_end; pair += get_num_groups(0)) {               \
            long t, q, n;                                                                                          \
            unit_span(pair, units, nunits, size, extent, origin, packed_start, first, end, &t, &q, &n);            \
            if (TO_PACKED)                                                                                         \
                copy_span(packed, q, typed, t, n, get_local_id(0), get_local_size(0));                             \
            else                                                                                                   \
                copy_span(typed, t, packed, q, n, get_local_id(0), get_local_size(0));                             \
        }                                                                                                          \
    }

// One work-item per pair, for short units, where a group would idle.
#define UNITS_ITEM_KERNEL(NAME, TO_PACKED)                                                                         \
    kernel void NAME(global uchar *typed, long origin, long extent, global uchar *packed, long packed_start,       \
                     global const long *units, long nunits, long size, long pair_begin, long pair_end, long first, \
                     long end) {                                                                                   \
        for (long pair = pair_begin + get_global_id(0); pair < pair_end; pair += get_global_size(0)) {             \
            long t, q, n;                                                                                          \
            unit_span(pair, units, nunits, size, extent, origin, packed_start, first, end, &t, &q, &n);            \
            if (TO_PACKED)                                                                                         \
                copy_span(packed, q, typed, t, n, 0, 1);                                                           \
            else                                                                                                   \
                copy_span(typed, t, packed, q, n, 0, 1);                                                           \
        }                                                                                                          \
    }

UNITS_GROUP_KERNEL(pack_units_group, 1)
UNITS_GROUP_KERNEL(unpack_units_group, 0)
UNITS_ITEM_KERNEL(pack_units_item, 1)
UNITS_ITEM_KERNEL(unpack_units_item, 0)
)CLC";

}  // namespace opencl
}  // namespace mpiacc
