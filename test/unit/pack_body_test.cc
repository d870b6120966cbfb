// The pack kernels' threads (src/accel/cuda/pack_body.h) run one after another on the CPU,
// with the arguments pack_plan.cc makes: random strided forms and work-unit lists, random
// packed ranges, grids of many sizes, against the bytes a plain loop over the same layout
// gives. This checks the kernels' index arithmetic, clipping and word choice where no GPU
// is; test/gpu/cuda_pack_kernels.cc runs the kernels themselves.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "accel/cuda/pack_plan.h"

namespace mpiacc {
namespace cuda {
namespace {

constexpr std::uint64_t kSeed = 20261207;
constexpr unsigned char kUnset = 0xa5;

// Bytes at a chosen misalignment from a 16-byte boundary, with room on both sides.
struct Arena {
    Arena(std::size_t bytes, std::size_t skew) : words((bytes + 64) / 16 + 1) {
        std::memset(words.data(), kUnset, words.size() * 16);
        at = reinterpret_cast<char *>(words.data()) + 16 + skew;
    }
    std::vector<Word16> words;
    char *at;
};

template <bool kPack>
void run_strided(const StridedArgs &a, unsigned word, std::uint64_t threads) {
    for (std::uint64_t t = 0; t < threads; ++t) {
        switch (word) {
            case 16: strided_thread<Word16, kPack>(a, t, threads); break;
            case 8: strided_thread<std::uint64_t, kPack>(a, t, threads); break;
            case 4: strided_thread<std::uint32_t, kPack>(a, t, threads); break;
            case 2: strided_thread<std::uint16_t, kPack>(a, t, threads); break;
            default: strided_thread<unsigned char, kPack>(a, t, threads); break;
        }
    }
}

template <bool kPack>
void run_units(const UnitsArgs &a, std::uint64_t groups) {
    const std::uint64_t threads = groups << a.lane_shift;
    for (std::uint64_t t = 0; t < threads; ++t) units_thread<kPack>(a, t, threads);
}

// Offsets of each packed byte in the buffer, in packed order.
std::vector<std::int64_t> strided_map(const StridedForm &f) {
    std::vector<std::int64_t> map;
    for (std::int64_t i2 = 0; i2 < f.count[2]; ++i2)
        for (std::int64_t i1 = 0; i1 < f.count[1]; ++i1)
            for (std::int64_t i0 = 0; i0 < f.count[0]; ++i0)
                for (std::int64_t b = 0; b < f.block; ++b)
                    map.push_back(f.offset + i0 * f.stride[0] + i1 * f.stride[1] + i2 * f.stride[2] + b);
    return map;
}

std::vector<std::int64_t> units_map(const std::vector<WorkUnit> &units, std::int64_t extent, std::int64_t count) {
    std::vector<std::int64_t> map;
    for (std::int64_t e = 0; e < count; ++e)
        for (const WorkUnit &u : units)
            for (std::int64_t b = 0; b < u.length; ++b) map.push_back(e * extent + u.offset + b);
    return map;
}

// Packs and unpacks random ranges of the layout `map` (offsets from `origin`) through
// `pack` and `unpack`, which run the kernels for (first, len, packed pointer).
template <typename Pack, typename Unpack>
void check_ranges(const std::vector<std::int64_t> &map, std::int64_t lo, std::int64_t hi, std::mt19937_64 &rng,
                  const Pack &pack, const Unpack &unpack, const char *what) {
    const std::int64_t total = static_cast<std::int64_t>(map.size());
    for (int trial = 0; trial < 6; ++trial) {
        const std::size_t buffer_skew = rng() % 16, packed_skew = rng() % 16;
        std::int64_t first = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total));
        std::int64_t len = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total - first));
        if (trial == 0) first = 0, len = total;
        // Aligned ranges in half the trials, as a pipeline's chunks are.
        if (trial % 2 == 1 && len >= 32) first &= ~std::int64_t{15}, len &= ~std::int64_t{15};
        SCOPED_TRACE(testing::Message() << what << " seed " << kSeed << " trial " << trial << " bytes [" << first
                                        << ", " << first + len << ") of " << total << " skews " << buffer_skew << "/"
                                        << packed_skew);
        Arena buffer(static_cast<std::size_t>(hi - lo), buffer_skew);
        char *origin = buffer.at - lo;
        for (std::int64_t b = lo; b < hi; ++b) origin[b] = static_cast<char>(rng());
        Arena packed(static_cast<std::size_t>(len) + 32, packed_skew);
        pack(origin, first, len, packed.at);
        for (std::int64_t i = 0; i < len; ++i) {
            ASSERT_EQ(static_cast<unsigned char>(packed.at[i]),
                      static_cast<unsigned char>(origin[map[static_cast<std::size_t>(first + i)]]))
                << "packed byte " << first + i;
        }
        for (int g = 0; g < 16; ++g) {
            ASSERT_EQ(static_cast<unsigned char>(packed.at[len + g]), kUnset) << "guard byte " << g << " after";
            ASSERT_EQ(static_cast<unsigned char>(packed.at[-1 - g]), kUnset) << "guard byte " << g << " before";
        }
        // Unpack new bytes into a buffer all kUnset: exactly the range's bytes change.
        for (std::int64_t i = 0; i < len; ++i) packed.at[i] = static_cast<char>(rng() | 1);
        std::vector<unsigned char> want(static_cast<std::size_t>(hi - lo) + 64, kUnset);
        for (std::int64_t i = 0; i < len; ++i)
            want[static_cast<std::size_t>(map[static_cast<std::size_t>(first + i)] - lo + 16)] =
                static_cast<unsigned char>(packed.at[i]);
        Arena target(static_cast<std::size_t>(hi - lo), buffer_skew);
        unpack(target.at - lo, first, len, packed.at);
        for (std::int64_t b = -16; b < hi - lo + 16; ++b)
            ASSERT_EQ(static_cast<unsigned char>(target.at[b]), want[static_cast<std::size_t>(b + 16)])
                << "buffer byte " << b + lo;
    }
}

