/* The flattened-type description (src/datatype/flat_type.h) and the host engine against
 * MPICH's own MPI_Pack and MPI_Unpack: thousands of random nested datatypes, packed and
 * unpacked over random byte ranges, byte for byte, with guard bytes around the buffer;
 * the strided forms of the common shapes; the cache and a freed handle reused; errors.
 * A failing random case prints its seed; MPIACC_TEST_SEED=N repeats that run.
 * MPIACC-TEST-RANKS: 1 */
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "datatype/flat_type.h"
extern "C" {
#include "mpiacc_hooks.h"
}
#include "mpitest.h"
#include "random_types.h"

namespace {

constexpr std::int64_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;

// A buffer for `count` elements of a type, with guard bytes on both sides of what the
// elements touch; origin() is the buffer argument.
struct Footprint {
    Footprint(MPI_Datatype type, std::int64_t count) {
        MPI_Count lo, hi;
        random_types::footprint(type, count, &lo, &hi);
        lo_ = lo;
        bytes.assign(static_cast<std::size_t>(hi - lo + 2 * kGuard), kGuardByte);
    }
    char *origin() { return bytes.data() + kGuard - lo_; }
    void fill(std::uint64_t seed) {
        for (std::size_t i = kGuard; i + kGuard < bytes.size(); ++i) bytes[i] = static_cast<char>(mt_byte(seed, i));
    }
    bool guards_intact() const {
        for (std::size_t i = 0; i < static_cast<std::size_t>(kGuard); ++i)
            if (static_cast<unsigned char>(bytes[i]) != kGuardByte ||
                static_cast<unsigned char>(bytes[bytes.size() - 1 - i]) != kGuardByte)
                return false;
        return true;
    }
    std::int64_t lo_;
    std::vector<char> bytes;
};

std::vector<char> mpi_pack(const void *buf, std::int64_t count, MPI_Datatype type, std::int64_t bytes) {
    std::vector<char> out(static_cast<std::size_t>(bytes) + 1);
    MPI_Count pos = 0;
    MPI_Pack_c(buf, count, type, out.data(), bytes, &pos, MPI_COMM_SELF);
    out.resize(static_cast<std::size_t>(bytes));
    return out;
}

// Whether the pieces of `count` elements overlap in memory (then an unpack is not
// undone by a pack).
bool pieces_overlap(const mpiacc::FlatType &flat, std::int64_t count) {
    std::vector<mpiacc::Run> pieces;
    flat.for_each_piece(count, 0, count * flat.size(), [&](std::int64_t off, std::int64_t, std::int64_t len) {
        pieces.push_back({off, len});
    });
    std::sort(pieces.begin(), pieces.end(),
              [](const mpiacc::Run &a, const mpiacc::Run &b) { return a.offset < b.offset; });
    for (std::size_t i = 1; i < pieces.size(); ++i)
        if (pieces[i].offset < pieces[i - 1].offset + pieces[i - 1].length) return true;
    return false;
}

// One random type and count: every check of the property. Returns false on the first
// failure, having said which.
struct Tally {
    long long bytes = 0, strided = 0, runs = 0;
};

bool check_type(std::mt19937_64 &rng, MPI_Datatype type, std::int64_t count, std::uint64_t seed, Tally *tally) {
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const mpiacc::FlatType> flat = mpiacc::flat_type(type, &error, &why);
    if (!flat) {
        MT_CHECK(false, "seed %llu: flat_type failed (%d: %s) for %s", (unsigned long long)seed, error, why.c_str(),
                 random_types::describe(type).c_str());
        return false;
    }
    const std::int64_t total = count * flat->size();
    tally->bytes += total;
    tally->runs += static_cast<long long>(flat->runs().size());
    Footprint src(type, count);
    src.fill(seed);
    const std::vector<char> expect = mpi_pack(src.origin(), count, type, total);

    // The pieces of a random range are in packed order and cover it exactly.
    auto range = [&](std::int64_t *first, std::int64_t *len) {
        *first = total ? std::uniform_int_distribution<std::int64_t>(0, total)(rng) : 0;
        *len = std::uniform_int_distribution<std::int64_t>(0, total - *first)(rng);
    };
    for (int r = 0; r < 4; ++r) {
        std::int64_t first, len, next = 0;
        range(&first, &len);
        bool ordered = true;
        flat->for_each_piece(count, first, len, [&](std::int64_t, std::int64_t packed, std::int64_t n) {
            ordered = ordered && packed == next && n > 0;
            next = packed + n;
        });
        if (!ordered || next != len) {
            MT_CHECK(false, "seed %llu: pieces of [%lld, +%lld) do not cover it in order (%s, count %lld)",
                     (unsigned long long)seed, (long long)first, (long long)len, random_types::describe(type).c_str(),
                     (long long)count);
            return false;
        }
        std::vector<char> got(static_cast<std::size_t>(len) + kGuard, static_cast<char>(kGuardByte));
        mpiacc::pack_bytes(*flat, src.origin(), count, first, len, got.data());
        const bool same = std::equal(got.begin(), got.begin() + len, expect.begin() + first);
        const bool guard =
            std::all_of(got.begin() + len, got.end(), [](char c) { return (unsigned char)c == kGuardByte; });
        if (!same || !guard) {
            MT_CHECK(false, "seed %llu: pack_bytes [%lld, +%lld) differs from MPI_Pack (%s, count %lld)",
                     (unsigned long long)seed, (long long)first, (long long)len, random_types::describe(type).c_str(),
                     (long long)count);
            return false;
        }
    }

    // Unpacking in random consecutive ranges writes what MPI_Unpack of the whole writes,
    // and nothing outside the footprint.
    Footprint want(type, count), got(type, count);
    want.fill(seed + 1);
    got.fill(seed + 1);
    MPI_Count pos = 0;
    MPI_Unpack_c(expect.data(), total, &pos, want.origin(), count, type, MPI_COMM_SELF);
    for (std::int64_t first = 0; first < total;) {
        const std::int64_t len = std::uniform_int_distribution<std::int64_t>(1, total - first)(rng);
        mpiacc::unpack_bytes(*flat, expect.data() + first, len, got.origin(), count, first);
        first += len;
    }
    if (got.bytes != want.bytes || !got.guards_intact()) {
        MT_CHECK(false, "seed %llu: unpack_bytes differs from MPI_Unpack%s (%s, count %lld)", (unsigned long long)seed,
                 got.guards_intact() ? "" : " and wrote a guard byte", random_types::describe(type).c_str(),
                 (long long)count);
        return false;
    }
    // Round trip: what was unpacked packs to the same bytes (where no bytes are written twice).
    if (!pieces_overlap(*flat, count)) {
        std::vector<char> again(static_cast<std::size_t>(total));
        mpiacc::pack_bytes(*flat, got.origin(), count, 0, total, again.data());
        if (again != expect) {
            MT_CHECK(false, "seed %llu: pack after unpack differs (%s, count %lld)", (unsigned long long)seed,
                     random_types::describe(type).c_str(), (long long)count);
            return false;
        }
    }
    // units() are runs() cut at kUnitBytes, and together the element's packed bytes.
    std::int64_t packed = 0;
    for (const mpiacc::WorkUnit &u : flat->units()) {
        if (u.packed != packed || u.length <= 0 || u.length > mpiacc::kUnitBytes) {
            MT_CHECK(false, "seed %llu: units() are not consecutive pieces of at most kUnitBytes (%s)",
                     (unsigned long long)seed, random_types::describe(type).c_str());
            return false;
        }
        packed += u.length;
    }
    if (packed != flat->size()) {
        MT_CHECK(false, "seed %llu: units() cover %lld bytes of %lld", (unsigned long long)seed, (long long)packed,
                 (long long)flat->size());
        return false;
    }
    // The strided form, when there is one, names the same bytes in the same order.
    mpiacc::StridedForm form;
    if (flat->strided(count, &form)) {
        tally->strided++;
        std::vector<char> viaform;
        for (std::int64_t i2 = 0; i2 < form.count[2]; ++i2)
            for (std::int64_t i1 = 0; i1 < form.count[1]; ++i1)
                for (std::int64_t i0 = 0; i0 < form.count[0]; ++i0) {
                    const char *at =
                        src.origin() + form.offset + i0 * form.stride[0] + i1 * form.stride[1] + i2 * form.stride[2];
                    viaform.insert(viaform.end(), at, at + form.block);
                }
        if (viaform != expect) {
            MT_CHECK(false, "seed %llu: the strided form names other bytes than MPI_Pack packs (%s, count %lld)",
                     (unsigned long long)seed, random_types::describe(type).c_str(), (long long)count);
            return false;
        }
    }
    return true;
}

std::uint64_t chosen_seed() {
    const char *s = std::getenv("MPIACC_TEST_SEED");
    if (s && *s) return std::strtoull(s, nullptr, 10);
    return 20261207;  // fixed, so that a CI run is repeatable; the variable explores others
}

std::shared_ptr<const mpiacc::FlatType> flat_of(MPI_Datatype type) {
    int error = MPI_SUCCESS;
    std::string why;
    return mpiacc::flat_type(type, &error, &why);
}

bool form_is(const mpiacc::StridedForm &f, std::int64_t offset, std::int64_t block, std::vector<std::int64_t> counts,
             std::vector<std::int64_t> strides) {
    counts.resize(mpiacc::kMaxStridedDims, 1);
    strides.resize(mpiacc::kMaxStridedDims, 0);
    for (int d = 0; d < mpiacc::kMaxStridedDims; ++d)
        if (f.count[d] != counts[d] || f.stride[d] != strides[d]) return false;
    return f.offset == offset && f.block == block;
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);

