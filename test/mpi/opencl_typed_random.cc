// Random nested datatypes (random_types.h) on cl_mem buffers, sent between two ranks: the
// sender's elements live in a cl_mem at MPIX_ACC_OFFSET -lo (so that negative
// displacements and lower bounds stay inside it), and the receiver takes them as packed
// bytes in host memory, as packed bytes in a cl_mem, or, where the type writes no byte
// twice, in the same type on a cl_mem (also from a sender in host memory). The bytes must be MPICH's: MPI_Pack and
// MPI_Unpack of the same data in host memory; a cl_mem receive's other bytes keep their pattern. Every tenth type goes
// at a count of about 1 MiB packed (pipeline chunks). The type seed is printed on failure. MPIACC-TEST-RANKS: 2
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "opencl_util.h"
#include "random_types.h"

namespace {

constexpr unsigned kSeed = 54321;
constexpr int kTypes = 1000;
constexpr unsigned char kPattern = 0x3c;
#define W MPI_COMM_WORLD

MPI_Datatype on_cl_mem(MPI_Datatype base, ocl_env *e, MPI_Count offset) {
    MPI_Datatype t;
    MPI_Type_dup(base, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, reinterpret_cast<void *>(static_cast<long>(MPIX_ACC_BUF_OPENCL)));
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, static_cast<void *>(e->queue));
    MPI_Type_set_attr(t, MPIX_ACC_OFFSET, reinterpret_cast<void *>(static_cast<std::intptr_t>(offset)));
    MPI_Type_commit(&t);
    return t;
}

// Whether unpacking `count` elements of `type` writes some byte twice (MPI forbids such a
// receive type): unpacks a stream of ones into zeros and counts the bytes written.
bool writes_a_byte_twice(MPI_Datatype type, int count, MPI_Count lo, MPI_Count hi, MPI_Count packed) {
    std::vector<unsigned char> area(static_cast<std::size_t>(hi - lo) + 1, 0), ones(packed + 1, 1);
    int pos = 0;
    MPI_Unpack(ones.data(), static_cast<int>(packed), &pos, area.data() - lo, count, type, W);
    MPI_Count written = 0;
    for (unsigned char b : area) written += b;
    return written != packed;
}

