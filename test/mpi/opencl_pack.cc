/* The OpenCL pack and unpack kernels (src/accel/opencl/pack.h) against MPICH's own
 * MPI_Pack, on the platform MPIACC_OPENCL_PLATFORM names (PoCL in CI, NVIDIA's on the GPU
 * machine). For each datatype: whole and random sub-ranges of `count` elements packed
 * and unpacked, byte for byte, at aligned and misaligned packed offsets, with guard bytes
 * around both footprints untouched. The type map comes from PMPI_Pack of byte-plane
 * images, never from the flattener under test. The seed is fixed and printed on failure.
 * MPIACC-TEST-RANKS: 1 */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "accel/opencl/object_cache.h"
#include "accel/opencl/pack.h"
#include "datatype/flat_type.h"
#include "mpiacc.h"
// The C tests' helpers; their hooks (mpiacc_counter_value) have C linkage.
extern "C" {
#include "opencl_util.h"
}
#include "random_types.h"

namespace {

using mpiacc::FlatType;
using mpiacc::opencl::CacheEntry;
using mpiacc::opencl::EventRef;
using mpiacc::opencl::MemRef;

constexpr unsigned kSeed = 20261207;
constexpr std::int64_t kGuard = 48;  // bytes before and after each footprint
constexpr int kRandomTypes = 1000;   // about 10 s on PoCL with two shared cores

struct NamedType {
    std::string name;
    MPI_Datatype type;
    int count;
};

MPI_Datatype committed(MPI_Datatype type) {
    MPI_Type_commit(&type);
    return type;
}

MPI_Datatype resized(MPI_Datatype type, MPI_Aint lb, MPI_Aint extent) {
    MPI_Datatype out;
    MPI_Type_create_resized(type, lb, extent, &out);
    MPI_Type_free(&type);
    return out;
}

// The representative list of layouts: one per shape the kernels must get right.
std::vector<NamedType> make_types() {
    std::vector<NamedType> list;
    MPI_Datatype t, inner;
    list.push_back({"contiguous_ints", committed(MPI_INT), 37});

    MPI_Type_vector(7, 3, 5, MPI_DOUBLE, &t);
    list.push_back({"vector_of_doubles", committed(t), 3});

    MPI_Type_create_hvector(5, 3, 7, MPI_CHAR, &t);
    list.push_back({"hvector_of_chars_odd_stride", committed(t), 4});

    MPI_Type_vector(4, 2, 3, MPI_FLOAT, &inner);
    MPI_Type_create_hvector(3, 1, 64, inner, &t);
    MPI_Type_free(&inner);
    list.push_back({"nested_vector", committed(t), 2});

    int sizes2[2] = {16, 12}, column[2] = {16, 1}, at2[2] = {0, 5};
    MPI_Type_create_subarray(2, sizes2, column, at2, MPI_ORDER_C, MPI_DOUBLE, &t);
    list.push_back({"subarray_2d_column", committed(t), 1});

    int sizes3[3] = {8, 6, 5};
    int faces[3][3] = {{1, 6, 5}, {8, 1, 5}, {8, 6, 1}}, starts[3][3] = {{7, 0, 0}, {0, 2, 0}, {0, 0, 4}};
    const char *face_names[3] = {"subarray_3d_face_x", "subarray_3d_face_y", "subarray_3d_face_z"};
    for (int f = 0; f < 3; ++f) {
        MPI_Type_create_subarray(3, sizes3, faces[f], starts[f], MPI_ORDER_C, MPI_FLOAT, &t);
        list.push_back({face_names[f], committed(t), 2});
    }

    int lens[9], displs[9];
    for (int i = 0; i < 9; ++i) lens[i] = i + 1, displs[i] = i * 9;
    MPI_Type_indexed(9, lens, displs, MPI_INT, &t);
    list.push_back({"indexed_triangle", committed(t), 3});

    int slens[3] = {1, 2, 3};
    MPI_Aint sdispls[3] = {0, 8, 26};
    MPI_Datatype stypes[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Type_create_struct(3, slens, sdispls, stypes, &t);
    list.push_back({"struct_int_double_chars", committed(t), 5});

    MPI_Type_vector(3, 2, 4, MPI_SHORT, &t);
    list.push_back({"resized_vector_count_5", committed(resized(t, 0, 30)), 5});

    MPI_Aint ndispls[3] = {-40, -8, 16};
    int nlens[3] = {2, 1, 3};
    MPI_Type_create_hindexed(3, nlens, ndispls, MPI_INT, &t);
    list.push_back({"negative_lb_hindexed", committed(t), 3});

    MPI_Type_contiguous(3, MPI_DOUBLE, &t);
    list.push_back({"resized_negative_lb", committed(resized(t, -16, 40)), 4});

    int zlens[5] = {2, 0, 3, 0, 1}, zdispls[5] = {0, 3, 5, 9, 11};
    MPI_Type_indexed(5, zlens, zdispls, MPI_INT, &t);
    list.push_back({"indexed_zero_length_blocks", committed(t), 3});

    // Blocks longer than a work unit (kUnitBytes), cut into several.
    int blens[3] = {3000, 17, 1500}, bdispls[3] = {0, 3100, 3200};
    MPI_Type_indexed(3, blens, bdispls, MPI_CHAR, &t);
    list.push_back({"indexed_long_blocks", committed(t), 2});

    // Blocks of 16 bytes at 16-byte strides: the widest word.
    MPI_Type_vector(6, 2, 4, MPI_DOUBLE, &t);
    list.push_back({"vector_of_double_pairs", committed(t), 3});

    // Many words: enough work for several work-groups of the strided kernel.
    MPI_Type_vector(512, 4, 6, MPI_INT, &t);
    list.push_back({"vector_many_blocks", committed(t), 8});

    // More words than the strided kernel has work-items (2^18): each item steps through
    // the form's three dimensions with carries.
    int big_sizes[3] = {80, 70, 66}, big_sub[3] = {75, 65, 63}, big_at[3] = {2, 3, 1};
    MPI_Type_create_subarray(3, big_sizes, big_sub, big_at, MPI_ORDER_C, MPI_CHAR, &t);
    list.push_back({"subarray_3d_chars_large", committed(t), 1});
    MPI_Type_create_subarray(3, big_sizes, big_sub, big_at, MPI_ORDER_C, MPI_SHORT, &t);
    list.push_back({"subarray_3d_shorts_large", committed(t), 1});

    // A struct of vectors: element runs of different lengths, not strided.
    MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &inner);
    MPI_Datatype mtypes[2] = {inner, MPI_SHORT};
    int mlens[2] = {2, 5};
    MPI_Aint mdispls[2] = {12, 0};
    MPI_Type_create_struct(2, mlens, mdispls, mtypes, &t);
    MPI_Type_free(&inner);
    list.push_back({"struct_of_vectors_out_of_order", committed(t), 3});
    return list;
}

// Where count elements of a type sit in a cl_mem with guards: `origin` is the byte of
// the type's origin, and the touched bytes lie in [kGuard, bytes - kGuard).
struct Footprint {
    std::int64_t origin = 0, bytes = 0, packed = 0;
};

Footprint footprint(MPI_Datatype type, int count) {
    MPI_Count lo = 0, hi = 0, size = 0;
    random_types::footprint(type, count, &lo, &hi);
    MPI_Type_size_c(type, &size);
    Footprint f;
    f.origin = kGuard - lo;
    f.bytes = hi - lo + 2 * kGuard;
    f.packed = static_cast<std::int64_t>(size) * count;
    return f;
}

// Packed byte p of (image + origin, count, type) comes from image byte position[p]:
// four byte-plane images packed by MPICH spell out each position.
std::vector<std::int64_t> type_map(MPI_Datatype type, int count, const Footprint &f) {
    std::vector<std::int64_t> position(f.packed, 0);
    std::vector<unsigned char> image(f.bytes), packed(f.packed);
    for (int plane = 0; plane < 4; ++plane) {
        for (std::int64_t x = 0; x < f.bytes; ++x) image[x] = static_cast<unsigned char>(x >> (8 * plane));
        int at = 0;
        PMPI_Pack(image.data() + f.origin, count, type, packed.data(), static_cast<int>(f.packed), &at, MPI_COMM_SELF);
        for (std::int64_t p = 0; p < f.packed; ++p) position[p] |= static_cast<std::int64_t>(packed[p]) << (8 * plane);
    }
    return position;
}

// Waits for a kernel's event; false if it ends in error or takes over 60 s.
bool finished(cl_event event) {
    cl_int status = CL_QUEUED;
    const double deadline = MPI_Wtime() + 60;
    while (clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) == CL_SUCCESS &&
           status > CL_COMPLETE && MPI_Wtime() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    return status == CL_COMPLETE;
}

struct Fixture {
    ocl_env env{};
    std::unique_ptr<mpiacc::opencl::ObjectCache> cache;
    std::shared_ptr<CacheEntry> entry;
    std::string why;
    bool ok = false;