TEST(PackBody, StridedFormsAnyRangeAnyGrid) {
    std::mt19937_64 rng(kSeed);
    for (int shape = 0; shape < 150; ++shape) {
        StridedForm f;
        const std::int64_t word = std::int64_t{1} << (rng() % 5);
        f.block = word * (1 + static_cast<std::int64_t>(rng() % 6));
        const int dims = 1 + static_cast<int>(rng() % 3);
        std::int64_t span = f.block;
        for (int d = 0; d < dims; ++d) {
            f.count[d] = 1 + static_cast<std::int64_t>(rng() % 5);
            // Blocks never overlap (unpack needs that), the gap a multiple of the word in
            // most shapes and of nothing in some.
            const std::int64_t gap =
                (rng() % 4 == 0) ? static_cast<std::int64_t>(rng() % 7) : word * static_cast<std::int64_t>(rng() % 4);
            f.stride[d] = span + gap;
            if (rng() % 4 == 0) f.stride[d] = -f.stride[d];
            span = (span + gap) * f.count[d];
        }
        f.offset = static_cast<std::int64_t>(rng() % 64) - 32;
        std::int64_t lo = f.offset, hi = f.offset + f.block;
        for (int d = 0; d < dims; ++d) {
            const std::int64_t reach = f.stride[d] * (f.count[d] - 1);
            if (reach < 0) lo += reach;
            if (reach > 0) hi += reach;
        }
        const std::vector<std::int64_t> map = strided_map(f);
        const std::uint64_t threads = std::uint64_t{1} << (rng() % 10);
        auto pack = [&](char *origin, std::int64_t first, std::int64_t len, char *out) {
            const unsigned w = strided_word_bytes(f, origin + f.offset, out, first, len);
            run_strided<true>(plan_strided(f, origin + f.offset, out, first, len, w, threads), w, threads);
        };
        auto unpack = [&](char *origin, std::int64_t first, std::int64_t len, char *in) {
            const unsigned w = strided_word_bytes(f, origin + f.offset, in, first, len);
            run_strided<false>(plan_strided(f, origin + f.offset, in, first, len, w, threads), w, threads);
        };
        check_ranges(map, lo, hi, rng, pack, unpack, "strided");
        if (HasFatalFailure()) return;
    }
}

TEST(PackBody, StridedWordIsTheWidestTheLayoutAllows) {
    alignas(16) static char bytes[64];
    StridedForm f;
    f.block = 64;
    f.count[0] = 4;
    f.stride[0] = 128;
    EXPECT_EQ(strided_word_bytes(f, bytes, bytes, 0, 256), 16u);
    EXPECT_EQ(strided_word_bytes(f, bytes + 8, bytes, 0, 256), 8u);
    EXPECT_EQ(strided_word_bytes(f, bytes, bytes + 4, 0, 256), 4u);
    EXPECT_EQ(strided_word_bytes(f, bytes, bytes, 2, 254), 2u);
    EXPECT_EQ(strided_word_bytes(f, bytes, bytes, 0, 255), 1u);
    f.stride[0] = 72;
    EXPECT_EQ(strided_word_bytes(f, bytes, bytes, 0, 256), 8u);
    // A dimension of count 1 does not constrain the word.
    f.count[1] = 1;
    f.stride[1] = 3;
    EXPECT_EQ(strided_word_bytes(f, bytes, bytes, 0, 256), 8u);
}

