// libFuzzer target for the flattener: the input bytes choose a datatype (every
// constructor, nested, through test/mpi/random_types.h), a count and a byte range; the
// flattened type must pack and unpack them as MPICH's MPI_Pack and MPI_Unpack do. Built
// with clang -fsanitize=fuzzer,address,undefined from the flattener's own sources, so
// the fuzzer's coverage reaches into them; test/fuzz/run.sh runs it for a bounded time.
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "datatype/flat_type.h"
#include "random_types.h"

namespace {

// Choices from the input bytes; once they run out, every choice is its lowest value, so
// that any input builds a type in bounded steps.
class ByteSource {
public:
    ByteSource(const std::uint8_t *data, std::size_t size) : data_(data), size_(size) {}
    int pick(int lo, int hi) {
        if (hi <= lo) return lo;
        std::uint32_t v = 0;
        for (int i = 0; i < 2 && at_ < size_; ++i) v = (v << 8) | data_[at_++];
        return lo + static_cast<int>(v % static_cast<std::uint32_t>(hi - lo + 1));
    }

private:
    const std::uint8_t *data_;
    std::size_t size_, at_ = 0;
};

[[noreturn]] void fail(const char *what, MPI_Datatype type) {
    std::fprintf(stderr, "flat_type_fuzz: %s for %s\n", what, random_types::describe(type).c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
    MPI_Init(argc, argv);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    ByteSource source(data, size);
    const int depth = source.pick(1, 4);
    MPI_Datatype type = random_types::make_type(source, depth);
    if (type == MPI_DATATYPE_NULL) return 0;
    const std::int64_t count = source.pick(0, 3);
    int error = MPI_SUCCESS;
    std::string why;
    std::shared_ptr<const mpiacc::FlatType> flat = mpiacc::flat_type(type, &error, &why);
    if (!flat) fail(why.c_str(), type);

    MPI_Count lo, hi;
    random_types::footprint(type, count, &lo, &hi);
    // At least a byte: MPICH refuses a null buffer even for no data.
    std::vector<char> src(static_cast<std::size_t>(hi - lo) + 1), dst(src.size()), want(src.size());
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 131 + 7);
    char *const src_origin = src.data() - lo, *const dst_origin = dst.data() - lo,
                *const want_origin = want.data() - lo;
    const std::int64_t total = count * flat->size();
    std::vector<char> expect(static_cast<std::size_t>(total) + 1), got(expect.size());
    MPI_Count pos = 0;
    MPI_Pack_c(src_origin, count, type, expect.data(), total, &pos, MPI_COMM_SELF);

    const std::int64_t first = total ? source.pick(0, static_cast<int>(total)) : 0;
    const std::int64_t len = source.pick(0, static_cast<int>(total - first));
    mpiacc::pack_bytes(*flat, src_origin, count, first, len, got.data());
    if (std::memcmp(got.data(), expect.data() + first, static_cast<std::size_t>(len)) != 0)
        fail("pack_bytes differs from MPI_Pack", type);
    std::int64_t covered = 0;
    flat->for_each_piece(count, first, len, [&](std::int64_t, std::int64_t packed, std::int64_t n) {
        if (packed != covered || n <= 0) fail("for_each_piece skipped or repeated bytes", type);
        covered += n;
    });
    if (covered != len) fail("for_each_piece did not cover the range", type);

    pos = 0;
    MPI_Unpack_c(expect.data(), total, &pos, want_origin, count, type, MPI_COMM_SELF);
    mpiacc::unpack_bytes(*flat, expect.data(), total, dst_origin, count, 0);
    if (dst != want) fail("unpack_bytes differs from MPI_Unpack", type);
    // Linked without libmpiacc, whose MPI_Type_free drops the cached form: MPICH hands
    // the handle out again.
    mpiacc::forget_flat_type(type);
    MPI_Type_free(&type);
    return 0;
}