    Fixture() {
        env = ocl_setup();
        if (!env.ok) return;
        cache = std::make_unique<mpiacc::opencl::ObjectCache>(1, mpiacc::opencl::EntrySettings{});
        entry = cache->acquire(env.context, env.device, &why);
        ok = entry != nullptr;
    }
    ~Fixture() {
        entry.reset();
        cache.reset();
        ocl_teardown(&env);
    }
    // The user's queue and the entry's own in turn: kernels made per launch, and cached.
    cl_command_queue next_queue() { return (turn++ % 2) ? entry->next_copy_queue() : env.queue; }
    unsigned turn = 0;
    MemRef buffer(std::int64_t bytes) { return MemRef::adopt(ocl_alloc(&env, static_cast<std::size_t>(bytes))); }
};

std::shared_ptr<const FlatType> flatten(MPI_Datatype type, const std::string &name) {
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const FlatType> flat = mpiacc::flat_type(type, &error, &why);
    MT_CHECK(flat != nullptr, "%s: flat_type failed (class %d): %s", name.c_str(), error, why.c_str());
    return flat;
}

// Packs [first, first + len) into a fresh packed buffer at `offset` and checks the bytes
// against MPICH's pack (`reference`) and the guards around them.
void check_pack(Fixture &fx, const FlatType &flat, const NamedType &t, const Footprint &f, cl_mem typed,
                const std::vector<unsigned char> &reference, std::int64_t first, std::int64_t len,
                std::int64_t offset) {
    const std::int64_t bytes = offset + len + kGuard;
    std::vector<unsigned char> out(bytes, 0xA5);
    MemRef packed = fx.buffer(bytes);
    ocl_write(&fx.env, packed.get(), 0, out.data(), bytes);
    cl_event done = nullptr;
    std::string why;
    int rc = mpiacc::opencl::enqueue_pack(*fx.entry, fx.next_queue(), flat, typed, f.origin, t.count, first, len,
                                          packed.get(), offset, 0, nullptr, &done, &why);
    MT_CHECK(rc == MPI_SUCCESS, "%s: enqueue_pack [%lld, +%lld) failed (%d): %s", t.name.c_str(), (long long)first,
             (long long)len, rc, why.c_str());
    if (rc != MPI_SUCCESS) return;
    EventRef event = EventRef::adopt(done);
    MT_CHECK(finished(done), "%s: the pack kernel did not complete", t.name.c_str());
    ocl_read(&fx.env, packed.get(), 0, out.data(), bytes);
    for (std::int64_t i = 0; i < bytes; ++i) {
        bool inside = i >= offset && i < offset + len;
        unsigned char want = inside ? reference[first + i - offset] : 0xA5;
        if (out[i] != want) {
            MT_CHECK(false, "%s (seed %u): pack of [%lld, +%lld) at offset %lld: %s byte %lld is 0x%02x, not 0x%02x",
                     t.name.c_str(), kSeed, (long long)first, (long long)len, (long long)offset,
                     inside ? "packed" : "guard", (long long)i, out[i], want);
            return;
        }
    }
}

// Unpacks reference bytes [first, first + len), put at `offset` of a packed buffer, over
// a typed buffer holding `background`; exactly the range's positions may change.
void check_unpack(Fixture &fx, const FlatType &flat, const NamedType &t, const Footprint &f,
                  const std::vector<unsigned char> &background, const std::vector<unsigned char> &reference,
                  const std::vector<std::int64_t> &position, std::int64_t first, std::int64_t len,
                  std::int64_t offset) {
    MemRef typed = fx.buffer(f.bytes);
    ocl_write(&fx.env, typed.get(), 0, background.data(), f.bytes);
    std::vector<unsigned char> staged(offset + len, 0x5A);
    std::copy(reference.begin() + first, reference.begin() + first + len, staged.begin() + offset);
    MemRef packed = fx.buffer(offset + len);
    ocl_write(&fx.env, packed.get(), 0, staged.data(), offset + len);
    cl_event done = nullptr;
    std::string why;
    int rc = mpiacc::opencl::enqueue_unpack(*fx.entry, fx.next_queue(), flat, packed.get(), offset, len, typed.get(),
                                            f.origin, t.count, first, 0, nullptr, &done, &why);
    MT_CHECK(rc == MPI_SUCCESS, "%s: enqueue_unpack [%lld, +%lld) failed (%d): %s", t.name.c_str(), (long long)first,
             (long long)len, rc, why.c_str());
    if (rc != MPI_SUCCESS) return;
    EventRef event = EventRef::adopt(done);
    MT_CHECK(finished(done), "%s: the unpack kernel did not complete", t.name.c_str());
    std::vector<unsigned char> expected(background), out(f.bytes);
    for (std::int64_t p = first; p < first + len; ++p) expected[position[p]] = reference[p];
    ocl_read(&fx.env, typed.get(), 0, out.data(), f.bytes);
    for (std::int64_t i = 0; i < f.bytes; ++i)
        if (out[i] != expected[i]) {
            MT_CHECK(false,
                     "%s (seed %u): unpack of [%lld, +%lld) from offset %lld: typed byte %lld is 0x%02x, not 0x%02x",
                     t.name.c_str(), kSeed, (long long)first, (long long)len, (long long)offset,
                     (long long)i - f.origin, out[i], expected[i]);
            return;
        }
}

// Random sub-ranges of [0, total): the whole, a chunked cover (as a pipeline packs), and
// a few anywhere, with packed offsets aligned and not.
void ranges(std::mt19937 &rng, std::int64_t total,
            const std::function<void(std::int64_t first, std::int64_t len, std::int64_t offset)> &each) {
    each(0, total, kGuard);
    std::int64_t chunk = std::max<std::int64_t>(1, total / 3 + static_cast<std::int64_t>(rng() % 7));
    for (std::int64_t first = 0; first < total; first += chunk) each(first, std::min(chunk, total - first), kGuard);
    for (int i = 0; i < 4 && total > 0; ++i) {
        std::int64_t first = rng() % total;
        std::int64_t len = 1 + rng() % (total - first);
        each(first, len, kGuard + (i % 2 ? first % 16 : 3 + rng() % 13));
    }
}

// Checks one type; returns the kernel its whole range takes.
mpiacc::opencl::PackChoice run_type(Fixture &fx, const NamedType &t, std::mt19937 &rng, bool quiet = false) {
    std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
    if (!flat) return {};
    const Footprint f = footprint(t.type, t.count);
    const std::vector<std::int64_t> position = type_map(t.type, t.count, f);
    const mpiacc::opencl::PackChoice choice =
        mpiacc::opencl::choose_pack_kernel(*flat, f.origin, t.count, 0, f.packed, kGuard);
    if (quiet) {
    } else if (choice.strided)
        std::printf("# %s: strided kernel, %d-byte words\n", t.name.c_str(), choice.word);
    else
        std::printf("# %s: work-unit kernel, a %s per unit\n", t.name.c_str(),
                    choice.group_per_unit ? "work-group" : "work-item");

    std::vector<unsigned char> image(f.bytes), reference(f.packed), background(f.bytes);
    for (auto &b : image) b = static_cast<unsigned char>(rng());
    for (auto &b : background) b = static_cast<unsigned char>(rng());
    int at = 0;
    PMPI_Pack(image.data() + f.origin, t.count, t.type, reference.data(), static_cast<int>(f.packed), &at,
              MPI_COMM_SELF);
    MemRef typed = fx.buffer(f.bytes);
    ocl_write(&fx.env, typed.get(), 0, image.data(), f.bytes);

    ranges(rng, f.packed, [&](std::int64_t first, std::int64_t len, std::int64_t offset) {
        if (!mt_case_failed) check_pack(fx, *flat, t, f, typed.get(), reference, first, len, offset);
    });
    // A type whose blocks overlap has no defined unpack.
    std::vector<std::int64_t> sorted(position);
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end())
        ranges(rng, f.packed, [&](std::int64_t first, std::int64_t len, std::int64_t offset) {
            if (!mt_case_failed) check_unpack(fx, *flat, t, f, background, reference, position, first, len, offset);
        });
    // The typed buffer is read, never written, by a pack.
    std::vector<unsigned char> after(f.bytes);
    ocl_read(&fx.env, typed.get(), 0, after.data(), f.bytes);
    MT_CHECK(after == image, "%s: a pack wrote into the typed buffer", t.name.c_str());
    return choice;
}

