/* The pack kernels (src/accel/cuda/pack.h) against MPICH's own MPI_Pack: for each of a
 * set of derived datatypes, a device buffer of random bytes is packed, range by range
 * (whole, random, and chunk by chunk as a pipeline does), into device memory and into
 * pinned host memory, and every byte is compared with PMPI_Pack of the same bytes on the
 * host; guard bytes around each packed range stay untouched. Then packed bytes are
 * unpacked, range by range, into a device buffer of other random bytes, which must end
 * as PMPI_Unpack leaves its host copy: the footprint's holes and the guard bytes around
 * it untouched. One rank; without a GPU every case skips by name.
 *
 * With PACK_TEST_ON_HOST (test/mpi/cuda_pack_emulated.cc) the same cases run with the
 * kernels' threads on the CPU (pack_body.h, grids of random sizes) and host memory for
 * both sides, through the same choice of kernel and arguments (pack_plan.h): so CI checks
 * what the kernels make of the real flattener's forms and units.
 * MPIACC-TEST-RANKS: 1 */
#include <cuda_runtime.h>  // the typed cudaMalloc overloads

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../mpi/mpitest.h"
#include "../mpi/random_types.h"
#include "accel/cuda/pack.h"
#include "config.h"
#include "accel/cuda/pack_plan.h"
#include "datatype/flat_type.h"

