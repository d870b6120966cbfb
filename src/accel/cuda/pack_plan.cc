#include "accel/cuda/pack_plan.h"

#include <mpi.h>

#include <algorithm>

#include "util/error.h"

namespace mpiacc {
namespace cuda {

namespace {

// `p` moved by `bytes`: at MPI_BOTTOM `p` is null and the offsets are addresses.
char *moved(char *p, std::int64_t bytes) {
    return reinterpret_cast<char *>(reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes));
}

}  // namespace

int choose_pack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                char *packed, bool pack, PackChoice *choice, std::string *why) {
    const std::int64_t size = flat.size();
    if (count < 0 || first < 0 || len < 0 || (size > 0 && count > INT64_MAX / size) || first > count * size - len) {
        *why = format("device %s of packed bytes [%lld, %lld) of %lld elements of %lld bytes: outside the packed data",
                      pack ? "pack" : "unpack", static_cast<long long>(first), static_cast<long long>(first) + len,
                      static_cast<long long>(count), static_cast<long long>(size));
        return MPI_ERR_ARG;
    }
    *choice = PackChoice{};
    if (len == 0) return MPI_SUCCESS;
    if (flat.dense()) {
        // One run of count * size bytes: a copy engine moves it at full speed.
        char *spread = moved(origin, flat.true_lb() + first);
        choice->kind = PackChoice::Kind::COPY;
        choice->copy_to = pack ? packed : spread;
        choice->copy_from = pack ? spread : packed;
        choice->copy_bytes = len;
        return MPI_SUCCESS;
    }
    if (flat.strided(count, &choice->form) && choice->form.block > 0) {
        choice->kind = PackChoice::Kind::STRIDED;
        choice->base = moved(origin, choice->form.offset);
        choice->word = strided_word_bytes(choice->form, choice->base, packed, first, len);
        return MPI_SUCCESS;
    }
    choice->kind = PackChoice::Kind::UNITS;
    return MPI_SUCCESS;
}

unsigned strided_word_bytes(const StridedForm &form, const char *base, const void *packed, std::int64_t first,
                            std::int64_t len) {
    std::uint64_t bits = static_cast<std::uint64_t>(form.block) | static_cast<std::uint64_t>(first) |
                         static_cast<std::uint64_t>(len) | reinterpret_cast<std::uintptr_t>(base) |
                         reinterpret_cast<std::uintptr_t>(packed);
    for (int d = 0; d < kMaxStridedDims; ++d)
        if (form.count[d] > 1) bits |= static_cast<std::uint64_t>(form.stride[d]);
    unsigned word = 16;
    while (word > 1 && (bits & (word - 1)) != 0) word /= 2;
    return word;
}

StridedArgs plan_strided(const StridedForm &form, char *base, char *packed, std::int64_t first, std::int64_t len,
                         unsigned word, std::uint64_t threads) {
    StridedArgs a{};
    a.base = base;
    a.packed = packed;
    a.words = static_cast<std::uint64_t>(len) / word;
    a.first_word = static_cast<std::uint64_t>(first) / word;
    a.block_words = static_cast<std::uint64_t>(form.block) / word;
    a.count0 = static_cast<std::uint64_t>(form.count[0]);
    a.count1 = static_cast<std::uint64_t>(form.count[1]);
    // Strides in bytes: a word's address is the block's plus the word's place in it.
    a.stride0 = form.stride[0];
    a.stride1 = form.stride[1];
    a.stride2 = form.stride[2];
    std::uint64_t q = threads / a.block_words;
    a.step_w = threads - q * a.block_words;
    a.step0 = q % a.count0;
    q /= a.count0;
    a.step1 = q % a.count1;
    a.step2 = q / a.count1;
    return a;
}

namespace {

// The unit holding byte `at` of an element's packed form.
std::uint64_t unit_at(const std::vector<WorkUnit> &units, std::int64_t at) {
    auto after = std::upper_bound(units.begin(), units.end(), at,
                                  [](std::int64_t p, const WorkUnit &u) { return p < u.packed; });
    return static_cast<std::uint64_t>(after - units.begin()) - 1;
}

}  // namespace

UnitsArgs plan_units(const std::vector<WorkUnit> &units, std::int64_t size, std::int64_t extent, char *origin,
                     char *packed, std::int64_t first, std::int64_t len) {
    UnitsArgs a{};
    a.origin = origin;
    a.packed = packed;
    a.unit_count = units.size();
    a.extent = extent;
    a.size = size;
    a.first = first;
    a.len = len;
    const std::int64_t last = first + len - 1;
    a.first_pair = static_cast<std::uint64_t>(first / size) * a.unit_count + unit_at(units, first % size);
    const std::uint64_t last_pair =
        static_cast<std::uint64_t>(last / size) * a.unit_count + unit_at(units, last % size);
    a.pairs = last_pair - a.first_pair + 1;
    // About one 16-byte word a lane per unit: short units leave no lane idle.
    const std::int64_t average = size / static_cast<std::int64_t>(units.size());
    while (a.lane_shift < kMaxLaneShift && (std::int64_t{16} << a.lane_shift) < average) ++a.lane_shift;
    return a;
}

}  // namespace cuda
}  // namespace mpiacc