// Random nested types (random_types.h), each with its own seed, printed on failure.
void run_random_types(Fixture &fx, int how_many) {
    std::mt19937_64 rng(kSeed);
    int strided = 0, units = 0, checked = 0, empty_parts = 0;
    const double start = MPI_Wtime();
    for (; checked < how_many && !mt_case_failed; ++checked) {
        const std::uint64_t seed = rng();
        std::mt19937_64 type_rng(seed);
        MPI_Datatype type = random_types::random_type(type_rng, 1 + static_cast<int>(seed % 4));
        if (random_types::has_empty_part(type)) {  // MPICH's MPI_Pack, the reference, cannot pack it
            ++empty_parts;
            MPI_Type_free(&type);
            continue;
        }
        const int count = std::uniform_int_distribution<int>(0, 3)(type_rng);
        NamedType t{"random type " + std::to_string(checked) + " (type seed " + std::to_string(seed) + ", count " +
                        std::to_string(count) + "): " + random_types::describe(type),
                    type, count};
        std::mt19937 ranges_rng(static_cast<unsigned>(seed));
        mpiacc::opencl::PackChoice choice = run_type(fx, t, ranges_rng, true);
        ++(choice.strided ? strided : units);
        MPI_Type_free(&type);
    }
    std::printf(
        "# %d random datatypes in %.1f s (seed %u): %d strided, %d by work units; %d left out for an empty part\n",
        checked - empty_parts, MPI_Wtime() - start, kSeed, strided, units, empty_parts);
}