namespace {

using mpiacc::FlatType;
using mpiacc::cuda::PackKernels;

constexpr std::uint64_t kSeed = 0x5eed2026;
constexpr std::int64_t kGuard = 256;
constexpr unsigned char kSentinel = 0xa5;
// Random types per case; PACK_TEST_RANDOM_TYPES=N sets fewer for slow runs (compute-sanitizer).
int random_type_count() {
    const char *v = getenv("PACK_TEST_RANDOM_TYPES");
    return v && atoi(v) > 0 ? atoi(v) : 300;
}

#define CK(call)                                                                                        \
    do {                                                                                                \
        cudaError_t ck_e_ = (call);                                                                     \
        if (ck_e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "# %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(ck_e_)); \
            printf("Bail out! %s failed (details on stderr)\n", #call);                                 \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                               \
        }                                                                                               \
    } while (0)

struct Case {
    std::string name;
    MPI_Datatype type;
    int count;
};

MPI_Datatype committed(MPI_Datatype t) {
    MPI_Type_commit(&t);
    return t;
}

// The constructors below free the type they build on: the new type keeps what it needs.
MPI_Datatype adopt(MPI_Datatype made, MPI_Datatype old) {
    random_types::detail::release(&old);
    return made;
}

MPI_Datatype vector(int count, int block, int stride, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_vector(count, block, stride, old, &t);
    return adopt(t, old);
}

MPI_Datatype hvector(int count, int block, MPI_Aint stride, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_hvector(count, block, stride, old, &t);
    return adopt(t, old);
}

MPI_Datatype subarray(int dims, const int *sizes, const int *subsizes, const int *starts, MPI_Datatype old) {
    MPI_Datatype t;
    MPI_Type_create_subarray(dims, sizes, subsizes, starts, MPI_ORDER_C, old, &t);
    return adopt(t, old);
}

MPI_Datatype resized(MPI_Datatype old, MPI_Aint lb, MPI_Aint extent) {
    MPI_Datatype t;
    MPI_Type_create_resized(old, lb, extent, &t);
    return adopt(t, old);
}

// The layouts the kernels must handle: strided forms of 1 to 3 dimensions and any word,
// and the generic kernel's triangles, structs, holes and negative offsets.
std::vector<Case> make_cases() {
    std::vector<Case> cases;
    cases.push_back({"vector_of_doubles", committed(vector(64, 3, 7, MPI_DOUBLE)), 3});
    cases.push_back({"hvector_odd_byte_stride", committed(hvector(33, 5, 37, MPI_FLOAT)), 2});
    cases.push_back({"nested_vector", committed(vector(5, 2, 4, vector(6, 1, 3, MPI_INT))), 2});
    const int s2[] = {64, 48}, col[] = {64, 1}, col_at[] = {0, 5}, row[] = {1, 48}, row_at[] = {7, 0};
    cases.push_back({"subarray_2d_column", committed(subarray(2, s2, col, col_at, MPI_DOUBLE)), 1});
    cases.push_back({"subarray_2d_row", committed(subarray(2, s2, row, row_at, MPI_DOUBLE)), 2});
    const int s3[] = {16, 12, 10}, zface[] = {16, 12, 1}, yface[] = {16, 1, 10}, xface[] = {1, 12, 10},
              at3[] = {0, 0, 0}, at3b[] = {3, 4, 9};
    cases.push_back({"subarray_3d_z_face", committed(subarray(3, s3, zface, at3b, MPI_FLOAT)), 1});
    cases.push_back({"subarray_3d_y_face", committed(subarray(3, s3, yface, at3b, MPI_FLOAT)), 2});
    cases.push_back({"subarray_3d_x_face", committed(subarray(3, s3, xface, at3, MPI_FLOAT)), 1});
    {
        const int n = 40;
        std::vector<int> lens(n), displs(n);
        for (int i = 0; i < n; ++i) lens[i] = i + 1, displs[i] = i * n;
        MPI_Datatype t;
        MPI_Type_indexed(n, lens.data(), displs.data(), MPI_DOUBLE, &t);
        cases.push_back({"indexed_lower_triangle", committed(t), 2});
    }
    {
        const int lens[] = {1, 3, 1};
        const MPI_Aint displs[] = {40, 8, 0};  // packed order is not memory order
        const MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_Datatype t;
        MPI_Type_create_struct(3, lens, displs, types, &t);
        cases.push_back({"struct_int_doubles_char", committed(t), 5});
    }
    cases.push_back({"resized_vector_count_7", committed(resized(vector(4, 2, 5, MPI_INT), 0, 100)), 7});
    cases.push_back({"hvector_negative_stride", committed(hvector(10, 2, -24, MPI_DOUBLE)), 3});
    cases.push_back({"resized_negative_lb", committed(resized(vector(3, 1, 2, MPI_DOUBLE), -16, 64)), 4});
    {
        const int lens[] = {3, 0, 2, 0, 5};
        const int displs[] = {0, 4, 7, 9, 12};
        MPI_Datatype t;
        MPI_Type_indexed(5, lens, displs, MPI_SHORT, &t);
        cases.push_back({"indexed_zero_length_blocks", committed(t), 3});
    }
    {
        std::vector<int> lens(3000), displs(3000);
        for (int i = 0; i < 3000; ++i) lens[i] = 1 + i % 3, displs[i] = i * 8 + i % 5;
        MPI_Datatype t;
        MPI_Type_indexed(3000, lens.data(), displs.data(), MPI_FLOAT, &t);
        cases.push_back({"indexed_many_small_blocks", committed(t), 1});
    }
    {
        MPI_Datatype t;
        MPI_Type_contiguous(1000, MPI_INT, &t);
        cases.push_back({"contiguous_dense", committed(t), 3});
    }
    // About 4 MiB packed: the grid-stride loops go round many times.
    cases.push_back({"vector_4mib", committed(vector(65536, 8, 12, MPI_DOUBLE)), 1});
    return cases;
}

// Where the test's buffers live and what packs them.
class Packer {
public:
    virtual ~Packer() = default;
    virtual char *alloc(std::size_t n) = 0;         // device memory
    virtual char *alloc_pinned(std::size_t n) = 0;  // host memory the packer reaches
    virtual void release(char *p) = 0;
    virtual void release_pinned(char *p) = 0;
    virtual void put(char *dst, const void *src, std::size_t n) = 0;  // into device memory
    virtual void get(void *dst, const char *src, std::size_t n) = 0;  // out of device memory
    virtual void fill(char *dst, int v, std::size_t n) = 0;
    virtual int pack(const FlatType &flat, const char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                     void *out, std::string *why) = 0;
    virtual int unpack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                       const void *in, std::string *why) = 0;
    virtual void finish() = 0;  // waits for what was enqueued
};

#ifndef PACK_TEST_ON_HOST
// The kernels on the GPU, on a stream of the test's own.
class GpuPacker final : public Packer {
public:
    explicit GpuPacker(PackKernels *kernels) : kernels_(kernels) {
        CK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    ~GpuPacker() override { CK(cudaStreamDestroy(stream_)); }
    char *alloc(std::size_t n) override {
        char *p = nullptr;
        CK(cudaMalloc(&p, n));
        return p;
    }
    char *alloc_pinned(std::size_t n) override {
        char *p = nullptr;
        CK(cudaMallocHost(&p, n));
        return p;
    }
    void release(char *p) override { CK(cudaFree(p)); }
    void release_pinned(char *p) override { CK(cudaFreeHost(p)); }
    // cudaMemcpy from pageable memory may return before the bytes land, and the test's
    // stream does not wait for the legacy stream: so wait for the device.
    void put(char *dst, const void *src, std::size_t n) override {
        CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
    }
    void get(void *dst, const char *src, std::size_t n) override {
        CK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
    }
    void fill(char *dst, int v, std::size_t n) override {
        CK(cudaMemset(dst, v, n));
        CK(cudaDeviceSynchronize());
    }
    int pack(const FlatType &flat, const char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
             void *out, std::string *why) override {
        return kernels_->enqueue_pack(flat, origin, count, first, len, out, stream_, why);
    }
    int unpack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
               const void *in, std::string *why) override {
        return kernels_->enqueue_unpack(flat, origin, count, first, len, in, stream_, why);
    }
    void finish() override { CK(cudaStreamSynchronize(stream_)); }

private:
    PackKernels *kernels_;
    cudaStream_t stream_ = nullptr;
};
#else
// The kernels' threads one after another on the CPU, in grids of random sizes.
class HostPacker final : public Packer {
public:
    explicit HostPacker(std::mt19937_64 *rng) : rng_(rng) {}
    char *alloc(std::size_t n) override { return static_cast<char *>(std::aligned_alloc(256, round(n))); }
    char *alloc_pinned(std::size_t n) override { return alloc(n); }
    void release(char *p) override { std::free(p); }
    void release_pinned(char *p) override { std::free(p); }
    void put(char *dst, const void *src, std::size_t n) override { memcpy(dst, src, n); }
    void get(void *dst, const char *src, std::size_t n) override { memcpy(dst, src, n); }
    void fill(char *dst, int v, std::size_t n) override { memset(dst, v, n); }
    int pack(const FlatType &flat, const char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
             void *out, std::string *why) override {
        return run(flat, const_cast<char *>(origin), count, first, len, static_cast<char *>(out), true, why);
    }
    int unpack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
               const void *in, std::string *why) override {
        return run(flat, origin, count, first, len, static_cast<char *>(const_cast<void *>(in)), false, why);
    }
    void finish() override {}

private:
    static std::size_t round(std::size_t n) { return (n + 255) / 256 * 256; }

    template <typename Word>
    static void strided(const mpiacc::cuda::StridedArgs &a, bool pack, std::uint64_t threads) {
        for (std::uint64_t t = 0; t < threads; ++t) {
            if (pack)
                mpiacc::cuda::strided_thread<Word, true>(a, t, threads);
            else
                mpiacc::cuda::strided_thread<Word, false>(a, t, threads);
        }
    }

    int run(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len, char *packed,
            bool pack, std::string *why) {
        using mpiacc::cuda::PackChoice;
        PackChoice choice;
        const int rc = mpiacc::cuda::choose_pack(flat, origin, count, first, len, packed, pack, &choice, why);
        if (rc != MPI_SUCCESS) return rc;
        if (choice.kind == PackChoice::Kind::COPY) {
            memcpy(choice.copy_to, choice.copy_from, static_cast<std::size_t>(choice.copy_bytes));
        } else if (choice.kind == PackChoice::Kind::STRIDED) {
            const std::uint64_t threads = 1 + (*rng_)() % 700;
            const mpiacc::cuda::StridedArgs a =
                mpiacc::cuda::plan_strided(choice.form, choice.base, packed, first, len, choice.word, threads);
            switch (choice.word) {
                case 16: strided<mpiacc::cuda::Word16>(a, pack, threads); break;
                case 8: strided<std::uint64_t>(a, pack, threads); break;
                case 4: strided<std::uint32_t>(a, pack, threads); break;
                case 2: strided<std::uint16_t>(a, pack, threads); break;
                default: strided<unsigned char>(a, pack, threads); break;
            }
        } else if (choice.kind == PackChoice::Kind::UNITS) {
            mpiacc::cuda::UnitsArgs a =
                mpiacc::cuda::plan_units(flat.units(), flat.size(), flat.extent(), origin, packed, first, len);
            a.units = reinterpret_cast<const mpiacc::cuda::DeviceUnit *>(flat.units().data());
            const std::uint64_t threads = (1 + (*rng_)() % 40) << a.lane_shift;
            for (std::uint64_t t = 0; t < threads; ++t) {
                if (pack)
                    mpiacc::cuda::units_thread<true>(a, t, threads);
                else
                    mpiacc::cuda::units_thread<false>(a, t, threads);
            }
        }
        return MPI_SUCCESS;
    }

    std::mt19937_64 *rng_;
};
#endif

// One case's reference bytes, and its buffers where the packer reads and writes.
struct Buffers {
    std::int64_t lo = 0, footprint = 0, packed = 0;
    std::vector<unsigned char> spread, packed_ref;
    char *dev_spread = nullptr;   // footprint plus guards, then 16 bytes of room for skew
    char *dev_packed = nullptr;   // packed plus guards plus 16
    char *host_packed = nullptr;  // pinned, the same size
};

std::int64_t rand_below(std::mt19937_64 &rng, std::int64_t n) {
    return n <= 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
}

using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

// A random range of [0, total).
std::pair<std::int64_t, std::int64_t> random_range(std::int64_t total, std::mt19937_64 &rng) {
    const std::int64_t first = rand_below(rng, total);
    return {first, 1 + rand_below(rng, total - first)};
}

// [0, total) chunk by chunk, as a pipeline packs it.
Ranges chunks(std::int64_t total, std::mt19937_64 &rng) {
    Ranges r;
    const std::int64_t chunk = std::max<std::int64_t>(1, total / (3 + rand_below(rng, 6)));
    for (std::int64_t at = 0; at < total; at += chunk) r.push_back({at, std::min(chunk, total - at)});
    return r;
}

bool all_sentinel(const unsigned char *p, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
        if (p[i] != kSentinel) return false;
    return true;
}

void check_pack(Packer &packer, const FlatType &flat, const Case &c, Buffers &b, std::mt19937_64 &rng) {
    std::vector<unsigned char> got(static_cast<std::size_t>(b.packed + 2 * kGuard + 16));
    for (int skew = 0; skew < 2; ++skew) {
        // The buffer at a 256-byte boundary, then at an odd address (narrower words).
        const std::int64_t spread_skew = skew ? 1 + rand_below(rng, 15) : 0;
        packer.put(b.dev_spread + spread_skew, b.spread.data(), b.spread.size());
        const char *origin = b.dev_spread + spread_skew + kGuard - b.lo;
        Ranges todo = {{0, b.packed}};
        for (int i = 0; i < 12; ++i) todo.push_back(random_range(b.packed, rng));
        for (const auto &chunk : chunks(b.packed, rng)) todo.push_back(chunk);
        for (const auto &range : todo) {
            const std::int64_t first = range.first, len = range.second;
            const std::int64_t out_skew = rand_below(rng, 16);
            for (int to_host = 0; to_host < 2; ++to_host) {
                char *out = (to_host ? b.host_packed : b.dev_packed);
                const std::size_t out_bytes = static_cast<std::size_t>(len + 2 * kGuard + 16);
                if (to_host)
                    memset(out, kSentinel, out_bytes);
                else
                    packer.fill(out, kSentinel, out_bytes);
                std::string why;
                const int rc = packer.pack(flat, origin, c.count, first, len, out + kGuard + out_skew, &why);
                MT_CHECK(rc == MPI_SUCCESS, "%s: pack [%lld, %lld): %d %s (seed %llu)", c.name.c_str(),
                         (long long)first, (long long)(first + len), rc, why.c_str(), (unsigned long long)kSeed);
                packer.finish();
                if (to_host)
                    memcpy(got.data(), out, out_bytes);
                else
                    packer.get(got.data(), out, out_bytes);
                const unsigned char *data = got.data() + kGuard + out_skew;
                if (memcmp(data, b.packed_ref.data() + first, static_cast<std::size_t>(len)) != 0) {
                    std::int64_t i = 0;
                    while (data[i] == b.packed_ref[static_cast<std::size_t>(first + i)]) ++i;
                    MT_CHECK(0,
                             "%s: pack [%lld, %lld) into %s memory, buffer skew %lld, output skew %lld: packed "
                             "byte %lld is 0x%02x, PMPI_Pack wrote 0x%02x (seed %llu)",
                             c.name.c_str(), (long long)first, (long long)(first + len),
                             to_host ? "pinned host" : "device", (long long)spread_skew, (long long)out_skew,
                             (long long)(first + i), data[i], b.packed_ref[static_cast<std::size_t>(first + i)],
                             (unsigned long long)kSeed);
                }
                MT_CHECK(
                    all_sentinel(got.data(), kGuard + out_skew) && all_sentinel(data + len, kGuard + 16 - out_skew),
                    "%s: pack [%lld, %lld) into %s memory wrote outside the range (seed %llu)", c.name.c_str(),
                    (long long)first, (long long)(first + len), to_host ? "pinned host" : "device",
                    (unsigned long long)kSeed);
                if (mt_case_failed) return;
            }
        }
    }
}

void check_unpack(Packer &packer, const FlatType &flat, const Case &c, Buffers &b, std::mt19937_64 &rng) {
    // The packed reference in device and in pinned host memory, unpacked from either.
    packer.put(b.dev_packed, b.packed_ref.data(), static_cast<std::size_t>(b.packed));
    memcpy(b.host_packed, b.packed_ref.data(), static_cast<std::size_t>(b.packed));
    std::vector<unsigned char> before(b.spread.size());
    for (auto &x : before) x = static_cast<unsigned char>(rng());
    std::vector<unsigned char> got(before.size());
    for (int trial = 0; trial < 2; ++trial) {
        // Trial 0: every range of a chunked cover; trial 1: one random range, the rest of
        // the footprint keeping its bytes.
        const Ranges todo = trial == 0 ? chunks(b.packed, rng) : Ranges{random_range(b.packed, rng)};
        // The expected bytes: PMPI_Pack the old bytes, put the ranges' new bytes in, and
        // PMPI_Unpack the whole (the types do not overlap, so the rest is rewritten as it was).
        std::vector<unsigned char> want = before, mixed(static_cast<std::size_t>(b.packed));
        char *want_origin = reinterpret_cast<char *>(want.data()) + kGuard - b.lo;
        int position = 0;
        PMPI_Pack(want_origin, c.count, c.type, mixed.data(), static_cast<int>(b.packed), &position, MPI_COMM_SELF);
        for (const auto &r : todo)
            memcpy(mixed.data() + r.first, b.packed_ref.data() + r.first, static_cast<std::size_t>(r.second));
        position = 0;
        PMPI_Unpack(mixed.data(), static_cast<int>(b.packed), &position, want_origin, c.count, c.type, MPI_COMM_SELF);

        packer.put(b.dev_spread, before.data(), before.size());
        char *origin = b.dev_spread + kGuard - b.lo;
        for (std::size_t i = 0; i < todo.size(); ++i) {
            const char *in = (i % 2 ? b.host_packed : b.dev_packed) + todo[i].first;
            std::string why;
            const int rc = packer.unpack(flat, origin, c.count, todo[i].first, todo[i].second, in, &why);
            MT_CHECK(rc == MPI_SUCCESS, "%s: unpack [%lld, %lld): %d %s (seed %llu)", c.name.c_str(),
                     (long long)todo[i].first, (long long)(todo[i].first + todo[i].second), rc, why.c_str(),
                     (unsigned long long)kSeed);
        }
        packer.finish();
        packer.get(got.data(), b.dev_spread, got.size());
        if (memcmp(got.data(), want.data(), got.size()) != 0) {
            std::size_t i = 0;
            while (got[i] == want[i]) ++i;
            MT_CHECK(0,
                     "%s: unpack of %zu ranges (%s): buffer byte %lld (offset from the origin) is 0x%02x, "
                     "PMPI_Unpack left 0x%02x (seed %llu)",
                     c.name.c_str(), todo.size(), trial ? "one random range" : "a chunked cover",
                     (long long)i - kGuard + b.lo, got[i], want[i], (unsigned long long)kSeed);
        }
        if (mt_case_failed) return;
    }
}

// What moves all of `count` elements (of a buffer at a 256-byte boundary).
mpiacc::cuda::PackChoice::Kind path(const FlatType &flat, std::int64_t count) {
    mpiacc::cuda::PackChoice choice;
    std::string why;
    alignas(256) static char at[256];
    mpiacc::cuda::choose_pack(flat, at, count, 0, count * flat.size(), at, true, &choice, &why);
    return choice.kind;
}

// Whether `count` elements touch any byte twice: unpacking into such a type is not
// defined (MPICH and the kernels may write the byte in different orders).
bool overlaps(const FlatType &flat, std::int64_t count) {
    std::vector<std::pair<std::int64_t, std::int64_t>> pieces;
    flat.for_each_piece(count, 0, count * flat.size(), [&](std::int64_t offset, std::int64_t, std::int64_t length) {
        pieces.push_back({offset, length});
    });
    std::sort(pieces.begin(), pieces.end());
    for (std::size_t i = 1; i < pieces.size(); ++i)
        if (pieces[i - 1].first + pieces[i - 1].second > pieces[i].first) return true;
    return false;
}

void describe_path(const Case &c) {
    static const char *const kPaths[] = {"nothing", "one copy", "the strided kernels", "the work-unit kernel"};
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const FlatType> flat = mpiacc::flat_type(c.type, &error, &why);
    if (flat) printf("# %s, count %d: %s\n", c.name.c_str(), c.count, kPaths[static_cast<int>(path(*flat, c.count))]);
}

void run_case(Packer &packer, const Case &c, std::mt19937_64 &rng, bool unpack) {
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const FlatType> flat = mpiacc::flat_type(c.type, &error, &why);
    MT_CHECK(flat, "%s: flat_type: %d %s", c.name.c_str(), error, why.c_str());
    if (!flat) return;
    MPI_Aint lb, extent, true_lb, true_extent;
    MPI_Type_get_extent(c.type, &lb, &extent);
    MPI_Type_get_true_extent(c.type, &true_lb, &true_extent);
    int size = 0;
    MPI_Type_size(c.type, &size);
    if (size == 0) {
        why.clear();
        const int rc = unpack ? packer.unpack(*flat, nullptr, c.count, 0, 0, nullptr, &why)
                              : packer.pack(*flat, nullptr, c.count, 0, 0, nullptr, &why);
        MT_CHECK(rc == MPI_SUCCESS, "%s: no bytes: %d %s", c.name.c_str(), rc, why.c_str());
        packer.finish();
        return;
    }
    Buffers b;
    const std::int64_t reach = static_cast<std::int64_t>(c.count - 1) * extent;
    b.lo = true_lb + std::min<std::int64_t>(0, reach);
    b.footprint = true_extent + (reach < 0 ? -reach : reach);
    b.packed = static_cast<std::int64_t>(size) * c.count;
    b.spread.resize(static_cast<std::size_t>(b.footprint + 2 * kGuard));
    for (auto &x : b.spread) x = static_cast<unsigned char>(rng());
    b.packed_ref.resize(static_cast<std::size_t>(b.packed));
    int position = 0;
    PMPI_Pack(b.spread.data() + kGuard - b.lo, c.count, c.type, b.packed_ref.data(), static_cast<int>(b.packed),
              &position, MPI_COMM_SELF);
    MT_CHECK(position == b.packed, "%s: PMPI_Pack wrote %d of %lld bytes", c.name.c_str(), position,
             (long long)b.packed);
    b.dev_spread = packer.alloc(b.spread.size() + 16);
    b.dev_packed = packer.alloc(static_cast<std::size_t>(b.packed + 2 * kGuard + 16));
    b.host_packed = packer.alloc_pinned(static_cast<std::size_t>(b.packed + 2 * kGuard + 16));
    if (unpack)
        check_unpack(packer, *flat, c, b, rng);
    else
        check_pack(packer, *flat, c, b, rng);
    packer.release(b.dev_spread);
    packer.release(b.dev_packed);
    packer.release_pinned(b.host_packed);
}

// MPI_BOTTOM: a type whose displacements are the addresses of a buffer in the packer's
// memory, packed and unpacked with a null origin, against PMPI_Pack of the same
// displacements relative to a host copy.
void check_bottom(Packer &packer, std::mt19937_64 &rng) {
    const int n = 9;
    const int lens[n] = {1, 3, 0, 2, 5, 1, 4, 2, 7};
    MPI_Aint relative[n];
    for (int i = 0; i < n; ++i) relative[i] = 64 * (n - i) + 4 * (i % 3);  // descending, as a struct may be
    const std::size_t bytes = 64 * (n + 2);
    char *dev = packer.alloc(bytes);
    std::vector<unsigned char> host(bytes);
    for (auto &x : host) x = static_cast<unsigned char>(rng());
    packer.put(dev, host.data(), bytes);
    MPI_Aint absolute[n];
    for (int i = 0; i < n; ++i) absolute[i] = reinterpret_cast<MPI_Aint>(dev) + relative[i];
    MPI_Datatype rel, abs;
    MPI_Type_create_hindexed(n, lens, relative, MPI_INT, &rel);
    MPI_Type_create_hindexed(n, lens, absolute, MPI_INT, &abs);
    MPI_Type_commit(&rel);
    MPI_Type_commit(&abs);
    int size = 0, position = 0;
    MPI_Type_size(rel, &size);
    std::vector<unsigned char> want(static_cast<std::size_t>(size)), got(want.size());
    PMPI_Pack(host.data(), 1, rel, want.data(), size, &position, MPI_COMM_SELF);
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const FlatType> flat = mpiacc::flat_type(abs, &error, &why);
    MT_CHECK(flat, "flat_type of absolute displacements: %d %s", error, why.c_str());
    char *out = packer.alloc(static_cast<std::size_t>(size));
    if (flat) {
        int rc = packer.pack(*flat, nullptr, 1, 0, size, out, &why);
        MT_CHECK(rc == MPI_SUCCESS, "pack at MPI_BOTTOM: %d %s", rc, why.c_str());
        packer.finish();
        packer.get(got.data(), out, got.size());
        MT_CHECK(got == want, "pack at MPI_BOTTOM: the packed bytes differ from PMPI_Pack's (seed %llu)",
                 (unsigned long long)kSeed);
        // Unpack other bytes into a cleared buffer: exactly the type's bytes come back.
        for (auto &x : want) x = static_cast<unsigned char>(rng());
        std::vector<unsigned char> expect(bytes, 0);
        position = 0;
        PMPI_Unpack(want.data(), size, &position, expect.data(), 1, rel, MPI_COMM_SELF);
        packer.fill(dev, 0, bytes);
        packer.put(out, want.data(), want.size());
        rc = packer.unpack(*flat, nullptr, 1, 0, size, out, &why);
        MT_CHECK(rc == MPI_SUCCESS, "unpack at MPI_BOTTOM: %d %s", rc, why.c_str());
        packer.finish();
        std::vector<unsigned char> back(bytes);
        packer.get(back.data(), dev, bytes);
        MT_CHECK(back == expect, "unpack at MPI_BOTTOM: the buffer differs from PMPI_Unpack's (seed %llu)",
                 (unsigned long long)kSeed);
    }
    packer.release(out);
    packer.release(dev);
    MPI_Type_free(&rel);
    MPI_Type_free(&abs);
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    std::vector<Case> cases = make_cases();
    std::mt19937_64 rng(kSeed);
    std::string skip, why;
#ifndef PACK_TEST_ON_HOST
    const std::string prefix;
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices <= 0) {
        (void)cudaGetLastError();
        skip = "no CUDA device";
    }
    PackKernels kernels;
    // With a GPU, kernels that were built must load: that case fails, the rest skip.
    if (!skip.empty()) {
        mt_skip("pack_kernels_load_where_built", skip.c_str());
    } else {
        MT_CASE("pack_kernels_load_where_built") {
            if (!kernels.load(&why)) {
                skip = why;
#if MPIACC_HAVE_CUDA_KERNELS
                MT_CHECK(0, "%s", why.c_str());
#endif
            }
        }
    }
    std::unique_ptr<Packer> packer;
    if (skip.empty()) packer = std::make_unique<GpuPacker>(&kernels);
#else
    const std::string prefix = "on_host_";
    std::unique_ptr<Packer> packer = std::make_unique<HostPacker>(&rng);
#endif
    for (int unpack = 0; unpack < 2; ++unpack) {
        for (const Case &c : cases) {
            const std::string name =
                prefix + c.name + (unpack ? "_unpack_matches_pmpi_unpack" : "_pack_matches_pmpi_pack");
            if (!skip.empty()) {
                mt_skip(name.c_str(), skip.c_str());
                continue;
            }
            MT_CASE(name.c_str()) { run_case(*packer, c, rng, unpack != 0); }
            if (!unpack && mt_rank == 0) describe_path(c);
        }
    }
    // Random nested types (test/mpi/random_types.h), a count of 1 to 3 each; unpacking
    // only into those whose elements touch no byte twice. Types with an empty part are left
    // out: the reference, MPICH 4.0.2's MPI_Pack, cannot pack them (has_empty_part).
    const int type_count = random_type_count();
    for (int unpack = 0; unpack < 2; ++unpack) {
        const std::string name =
            prefix + (unpack ? "random_types_unpack_matches_pmpi_unpack" : "random_types_pack_matches_pmpi_pack");
        if (!skip.empty()) {
            mt_skip(name.c_str(), skip.c_str());
            continue;
        }
        int paths[4] = {0, 0, 0, 0}, overlapping = 0, empty_parts = 0;
        MT_CASE(name.c_str()) {
            std::mt19937_64 type_rng(kSeed + 1 + static_cast<std::uint64_t>(unpack));
            for (int i = 0; i < type_count && !mt_case_failed; ++i) {
                Case c{"", random_types::random_type(type_rng, 3), 1 + static_cast<int>(type_rng() % 3)};
                c.name = "random type " + std::to_string(i) + " " + random_types::describe(c.type) + " count " +
                         std::to_string(c.count);
                int error = MPI_SUCCESS;
                std::shared_ptr<const FlatType> flat = mpiacc::flat_type(c.type, &error, &why);
                if (flat) ++paths[static_cast<int>(path(*flat, c.count))];
                if (random_types::has_empty_part(c.type))
                    ++empty_parts;
                else if (flat && unpack && overlaps(*flat, c.count))
                    ++overlapping;
                else
                    run_case(*packer, c, rng, unpack != 0);
                MPI_Type_free(&c.type);
            }
        }
        if (mt_rank == 0)
            printf(
                "# %d random types (%d moved by the strided kernels, %d by the work-unit kernel, %d copied, %d "
                "empty), %d left out as overlapping, %d for an empty part\n",
                type_count, paths[2], paths[3], paths[1], paths[0], overlapping, empty_parts);
    }
    const std::string range_name = prefix + "pack_range_beyond_the_data_is_mpi_err_arg";
    if (!skip.empty()) {
        mt_skip(range_name.c_str(), skip.c_str());
    } else {
        MT_CASE(range_name.c_str()) {
            int error = MPI_SUCCESS;
            std::shared_ptr<const FlatType> flat = mpiacc::flat_type(cases[0].type, &error, &why);
            MT_CHECK(flat, "flat_type: %d %s", error, why.c_str());
            int size = 0;
            MPI_Type_size(cases[0].type, &size);
            why.clear();
            const int rc = flat ? packer->pack(*flat, nullptr, 2, size, size + 1, nullptr, &why) : MPI_SUCCESS;
            MT_CHECK(rc == MPI_ERR_ARG, "pack past the end: %d, expected MPI_ERR_ARG", rc);
            MT_CHECK(why.find("outside the packed data") != std::string::npos, "message: '%s'", why.c_str());
        }
    }
    const std::string bottom_name = prefix + "bottom_absolute_displacements_match_pmpi_pack";
    if (!skip.empty())
        mt_skip(bottom_name.c_str(), skip.c_str());
    else
        MT_CASE(bottom_name.c_str()) { check_bottom(*packer, rng); }
#ifndef PACK_TEST_ON_HOST
    // Each device packs with its own copy of a type's work units.
    const char *second = "second_device_packs_with_its_own_work_units";
    if (!skip.empty()) {
        mt_skip(second, skip.c_str());
    } else if (devices < 2) {
        mt_skip(second, "needs 2 CUDA devices");
    } else {
        MT_CASE(second) {
            const Case &triangle = cases[8];
            MT_CHECK(triangle.name == "indexed_lower_triangle", "case 8 is %s", triangle.name.c_str());
            run_case(*packer, triangle, rng, false);  // device 0 first: its copy exists
            int before = -1;
            CK(cudaGetDevice(&before));
            CK(cudaSetDevice(1));
            {
                GpuPacker on_second(&kernels);
                run_case(on_second, triangle, rng, false);
                run_case(on_second, triangle, rng, true);
            }
            CK(cudaSetDevice(before));
            run_case(*packer, triangle, rng, true);
        }
    }
#endif
    packer.reset();
    for (Case &c : cases) MPI_Type_free(&c.type);
    return mt_finalize();
}
