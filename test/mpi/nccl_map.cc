/* The NCCL backend (src/coll/nccl.h) where no GPU is needed: which MPI (op, type) pairs
 * go to NCCL and as what, which are refused and why, and MPIACC_TEST_NCCL=0 (set before
 * MPI_Init): libnccl.so.2 is never loaded and every communicator is refused, the same
 * way on both ranks. Runs in every build; without CUDA the refusals say so.
 * MPIACC-TEST-RANKS: 2 */
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "coll/nccl.h"
#include "config.h"
#include "mpitest.h"

extern "C" long long mpiacc_knob_value(const char *name);

namespace {

using mpiacc::NcclOp;
using mpiacc::NcclReduction;
using mpiacc::NcclType;

struct Served {
    MPI_Datatype type;
    const char *name;
    NcclType nccl;
};

struct Refused {
    MPI_Op op;
    MPI_Datatype type;
    const char *what;
    const char *reason;  // a part of the reason
};

bool contains(const std::string &s, const char *part) { return s.find(part) != std::string::npos; }

void four_ops_on_each_nccl_type() {
    const Served served[] = {
        {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", NcclType::INT8},
        {MPI_INT8_T, "MPI_INT8_T", NcclType::INT8},
        {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", NcclType::UINT8},
        {MPI_UINT8_T, "MPI_UINT8_T", NcclType::UINT8},
        {MPI_INT, "MPI_INT", NcclType::INT32},
        {MPI_INT32_T, "MPI_INT32_T", NcclType::INT32},
        {MPI_UNSIGNED, "MPI_UNSIGNED", NcclType::UINT32},
        {MPI_UINT32_T, "MPI_UINT32_T", NcclType::UINT32},
        {MPI_LONG, "MPI_LONG", sizeof(long) == 8 ? NcclType::INT64 : NcclType::INT32},
        {MPI_LONG_LONG, "MPI_LONG_LONG", NcclType::INT64},
        {MPI_INT64_T, "MPI_INT64_T", NcclType::INT64},
        {MPI_AINT, "MPI_AINT", NcclType::INT64},
        {MPI_COUNT, "MPI_COUNT", NcclType::INT64},
        {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", sizeof(long) == 8 ? NcclType::UINT64 : NcclType::UINT32},
        {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", NcclType::UINT64},
        {MPI_UINT64_T, "MPI_UINT64_T", NcclType::UINT64},
        {MPI_FLOAT, "MPI_FLOAT", NcclType::FLOAT32},
        {MPI_DOUBLE, "MPI_DOUBLE", NcclType::FLOAT64},
    };
    const struct {
        MPI_Op op;
        const char *name;
        NcclOp nccl;
    } ops[] = {{MPI_SUM, "MPI_SUM", NcclOp::SUM},
               {MPI_PROD, "MPI_PROD", NcclOp::PROD},
               {MPI_MAX, "MPI_MAX", NcclOp::MAX},
               {MPI_MIN, "MPI_MIN", NcclOp::MIN}};
    MT_CASE("nccl_reduction_maps_sum_prod_max_min_on_8_32_64_bit_integers_float_and_double") {
        for (const auto &t : served)
            for (const auto &o : ops) {
                NcclReduction red;
                red.op = NcclOp::MIN;
                red.type = NcclType::UINT8;
                std::string why;
                bool ok = mpiacc::nccl_reduction(o.op, t.type, &red, &why);
                MT_CHECK(ok, "%s on %s refused: %s", o.name, t.name, why.c_str());
                if (!ok) continue;
                MT_CHECK(red.op == o.nccl && red.type == t.nccl, "%s on %s: NCCL op %d type %d, expected %d and %d",
                         o.name, t.name, static_cast<int>(red.op), static_cast<int>(red.type), static_cast<int>(o.nccl),
                         static_cast<int>(t.nccl));
                int size = 0;
                MPI_Type_size(t.type, &size);
                MT_CHECK(mpiacc::nccl_type_size(red.type) == static_cast<std::size_t>(size),
                         "%s: NCCL element of %zu bytes, the MPI type has %d", t.name, mpiacc::nccl_type_size(red.type),
                         size);
            }
    }
}

void tagged_duplicate_maps_as_its_type() {
    MT_CASE("nccl_reduction_maps_a_duplicate_of_a_predefined_type_as_that_type") {
        MPI_Datatype dup = MPI_DATATYPE_NULL, dup2 = MPI_DATATYPE_NULL;
        MPI_Type_dup(MPI_DOUBLE, &dup);
        MPI_Type_dup(dup, &dup2);
        NcclReduction red;
        std::string why;
        MT_CHECK(mpiacc::nccl_reduction(MPI_MAX, dup2, &red, &why), "refused: %s", why.c_str());
        MT_CHECK(red.op == NcclOp::MAX && red.type == NcclType::FLOAT64, "op %d type %d", static_cast<int>(red.op),
                 static_cast<int>(red.type));
        MPI_Type_free(&dup2);
        MPI_Type_free(&dup);
    }
}

void user_op(void *, void *, int *, MPI_Datatype *) {}

void pairs_nccl_lacks_are_refused_with_a_reason() {
    MPI_Op mine = MPI_OP_NULL;
    MPI_Op_create(user_op, 1, &mine);
    MPI_Datatype pair = MPI_DATATYPE_NULL;
    MPI_Type_contiguous(2, MPI_FLOAT, &pair);
    MPI_Type_commit(&pair);
    const Refused refused[] = {
        {MPI_LAND, MPI_INT, "MPI_LAND on MPI_INT", "NCCL has no logical or bitwise ops"},
        {MPI_LOR, MPI_C_BOOL, "MPI_LOR on MPI_C_BOOL", "NCCL has no logical or bitwise ops"},
        {MPI_BXOR, MPI_UINT64_T, "MPI_BXOR on MPI_UINT64_T", "NCCL has no logical or bitwise ops"},
        {MPI_BAND, MPI_BYTE, "MPI_BAND on MPI_BYTE", "NCCL has no logical or bitwise ops"},
        {MPI_MINLOC, MPI_2INT, "MPI_MINLOC on MPI_2INT", "NCCL has no MINLOC/MAXLOC"},
        {MPI_MAXLOC, MPI_DOUBLE_INT, "MPI_MAXLOC on MPI_DOUBLE_INT", "NCCL has no MINLOC/MAXLOC"},
        {MPI_SUM, MPI_C_FLOAT_COMPLEX, "MPI_SUM on MPI_C_FLOAT_COMPLEX", "NCCL has no complex types"},
        {MPI_PROD, MPI_C_DOUBLE_COMPLEX, "MPI_PROD on MPI_C_DOUBLE_COMPLEX", "NCCL has no complex types"},
        {MPI_SUM, MPI_SHORT, "MPI_SUM on MPI_SHORT", "NCCL has no 16-bit integers"},
        {MPI_MAX, MPI_UINT16_T, "MPI_MAX on MPI_UINT16_T", "NCCL has no 16-bit integers"},
        {MPI_SUM, MPI_LONG_DOUBLE, "MPI_SUM on MPI_LONG_DOUBLE", "long double"},
        {mine, MPI_INT, "a user-defined op on MPI_INT", "user-defined"},
        {MPI_SUM, pair, "MPI_SUM on a derived type", "derived datatype"},
        {MPI_SUM, MPI_BYTE, "MPI_SUM on MPI_BYTE", "MPI does not define"},
        {MPI_MAX, MPI_C_BOOL, "MPI_MAX on MPI_C_BOOL", "MPI does not define"},
        {MPI_OP_NULL, MPI_INT, "MPI_OP_NULL on MPI_INT", "MPI_OP_NULL"},
        {MPI_REPLACE, MPI_INT, "MPI_REPLACE on MPI_INT", "MPI_REPLACE"},
    };
    MT_CASE("nccl_reduction_refuses_pairs_nccl_lacks_naming_the_pair_and_the_reason") {
        for (const Refused &r : refused) {
            NcclReduction red;
            red.op = NcclOp::PROD;
            red.type = NcclType::UINT32;
            std::string why;
            bool ok = mpiacc::nccl_reduction(r.op, r.type, &red, &why);
            MT_CHECK(!ok, "%s was served", r.what);
            MT_CHECK(contains(why, r.reason), "%s: the reason \"%s\" does not say \"%s\"", r.what, why.c_str(),
                     r.reason);
            MT_CHECK(red.op == NcclOp::PROD && red.type == NcclType::UINT32, "%s: the refusal wrote its output",
                     r.what);
        }
    }
    MPI_Type_free(&pair);
    MPI_Op_free(&mine);
}

bool nccl_mapped() { return dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD) != nullptr; }

// Each rank's text, gathered: identical everywhere.
bool same_on_every_rank(const std::string &text) {
    char mine[512] = {0};
    snprintf(mine, sizeof mine, "%s", text.c_str());
    std::vector<char> all(sizeof mine * static_cast<std::size_t>(mt_size));
    MPI_Allgather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < mt_size; ++r)
        if (std::string(&all[sizeof mine * r]) != text) return false;
    return true;
}

#ifdef MPIACC_HAVE_CUDA
constexpr const char *kOff = "MPIACC_TEST_NCCL=0: NCCL is never loaded";
#else
constexpr const char *kOff = "NCCL needs CUDA, which this build of MPI-ACC lacks";
#endif

void knob_off_never_loads() {
    MT_CASE("mpiacc_test_nccl_0_is_read_at_mpi_init") {
        MT_CHECK(mpiacc_knob_value("MPIACC_TEST_NCCL") == 0, "MPIACC_TEST_NCCL reads %lld",
                 mpiacc_knob_value("MPIACC_TEST_NCCL"));
    }
    MT_CASE("mpiacc_test_nccl_0_never_loads_libnccl_and_says_why") {
        std::string why;
        MT_CHECK(!mpiacc::nccl_available(&why), "NCCL is available");
        MT_CHECK(why == kOff, "the reason is \"%s\", expected \"%s\"", why.c_str(), kOff);
        MT_CHECK(mpiacc::nccl_version() == 0, "version %d", mpiacc::nccl_version());
        const std::string status = mpiacc::nccl_status();
        MT_CHECK(contains(status, kOff) || contains(status, "not built"), "status \"%s\"", status.c_str());
        MT_CHECK(!nccl_mapped(), "libnccl.so.2 is mapped into the process");
    }
    MT_CASE("mpiacc_test_nccl_0_refuses_every_communicator_alike_on_every_rank") {
        MPI_Comm dup = MPI_COMM_NULL;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        const MPI_Comm comms[] = {MPI_COMM_WORLD, MPI_COMM_SELF, dup, MPI_COMM_WORLD};
        const char *names[] = {"MPI_COMM_WORLD", "MPI_COMM_SELF", "a duplicate of MPI_COMM_WORLD",
                               "MPI_COMM_WORLD again (cached)"};
        for (int i = 0; i < 4; ++i) {
            std::string why;
            mpiacc::NcclComm *nc = mpiacc::nccl_comm_for(comms[i], &why);
            MT_CHECK(nc == nullptr, "%s is served", names[i]);
#ifdef MPIACC_HAVE_CUDA
            const std::string want = std::string("rank 0: ") + kOff;
#else
            const std::string want = kOff;
#endif
            MT_CHECK(why == want, "%s: \"%s\", expected \"%s\"", names[i], why.c_str(), want.c_str());
            if (comms[i] != MPI_COMM_SELF) MT_CHECK(same_on_every_rank(why), "%s: the ranks disagree", names[i]);
        }
        MPI_Comm_free(&dup);
        MT_CHECK(!nccl_mapped(), "libnccl.so.2 is mapped into the process");
    }
}

void intercommunicator_is_refused() {
    if (mt_size != 2) {
        mt_skip("nccl_comm_for_refuses_an_intercommunicator", "needs exactly 2 ranks");
        return;
    }
    MT_CASE("nccl_comm_for_refuses_an_intercommunicator") {
        MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, mt_rank, 0, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - mt_rank, 7, &inter);
        std::string why;
        MT_CHECK(mpiacc::nccl_comm_for(inter, &why) == nullptr, "served");
#ifdef MPIACC_HAVE_CUDA
        MT_CHECK(why == "an intercommunicator: NCCL communicators have one group", "\"%s\"", why.c_str());
#endif
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
}

}  // namespace

int main(int argc, char **argv) {
    setenv("MPIACC_TEST_NCCL", "0", 1);  // read at MPI_Init
    MT_INIT(&argc, &argv);
    four_ops_on_each_nccl_type();
    tagged_duplicate_maps_as_its_type();
    pairs_nccl_lacks_are_refused_with_a_reason();
    MT_CASE("nccl_type_size_is_the_element_size") {
        MT_CHECK(mpiacc::nccl_type_size(NcclType::INT8) == 1 && mpiacc::nccl_type_size(NcclType::UINT8) == 1 &&
                     mpiacc::nccl_type_size(NcclType::INT32) == 4 && mpiacc::nccl_type_size(NcclType::UINT32) == 4 &&
                     mpiacc::nccl_type_size(NcclType::FLOAT32) == 4 && mpiacc::nccl_type_size(NcclType::INT64) == 8 &&
                     mpiacc::nccl_type_size(NcclType::UINT64) == 8 && mpiacc::nccl_type_size(NcclType::FLOAT64) == 8,
                 "a size is wrong");
    }
    knob_off_never_loads();
    intercommunicator_is_refused();
    return mt_finalize();
}