    MT_CASE("random_nested_types_pack_and_unpack_as_mpich_does") {
        const std::uint64_t seed = chosen_seed();
        std::mt19937_64 rng(seed);
        const int kTypes = 50000;
        int done = 0, empty_parts = 0;
        Tally tally;
        const double start = MPI_Wtime();
        for (; done < kTypes; ++done) {
            const std::uint64_t case_seed = rng();
            std::mt19937_64 case_rng(case_seed);
            MPI_Datatype t = random_types::random_type(case_rng, 1 + static_cast<int>(case_seed % 5));
            if (random_types::has_empty_part(t)) {  // MPICH's MPI_Pack, the reference, cannot pack it
                ++empty_parts;
                MPI_Type_free(&t);
                continue;
            }
            const std::int64_t count = std::uniform_int_distribution<int>(0, 4)(case_rng);
            const bool ok = check_type(case_rng, t, count, case_seed, &tally);
            MPI_Type_free(&t);
            if (!ok) {
                MT_CHECK(false, "run seed %llu (MPIACC_TEST_SEED=%llu repeats it), type %d", (unsigned long long)seed,
                         (unsigned long long)seed, done);
                break;
            }
        }
        printf(
            "# %d random datatypes checked in %.1f s (seed %llu): %lld packed bytes, %lld runs, %lld strided; %d left "
            "out for an empty part\n",
            done - empty_parts, MPI_Wtime() - start, (unsigned long long)seed, tally.bytes, tally.runs, tally.strided,
            empty_parts);
    }