void CL_CALLBACK note_context_gone(cl_context, void *flag) { static_cast<std::atomic<bool> *>(flag)->store(true); }

// clSetContextDestructorCallback is OpenCL 3.0 (and optional before it).
bool destructor_callbacks_work(cl_device_id device) {
    cl_int error = CL_SUCCESS;
    cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &error);
    if (error != CL_SUCCESS) return false;
    std::atomic<bool> gone{false};
    bool set = clSetContextDestructorCallback(context, note_context_gone, &gone) == CL_SUCCESS;
    clReleaseContext(context);
    const double deadline = MPI_Wtime() + 10;
    while (set && !gone.load() && MPI_Wtime() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return set && gone.load();
}

// Packs a work-unit type in a context of its own, then releases everything: the cache
// entry must go, and the context with it, although the type (and its units) lives on.
void check_context_released(cl_device_id device, const NamedType &t) {
    std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
    if (!flat) return;
    const Footprint f = footprint(t.type, t.count);
    cl_int error = CL_SUCCESS;
    cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &error);
    std::atomic<bool> gone{false};
    clSetContextDestructorCallback(context, note_context_gone, &gone);
    cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, nullptr, &error);
    mpiacc::opencl::ObjectCache cache(1, mpiacc::opencl::EntrySettings{});
    std::string why;
    std::shared_ptr<CacheEntry> entry = cache.acquire(context, device, &why);
    MT_CHECK(entry != nullptr, "acquire: %s", why.c_str());
    cl_mem typed = clCreateBuffer(context, CL_MEM_READ_WRITE, f.bytes, nullptr, &error);
    cl_mem packed = clCreateBuffer(context, CL_MEM_READ_WRITE, f.packed, nullptr, &error);
    // On the user's queue, then on the entry's own (kernels made per launch, and cached).
    for (int round = 0; round < 2 && entry; ++round) {
        cl_event done = nullptr;
        int rc = mpiacc::opencl::enqueue_pack(*entry, round ? entry->next_copy_queue() : queue, *flat, typed, f.origin,
                                              t.count, 0, f.packed, packed, 0, 0, nullptr, &done, &why);
        MT_CHECK(rc == MPI_SUCCESS, "enqueue_pack: %s", why.c_str());
        if (done) {
            MT_CHECK(finished(done), "the pack did not complete");
            clReleaseEvent(done);
        }
    }
    clReleaseMemObject(typed);
    clReleaseMemObject(packed);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    entry.reset();
    // PoCL drops a finished command's references from its device thread a moment later.
    const double deadline = MPI_Wtime() + 10;
    while (cache.size() > 0 && MPI_Wtime() < deadline) {
        cache.sweep();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    MT_CHECK(cache.size() == 0, "the entry was not evicted: the type's units keep its context alive");
    while (!gone.load() && MPI_Wtime() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    MT_CHECK(gone.load(), "the context was not destroyed once the entry went");
}

const NamedType &named(const std::vector<NamedType> &types, const std::string &name) {
    for (const NamedType &t : types)
        if (t.name == name) return t;
    return types.front();
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    std::vector<NamedType> types = make_types();
    {
        Fixture fx;
        const char *skip = !fx.env.ok ? "no OpenCL platform" : nullptr;
        if (fx.env.ok && !fx.ok) {
            MT_CASE("object_cache_entry_for_the_device") MT_CHECK(false, "acquire: %s", fx.why.c_str());
            skip = "no cache entry";
        }
        std::mt19937 rng(kSeed);
        for (const NamedType &t : types) {
            std::string name = "packs_and_unpacks_like_mpi_pack_" + t.name;
            if (skip) {
                mt_skip(name.c_str(), skip);
                continue;
            }
            MT_CASE(name.c_str()) run_type(fx, t, rng);
        }
        if (!skip) {
            MT_CASE("random_nested_types_pack_and_unpack_like_mpi_pack") run_random_types(fx, kRandomTypes);
            MT_CASE("vector_of_doubles_packs_with_the_strided_kernel_in_8_byte_words") {
                const NamedType &t = named(types, "vector_of_doubles");
                std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
                if (flat) {
                    Footprint f = footprint(t.type, t.count);
                    mpiacc::opencl::PackChoice c =
                        mpiacc::opencl::choose_pack_kernel(*flat, f.origin, t.count, 0, f.packed, 0);
                    MT_CHECK(c.strided && c.word == 8, "chose strided=%d word=%d", c.strided, c.word);
                    c = mpiacc::opencl::choose_pack_kernel(*flat, f.origin + 4, t.count, 0, f.packed, 0);
                    MT_CHECK(c.strided && c.word == 4, "origin + 4: chose strided=%d word=%d", c.strided, c.word);
                    c = mpiacc::opencl::choose_pack_kernel(*flat, f.origin, t.count, 3, 40, 3);
                    MT_CHECK(c.strided && c.word == 8, "a range from byte 3 at offset 3: word=%d", c.word);
                }
            }
            MT_CASE("indexed_triangle_packs_with_the_work_unit_kernel") {
                const NamedType &t = named(types, "indexed_triangle");
                std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
                if (flat) {
                    Footprint f = footprint(t.type, t.count);
                    mpiacc::opencl::PackChoice c =
                        mpiacc::opencl::choose_pack_kernel(*flat, f.origin, t.count, 0, f.packed, 0);
                    MT_CHECK(!c.strided, "the triangle chose the strided kernel");
                }
            }
            MT_CASE("a_range_past_the_packed_bytes_is_err_arg_naming_it") {
                const NamedType &t = named(types, "vector_of_doubles");
                std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
                MemRef typed = fx.buffer(4096), packed = fx.buffer(4096);
                std::string why;
                int rc = flat ? mpiacc::opencl::enqueue_pack(*fx.entry, fx.env.queue, *flat, typed.get(), 0, 1, 160, 9,
                                                             packed.get(), 0, 0, nullptr, nullptr, &why)
                              : MPI_ERR_OTHER;
                MT_CHECK(rc == MPI_ERR_ARG, "class %d", rc);
                MT_CHECK(why.find("[160, 160 + 9)") != std::string::npos && why.find("enqueue_pack") == 0,
                         "message: %s", why.c_str());
            }
            MT_CASE("a_pack_waits_for_its_wait_list_without_blocking_the_caller") {
                const NamedType &t = named(types, "indexed_triangle");
                std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
                Footprint f = footprint(t.type, t.count);
                std::vector<unsigned char> image(f.bytes), reference(f.packed), out(f.packed, 0);
                for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<unsigned char>(i * 13 + 1);
                int at = 0;
                PMPI_Pack(image.data() + f.origin, t.count, t.type, reference.data(), static_cast<int>(f.packed), &at,
                          MPI_COMM_SELF);
                MemRef typed = fx.buffer(f.bytes), packed = fx.buffer(f.packed);
                ocl_write(&fx.env, typed.get(), 0, image.data(), f.bytes);
                cl_int error = CL_SUCCESS;
                EventRef gate = EventRef::adopt(clCreateUserEvent(fx.env.context, &error));
                cl_event wait = gate.get(), done = nullptr;
                std::string why;
                int rc =
                    flat ? mpiacc::opencl::enqueue_pack(*fx.entry, fx.env.queue, *flat, typed.get(), f.origin, t.count,
                                                        0, f.packed, packed.get(), 0, 1, &wait, &done, &why)
                         : MPI_ERR_OTHER;
                MT_CHECK(rc == MPI_SUCCESS, "enqueue_pack: %s", why.c_str());
                if (rc == MPI_SUCCESS) {
                    EventRef event = EventRef::adopt(done);
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                    cl_int status = CL_QUEUED;
                    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
                    MT_CHECK(status > CL_COMPLETE, "the pack ran before its wait list completed (status %d)", status);
                    clSetUserEventStatus(gate.get(), CL_COMPLETE);
                    MT_CHECK(finished(done), "the pack did not complete once released");
                    ocl_read(&fx.env, packed.get(), 0, out.data(), f.packed);
                    MT_CHECK(out == reference, "the packed bytes differ from MPI_Pack's");
                }
            }
            if (destructor_callbacks_work(fx.env.device)) {
                MT_CASE("a_released_context_goes_although_a_packed_type_lives_on") {
                    check_context_released(fx.env.device, named(types, "indexed_triangle"));
                }
            } else {
                mt_skip("a_released_context_goes_although_a_packed_type_lives_on",
                        "no context destructor callbacks on this platform");
            }
            MT_CASE("a_units_copy_is_released_when_its_entry_goes_and_its_key_is_never_reused") {
                mpiacc::opencl::ObjectCache cache(0, mpiacc::opencl::EntrySettings{});  // private entries
                std::string why;
                std::shared_ptr<CacheEntry> entry = cache.acquire(fx.env.context, fx.env.device, &why);
                const std::int64_t words[3] = {1, 2, 3};
                std::shared_ptr<void> copy = entry ? entry->make_constant_buffer(words, sizeof words, &why) : nullptr;
                MT_CHECK(copy && CacheEntry::constant_buffer_mem(copy), "make_constant_buffer: %s", why.c_str());
                std::int64_t back[3] = {0, 0, 0};
                if (copy) ocl_read(&fx.env, CacheEntry::constant_buffer_mem(copy), 0, back, sizeof back);
                MT_CHECK(back[0] == 1 && back[1] == 2 && back[2] == 3, "the copy holds %lld %lld %lld",
                         (long long)back[0], (long long)back[1], (long long)back[2]);
                const void *key = entry ? entry->device_copy_key() : nullptr;
                entry.reset();
                MT_CHECK(CacheEntry::constant_buffer_mem(copy) == nullptr, "the copy outlived its entry's cl_mem");
                // The next entry may take the freed entry's address, never its key.
                std::shared_ptr<CacheEntry> next = cache.acquire(fx.env.context, fx.env.device, &why);
                MT_CHECK(next && next->device_copy_key() != key, "a new entry reuses a live copy's key");
            }
            MT_CASE("kernels_are_built_once_per_cache_entry") {
                long long built = mpiacc_counter_value("opencl.program.built");
                const NamedType &t = named(types, "vector_of_doubles");
                std::shared_ptr<const FlatType> flat = flatten(t.type, t.name);
                std::vector<unsigned char> image(footprint(t.type, t.count).bytes, 7), reference;
                MemRef typed = fx.buffer(static_cast<std::int64_t>(image.size()));
                ocl_write(&fx.env, typed.get(), 0, image.data(), image.size());
                for (int i = 0; flat && i < 3; ++i) {
                    Footprint f = footprint(t.type, t.count);
                    reference.assign(f.packed, 7);
                    check_pack(fx, *flat, t, f, typed.get(), reference, 0, f.packed, 0);
                }
                MT_CHECK(mpiacc_counter_value("opencl.program.built") == built,
                         "the pack program was built again (%lld builds)",
                         mpiacc_counter_value("opencl.program.built") - built);
            }
        } else {
            for (const char *name :
                 {"vector_of_doubles_packs_with_the_strided_kernel_in_8_byte_words",
                  "indexed_triangle_packs_with_the_work_unit_kernel",
                  "a_range_past_the_packed_bytes_is_err_arg_naming_it",
                  "a_pack_waits_for_its_wait_list_without_blocking_the_caller",
                  "a_released_context_goes_although_a_packed_type_lives_on", "kernels_are_built_once_per_cache_entry"})
                mt_skip(name, skip);
        }
    }
    for (NamedType &t : types)
        if (t.type != MPI_INT) MPI_Type_free(&t.type);
    return mt_finalize();
}