int first_difference(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b) {
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        if (a[i] != b[i]) return static_cast<int>(i);
    return a.size() == b.size() ? -1 : static_cast<int>(std::min(a.size(), b.size()));
}

}  // namespace

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    static const char *const cases[] = {"random_types_on_cl_mem_arrive_as_mpich_packs_them"};
    ocl_env e = ocl_setup_or_skip(cases, 1);
    MT_CASE(cases[0]) {
        std::mt19937_64 rng(kSeed);
        int as_type = 0, big = 0;
        for (int i = 0; i < kTypes && !mt_case_failed; ++i) {
            const std::uint64_t seed = rng();
            std::mt19937_64 type_rng(seed);
            MPI_Datatype type = random_types::random_type(type_rng, 1 + static_cast<int>(seed % 4));
            if (random_types::has_empty_part(type)) {  // MPICH's MPI_Pack, the reference, cannot pack it
                MPI_Type_free(&type);
                continue;
            }
            MPI_Count size = 0, lo = 0, hi = 0;
            MPI_Type_size_c(type, &size);
            int count = std::uniform_int_distribution<int>(0, 3)(type_rng);
            if (i % 10 == 9 && size > 0) {
                count = static_cast<int>((1 << 20) / size) + 1;
                random_types::footprint(type, count, &lo, &hi);
                if (hi - lo > (64 << 20))
                    count = 2;
                else
                    ++big;
            }
            random_types::footprint(type, count, &lo, &hi);
            const MPI_Count packed = size * count;
            // The cl_mem holds [base, top): the origin (MPIX_ACC_OFFSET -base) and every byte touched.
            const MPI_Count base = lo < 0 ? lo : 0, top = hi > 0 ? hi : 0;
            const std::size_t span = static_cast<std::size_t>(top - base);
            const std::string what = "type " + std::to_string(i) + " (seed " + std::to_string(seed) + ", count " +
                                     std::to_string(count) + "): " + random_types::describe(type);
            // The receiver's form: 0 packed host bytes, 1 packed cl_mem bytes, 2 the type on a
            // cl_mem; 3 the same from a sender in host memory.
            int form = i % 4;
            if (form >= 2 && writes_a_byte_twice(type, count, lo, hi, packed)) form = 0;
            as_type += form >= 2;
            std::vector<unsigned char> data(span + 1);
            for (std::size_t b = 0; b < data.size(); ++b) data[b] = mt_byte(seed, b);
            const int tag = 10 + i;
            if (mt_rank == 0 && form == 3) {
                int rc = MPI_Send(data.data() - base, count, type, 1, tag, W);
                MT_CHECK(rc == MPI_SUCCESS, "%s: the host send returned class %d", what.c_str(), p2p_class(rc));
            } else if (mt_rank == 0) {
                cl_mem m = ocl_alloc(&e, span + 1);
                ocl_write(&e, m, 0, data.data(), span + 1);
                MPI_Datatype t = on_cl_mem(type, &e, -base);
                int rc = MPI_Send(m, count, t, 1, tag, W);
                if (rc != MPI_SUCCESS) {
                    char text[MPI_MAX_ERROR_STRING] = "";
                    int len = 0;
                    MPI_Error_string(rc, text, &len);
                    MT_CHECK(false, "%s: the send returned class %d: %s", what.c_str(), p2p_class(rc), text);
                    MPI_Send(nullptr, 0, MPI_BYTE, 1, tag, W);  // so that the receiver does not wait for ever
                }
                MPI_Type_free(&t);
                clReleaseMemObject(m);
            } else if (mt_rank == 1) {
                // What MPICH makes of the same bytes on the host.
                std::vector<unsigned char> stream(static_cast<std::size_t>(packed) + 1, 0);
                int pos = 0;
                MPI_Pack(data.data() - base, count, type, stream.data(), static_cast<int>(packed) + 1, &pos, W);
                stream.resize(static_cast<std::size_t>(packed));
                std::vector<unsigned char> got, want;
                MPI_Status st;
                int rc;
                if (form == 0) {
                    got.assign(stream.size() + 64, kPattern);
                    rc = MPI_Recv(got.data(), static_cast<int>(packed), MPI_BYTE, 0, tag, W, &st);
                    want = stream;
                    want.resize(got.size(), kPattern);
                } else {
                    const std::size_t n = form == 1 ? stream.size() : span;
                    cl_mem m = ocl_alloc(&e, n + 64);
                    ocl_fill(&e, m, n + 64, kPattern);
                    MPI_Datatype t = form == 1 ? on_cl_mem(MPI_BYTE, &e, 0) : on_cl_mem(type, &e, -base);
                    rc = MPI_Recv(m, form == 1 ? static_cast<int>(packed) : count, t, 0, tag, W, &st);
                    got.resize(n + 64);
                    ocl_read(&e, m, 0, got.data(), n + 64);
                    want.assign(n + 64, kPattern);
                    if (form == 1) {
                        std::copy(stream.begin(), stream.end(), want.begin());
                    } else {
                        int p = 0;
                        MPI_Unpack(stream.data(), static_cast<int>(packed), &p, want.data() - base, count, type, W);
                    }
                    MPI_Type_free(&t);
                    clReleaseMemObject(m);
                }
                MT_CHECK(rc == MPI_SUCCESS, "%s: the receive (form %d) returned class %d", what.c_str(), form,
                         p2p_class(rc));
                int n = -1;
                MPI_Get_count(&st, MPI_BYTE, &n);
                MT_CHECK(n == static_cast<int>(packed), "%s: status count %d, expected %lld", what.c_str(), n,
                         static_cast<long long>(packed));
                const int at = first_difference(got, want);
                MT_CHECK(at < 0, "%s: receive form %d: byte %d of %zu differs (0x%02x, expected 0x%02x)", what.c_str(),
                         form, at, want.size(), at >= 0 ? got[at] : 0, at >= 0 ? want[at] : 0);
            }
            MPI_Type_free(&type);
        }
        if (mt_rank == 0)
            std::printf("# %d random types (seed %u): %d received as the type on a cl_mem, %d of about 1 MiB\n", kTypes,
                        kSeed, as_type, big);
    }
    ocl_teardown(&e);
    return mt_finalize();
}