    MT_CASE("vectors_subarrays_and_their_nests_have_one_strided_form") {
        MPI_Datatype vec, nest, sub, resized;
        MPI_Type_vector(4, 2, 5, MPI_INT, &vec);  // 4 blocks of 8 bytes, 20 apart
        MPI_Type_commit(&vec);
        mpiacc::StridedForm f;
        auto fv = flat_of(vec);
        MT_CHECK(fv && fv->strided(1, &f) && form_is(f, 0, 8, {4}, {20}), "vector(4, 2, 5, int)");
        // Elements of a vector do not abut: count adds a dimension of the extent (68 bytes).
        MT_CHECK(fv && fv->strided(3, &f) && form_is(f, 0, 8, {4, 3}, {20, 68}), "3 x vector");
        MT_CHECK(fv && !fv->dense() && fv->runs().size() == 4, "vector runs");
        // A vector of vectors whose strides line up is one dimension; one that does not, two.
        MPI_Type_create_hvector(3, 1, 80, vec, &nest);
        MPI_Type_commit(&nest);
        auto fn = flat_of(nest);
        MT_CHECK(fn && fn->strided(1, &f) && form_is(f, 0, 8, {12}, {20}), "hvector(3, 80, vector) merges");
        // A 3-D C-order subarray of doubles: rows of 2 elements, 4 rows of 6, 2 planes of 5x6.
        const int sizes[3] = {3, 5, 6}, subsizes[3] = {2, 4, 2}, starts[3] = {1, 1, 3};
        MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &sub);
        MPI_Type_commit(&sub);
        auto fs = flat_of(sub);
        MT_CHECK(fs && fs->strided(1, &f) && form_is(f, (1 * 30 + 1 * 6 + 3) * 8, 16, {4, 2}, {48, 240}),
                 "subarray 3x5x6: offset %lld block %lld counts %lld %lld %lld", fs ? (long long)f.offset : -1,
                 (long long)f.block, (long long)f.count[0], (long long)f.count[1], (long long)f.count[2]);
        MT_CHECK(fs && fs->strided(2, &f) && form_is(f, 312, 16, {4, 2, 2}, {48, 240, 720}), "2 x subarray");
        // Repeated again in a fourth dimension: no strided form, but the same bytes.
        MPI_Datatype two, four;
        MPI_Type_contiguous(2, sub, &two);
        MPI_Type_create_hvector(3, 1, 5000, two, &four);
        MPI_Type_commit(&four);
        auto f4 = flat_of(four);
        MT_CHECK(f4 && !f4->strided(1, &f) && f4->size() == 3 * 2 * 16 * 8 && f4->runs().size() == 48,
                 "4-D nest: strided %d size %lld runs %zu", f4 ? (int)f4->strided(1, &f) : -1,
                 f4 ? (long long)f4->size() : -1LL, f4 ? f4->runs().size() : 0);
        MPI_Type_free(&two);
        MPI_Type_free(&four);
        // A resized contiguous block repeated: the count is the only dimension; resized to
        // its own size, count elements are one block.
        MPI_Type_create_resized(MPI_DOUBLE, -8, 24, &resized);
        MPI_Type_commit(&resized);
        auto fr = flat_of(resized);
        MT_CHECK(fr && fr->strided(5, &f) && form_is(f, 0, 8, {5}, {24}), "5 x resized double");
        auto fc = flat_of(MPI_INT);
        MT_CHECK(fc && fc->dense() && fc->strided(7, &f) && form_is(f, 0, 28, {}, {}), "7 ints are one block");
        MPI_Type_free(&vec);
        MPI_Type_free(&nest);
        MPI_Type_free(&sub);
        MPI_Type_free(&resized);
    }

    MT_CASE("pieces_of_a_large_strided_type_need_no_run_list") {
        // 2^24 blocks: for_each_piece computes indices; the ranges asked for come out exact.
        MPI_Datatype big;
        MPI_Type_vector(1 << 24, 1, 2, MPI_CHAR, &big);
        MPI_Type_commit(&big);
        auto fb = flat_of(big);
        std::int64_t pieces = 0, first_offset = -1, packed = 0;
        if (fb) {
            fb->for_each_piece(1, 1000001, 3, [&](std::int64_t off, std::int64_t p, std::int64_t n) {
                if (first_offset < 0) first_offset = off;
                pieces++;
                packed = p + n;
            });
        }
        MT_CHECK(fb && pieces == 3 && first_offset == 2000002 && packed == 3, "%lld pieces from %lld",
                 (long long)pieces, (long long)first_offset);
        MPI_Type_free(&big);
    }

    MT_CASE("a_second_flat_type_reads_the_cache_and_a_reused_handle_is_described_anew") {
        MPI_Datatype t;
        MPI_Type_vector(3, 1, 2, MPI_INT, &t);
        MPI_Type_commit(&t);
        const long long before = mpiacc_counter_value("datatype.flatten");
        auto a = flat_of(t);
        const long long once = mpiacc_counter_value("datatype.flatten");
        auto b = flat_of(t);
        MT_CHECK(once - before == 1 && mpiacc_counter_value("datatype.flatten") == once && a == b,
                 "flattened %lld times, then %lld more", once - before,
                 mpiacc_counter_value("datatype.flatten") - once);
        const MPI_Datatype old_handle = t;
        MPI_Type_free(&t);
        // MPICH hands the freed handle out again: the new type must not read the old form.
        MPI_Datatype u;
        MPI_Type_contiguous(5, MPI_SHORT, &u);
        MPI_Type_commit(&u);
        const long long before_new = mpiacc_counter_value("datatype.flatten");
        auto c = flat_of(u);
        MT_CHECK(c && c->size() == 10 && c->dense() && mpiacc_counter_value("datatype.flatten") == before_new + 1,
                 "the new type's size %lld, flattened %lld times (handle %s)", c ? (long long)c->size() : -1,
                 mpiacc_counter_value("datatype.flatten") - before_new, u == old_handle ? "reused" : "not reused");
        MT_CHECK(a && a->size() == 12 && a->runs().size() == 3, "the old form lives while it is held");
        MPI_Type_free(&u);
    }

    MT_CASE("f90_types_inside_derived_types_pack_as_mpich_does") {
        // MPI_Type_create_f90_* types count as predefined, but are not named.
        MPI_Datatype real, integer, types[2], s;
        MPI_Type_create_f90_real(6, 30, &real);
        MPI_Type_create_f90_integer(9, &integer);
        types[0] = real;
        types[1] = integer;
        int lengths[2] = {3, 2};
        MPI_Aint disps[2] = {-20, 16};
        MPI_Type_create_struct(2, lengths, disps, types, &s);
        MPI_Type_commit(&s);
        std::mt19937_64 rng(7);
        Tally tally;
        MT_CHECK(check_type(rng, s, 3, 7, &tally), "struct of f90 real and integer");
        MPI_Type_free(&s);
    }

    MT_CASE("mpi_bottom_with_absolute_addresses_packs_and_unpacks_any_range") {
        double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
        MPI_Aint at[2];
        MPI_Get_address(&a[1], &at[0]);
        MPI_Get_address(&b[2], &at[1]);
        const int lengths[2] = {1, 2};
        MPI_Datatype t;
        MPI_Type_create_hindexed(2, lengths, at, MPI_DOUBLE, &t);
        MPI_Type_commit(&t);
        auto flat = flat_of(t);
        double out[3] = {0, 0, 0};
        const int rc =
            flat ? mpiacc::pack_bytes(*flat, MPI_BOTTOM, 1, 4, 20, reinterpret_cast<char *>(out) + 4) : MPI_ERR_TYPE;
        const double expect[3] = {2, 7, 8};
        MT_CHECK(
            rc == MPI_SUCCESS &&
                std::memcmp(reinterpret_cast<char *>(out) + 4, reinterpret_cast<const char *>(expect) + 4, 20) == 0 &&
                std::memcmp(out, "\0\0\0\0", 4) == 0,
            "packed bytes [4, 24) differ, or bytes before them were written");
        const double in[3] = {-1, -2, -3};
        if (flat) mpiacc::unpack_bytes(*flat, in, 24, MPI_BOTTOM, 1, 0);
        MT_CHECK(a[0] == 1 && a[1] == -1 && a[2] == 3 && b[1] == 6 && b[2] == -2 && b[3] == -3,
                 "unpacked into a %g %g %g, b %g %g %g", a[0], a[1], a[2], b[1], b[2], b[3]);
        MPI_Type_free(&t);
    }

    MT_CASE("device_copies_are_made_once_per_key_and_released_with_the_type") {
        MPI_Datatype t;
        MPI_Type_vector(3, 2, 4, MPI_INT, &t);
        MPI_Type_commit(&t);
        int made = 0;
        std::weak_ptr<void> watch;
        {
            auto flat = flat_of(t);
            const int key_a = 0, key_b = 0;
            auto make = [&] {
                ++made;
                return std::shared_ptr<void>(new int(made), [](void *p) { delete static_cast<int *>(p); });
            };
            auto a1 = flat->device_copy(&key_a, make);
            auto a2 = flat->device_copy(&key_a, make);
            auto b1 = flat->device_copy(&key_b, make);
            MT_CHECK(made == 2 && a1 == a2 && a1 != b1, "made %d copies for two keys", made);
            watch = a1;
        }
        MT_CHECK(!watch.expired(), "a device copy lives as long as its type");
        MPI_Type_free(&t);
        MT_CHECK(watch.expired(), "the device copy outlived MPI_Type_free");
    }

    MT_CASE("uncommitted_and_null_datatypes_are_refused_with_a_reason") {
        MPI_Datatype t;
        MPI_Type_vector(2, 1, 3, MPI_INT, &t);
        int error = MPI_SUCCESS;
        std::string why;
        MT_CHECK(!mpiacc::flat_type(t, &error, &why) && error == MPI_ERR_TYPE &&
                     why == "the datatype is not committed (MPI_Type_commit)",
                 "uncommitted: %d %s", error, why.c_str());
        error = MPI_SUCCESS;
        why.clear();
        MT_CHECK(!mpiacc::flat_type(MPI_DATATYPE_NULL, &error, &why) && error == MPI_ERR_TYPE &&
                     why == "the datatype is MPI_DATATYPE_NULL",
                 "null: %d %s", error, why.c_str());
        MPI_Type_free(&t);
    }

    return mt_finalize();
}