TEST(PackBody, WorkUnitsAnyRangeAnyGrid) {
    std::mt19937_64 rng(kSeed + 1);
    for (int shape = 0; shape < 150; ++shape) {
        // Runs in packed order at any offsets that do not overlap, cut into units.
        std::vector<WorkUnit> units;
        const int runs = 1 + static_cast<int>(rng() % 6);
        std::int64_t size = 0, cursor = static_cast<std::int64_t>(rng() % 40) - 20, lo = cursor, hi = cursor;
        const std::int64_t unit_bytes = (rng() % 2) ? kUnitBytes : 1 + static_cast<std::int64_t>(rng() % 40);
        std::vector<std::pair<std::int64_t, std::int64_t>> placed;
        for (int r = 0; r < runs; ++r) {
            const std::int64_t length = 1 + static_cast<std::int64_t>(rng() % (rng() % 4 == 0 ? 3000 : 40));
            placed.emplace_back(cursor, length);
            cursor += length + static_cast<std::int64_t>(rng() % 24);
        }
        // Packed order is not memory order in some shapes (a struct's, a reversed vector's).
        if (rng() % 3 == 0) std::swap(placed.front(), placed.back());
        for (const auto &run : placed) {
            for (std::int64_t cut = 0; cut < run.second; cut += unit_bytes)
                units.push_back({run.first + cut, size + cut, std::min(unit_bytes, run.second - cut)});
            size += run.second;
            lo = std::min(lo, run.first);
            hi = std::max(hi, run.first + run.second);
        }
        const std::int64_t extent = (hi - lo) + static_cast<std::int64_t>(rng() % 32);
        const std::int64_t count = 1 + static_cast<std::int64_t>(rng() % 4);
        const std::vector<std::int64_t> map = units_map(units, extent, count);
        std::vector<DeviceUnit> device_units;
        for (const WorkUnit &u : units) device_units.push_back({u.offset, u.packed, u.length});
        const std::uint64_t groups = 1 + rng() % 70;
        // The planned group size, and any other in some shapes.
        const int lane_shift = rng() % 2 ? -1 : static_cast<int>(rng() % (kMaxLaneShift + 1));
        auto run = [&](bool pack, char *origin, std::int64_t first, std::int64_t len, char *packed) {
            UnitsArgs a = plan_units(units, size, extent, origin, packed, first, len);
            a.units = device_units.data();
            if (lane_shift >= 0) a.lane_shift = static_cast<unsigned>(lane_shift);
            if (pack)
                run_units<true>(a, groups);
            else
                run_units<false>(a, groups);
        };
        check_ranges(
            map, lo, hi + (count - 1) * extent, rng,
            [&](char *o, std::int64_t f, std::int64_t l, char *p) { run(true, o, f, l, p); },
            [&](char *o, std::int64_t f, std::int64_t l, char *p) { run(false, o, f, l, p); }, "units");
        if (HasFatalFailure()) return;
    }
}

TEST(PackBody, UnitsGroupIsAboutOneWordALane) {
    const std::vector<WorkUnit> small = {{0, 0, 8}, {16, 8, 8}};
    EXPECT_EQ(plan_units(small, 16, 32, nullptr, nullptr, 0, 16).lane_shift, 0u);
    const std::vector<WorkUnit> mid = {{0, 0, 100}};
    EXPECT_EQ(plan_units(mid, 100, 200, nullptr, nullptr, 0, 100).lane_shift, 3u);  // 8 lanes
    const std::vector<WorkUnit> full = {{0, 0, kUnitBytes}, {2048, kUnitBytes, kUnitBytes}};
    EXPECT_EQ(plan_units(full, 2 * kUnitBytes, 4096, nullptr, nullptr, 0, 100).lane_shift, kMaxLaneShift);
}

TEST(PackBody, UnitsPlanCoversOnlyTheRangesPairs) {
    // Two elements of units at packed 0, 100, 300 (size 400).
    const std::vector<WorkUnit> units = {{0, 0, 100}, {200, 100, 200}, {500, 300, 100}};
    UnitsArgs a = plan_units(units, 400, 1000, nullptr, nullptr, 150, 400);
    EXPECT_EQ(a.first_pair, 1u);  // element 0, unit 1 holds byte 150
    EXPECT_EQ(a.pairs, 4u);       // ... to element 1, unit 1 (byte 549 is its 149th)
    a = plan_units(units, 400, 1000, nullptr, nullptr, 300, 1);
    EXPECT_EQ(a.first_pair, 2u);
    EXPECT_EQ(a.pairs, 1u);
}

}  // namespace
}  // namespace cuda
}  // namespace mpiacc
