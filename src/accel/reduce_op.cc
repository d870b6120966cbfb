#include "accel/reduce_op.h"

#include <cstdint>
#include <vector>

#include "util/error.h"

namespace mpiacc {

namespace {

// MPI's type groups for reductions (MPI-4.1 section 6.9.2). MULTI: MPI_AINT, MPI_OFFSET,
// MPI_COUNT, allowed where C integers are but for the logical ops.
enum Group : unsigned { C_INT = 1, FLOATING = 2, COMPLEX = 4, LOGICAL = 8, BYTE = 16, MULTI = 32, PAIR = 64 };

unsigned groups_of(ReduceOp op) {
    switch (op) {
        case ReduceOp::MAX:
        case ReduceOp::MIN: return C_INT | FLOATING | MULTI;
        case ReduceOp::SUM:
        case ReduceOp::PROD: return C_INT | FLOATING | COMPLEX | MULTI;
        case ReduceOp::LAND:
        case ReduceOp::LOR:
        case ReduceOp::LXOR: return C_INT | LOGICAL;
        case ReduceOp::BAND:
        case ReduceOp::BOR:
        case ReduceOp::BXOR: return C_INT | BYTE | MULTI;
        case ReduceOp::MINLOC:
        case ReduceOp::MAXLOC: return PAIR;
    }
    return 0;
}

struct OpEntry {
    MPI_Op op;
    ReduceOp kind;
    const char *name;
};

// `kernel` false: MPI defines the reductions of this type, no device kernel does.
struct TypeEntry {
    MPI_Datatype type;
    Group group;
    ReduceElem elem;
    bool kernel;
    const char *why_not;
};

// An integer type's element kind, from its size and signedness.
ReduceElem int_elem(std::size_t size, bool is_signed) {
    switch (size) {
        case 1: return is_signed ? ReduceElem::I8 : ReduceElem::U8;
        case 2: return is_signed ? ReduceElem::I16 : ReduceElem::U16;
        case 4: return is_signed ? ReduceElem::I32 : ReduceElem::U32;
        default: return is_signed ? ReduceElem::I64 : ReduceElem::U64;
    }
}

constexpr const char *kLongDouble = "long double has no device kernel (no GPU has the host's 80-bit format)";
constexpr const char *kFortran = "Fortran types have no device kernels";

bool find_type(MPI_Datatype type, TypeEntry *out) {
    const TypeEntry table[] = {
        {MPI_SIGNED_CHAR, C_INT, ReduceElem::I8, true, nullptr},
        {MPI_UNSIGNED_CHAR, C_INT, ReduceElem::U8, true, nullptr},
        {MPI_SHORT, C_INT, int_elem(sizeof(short), true), true, nullptr},
        {MPI_UNSIGNED_SHORT, C_INT, int_elem(sizeof(short), false), true, nullptr},
        {MPI_INT, C_INT, int_elem(sizeof(int), true), true, nullptr},
        {MPI_UNSIGNED, C_INT, int_elem(sizeof(int), false), true, nullptr},
        {MPI_LONG, C_INT, int_elem(sizeof(long), true), true, nullptr},
        {MPI_UNSIGNED_LONG, C_INT, int_elem(sizeof(long), false), true, nullptr},
        {MPI_LONG_LONG_INT, C_INT, int_elem(sizeof(long long), true), true, nullptr},
        {MPI_UNSIGNED_LONG_LONG, C_INT, int_elem(sizeof(long long), false), true, nullptr},
        {MPI_INT8_T, C_INT, ReduceElem::I8, true, nullptr},
        {MPI_INT16_T, C_INT, ReduceElem::I16, true, nullptr},
        {MPI_INT32_T, C_INT, ReduceElem::I32, true, nullptr},
        {MPI_INT64_T, C_INT, ReduceElem::I64, true, nullptr},
        {MPI_UINT8_T, C_INT, ReduceElem::U8, true, nullptr},
        {MPI_UINT16_T, C_INT, ReduceElem::U16, true, nullptr},
        {MPI_UINT32_T, C_INT, ReduceElem::U32, true, nullptr},
        {MPI_UINT64_T, C_INT, ReduceElem::U64, true, nullptr},
        {MPI_AINT, MULTI, int_elem(sizeof(MPI_Aint), true), true, nullptr},
        {MPI_OFFSET, MULTI, int_elem(sizeof(MPI_Offset), true), true, nullptr},
        {MPI_COUNT, MULTI, int_elem(sizeof(MPI_Count), true), true, nullptr},
        {MPI_FLOAT, FLOATING, ReduceElem::F32, true, nullptr},
        {MPI_DOUBLE, FLOATING, ReduceElem::F64, true, nullptr},
        {MPI_LONG_DOUBLE, FLOATING, ReduceElem::F64, false, kLongDouble},
        {MPI_C_BOOL, LOGICAL, ReduceElem::U8, sizeof(bool) == 1, "bool is not one byte here"},
        {MPI_CXX_BOOL, LOGICAL, ReduceElem::U8, sizeof(bool) == 1, "bool is not one byte here"},
        {MPI_BYTE, BYTE, ReduceElem::U8, true, nullptr},
        {MPI_C_FLOAT_COMPLEX, COMPLEX, ReduceElem::C32, true, nullptr},
        {MPI_C_DOUBLE_COMPLEX, COMPLEX, ReduceElem::C64, true, nullptr},
        {MPI_C_LONG_DOUBLE_COMPLEX, COMPLEX, ReduceElem::C64, false, kLongDouble},
        {MPI_CXX_FLOAT_COMPLEX, COMPLEX, ReduceElem::C32, true, nullptr},
        {MPI_CXX_DOUBLE_COMPLEX, COMPLEX, ReduceElem::C64, true, nullptr},
        {MPI_CXX_LONG_DOUBLE_COMPLEX, COMPLEX, ReduceElem::C64, false, kLongDouble},
        {MPI_FLOAT_INT, PAIR, ReduceElem::F32_INT, true, nullptr},
        {MPI_DOUBLE_INT, PAIR, ReduceElem::F64_INT, true, nullptr},
        {MPI_LONG_INT, PAIR, ReduceElem::LONG_INT, true, nullptr},
        {MPI_2INT, PAIR, ReduceElem::INT_INT, true, nullptr},
        {MPI_SHORT_INT, PAIR, ReduceElem::SHORT_INT, true, nullptr},
        {MPI_LONG_DOUBLE_INT, PAIR, ReduceElem::F64_INT, false, kLongDouble},
        {MPI_INTEGER, C_INT, ReduceElem::I32, false, kFortran},
        {MPI_REAL, FLOATING, ReduceElem::F32, false, kFortran},
        {MPI_DOUBLE_PRECISION, FLOATING, ReduceElem::F64, false, kFortran},
        {MPI_COMPLEX, COMPLEX, ReduceElem::C32, false, kFortran},
        {MPI_DOUBLE_COMPLEX, COMPLEX, ReduceElem::C64, false, kFortran},
        {MPI_LOGICAL, LOGICAL, ReduceElem::I32, false, kFortran},
        {MPI_2INTEGER, PAIR, ReduceElem::INT_INT, false, kFortran},
        {MPI_2REAL, PAIR, ReduceElem::F32_INT, false, kFortran},
        {MPI_2DOUBLE_PRECISION, PAIR, ReduceElem::F64_INT, false, kFortran},
    };
    for (const TypeEntry &entry : table)
        if (entry.type != MPI_DATATYPE_NULL && entry.type == type) {
            *out = entry;
            return true;
        }
    return false;
}

std::string type_name(MPI_Datatype type) {
    char name[MPI_MAX_OBJECT_NAME] = {0};
    int len = 0;
    if (type == MPI_DATATYPE_NULL || PMPI_Type_get_name(type, name, &len) != MPI_SUCCESS || len == 0)
        return "a datatype without a name";
    return std::string(name, static_cast<std::size_t>(len));
}

}  // namespace

MPI_Datatype undup_type(MPI_Datatype type) {
    std::vector<MPI_Datatype> made;
    MPI_Datatype at = type, result = type;
    for (int depth = 0; depth < 64 && at != MPI_DATATYPE_NULL; ++depth) {
        int ints = 0, addrs = 0, types = 0, combiner = MPI_COMBINER_NAMED;
        if (PMPI_Type_get_envelope(at, &ints, &addrs, &types, &combiner) != MPI_SUCCESS) break;
        if (combiner == MPI_COMBINER_NAMED) {
            result = at;
            break;
        }
        MPI_Datatype inner = MPI_DATATYPE_NULL;
        if (combiner != MPI_COMBINER_DUP || types != 1 ||
            PMPI_Type_get_contents(at, 0, 0, 1, nullptr, nullptr, &inner) != MPI_SUCCESS)
            break;
        int inner_combiner = MPI_COMBINER_NAMED;
        PMPI_Type_get_envelope(inner, &ints, &addrs, &types, &inner_combiner);
        if (inner_combiner != MPI_COMBINER_NAMED) made.push_back(inner);
        at = inner;
    }
    for (MPI_Datatype &t : made) PMPI_Type_free(&t);
    return result;
}

const char *reduce_op_word(ReduceOp op) {
    static const char *const words[] = {"max",  "min",  "sum", "prod", "land",   "lor",
                                        "lxor", "band", "bor", "bxor", "minloc", "maxloc"};
    return words[static_cast<int>(op)];
}

const char *reduce_elem_word(ReduceElem elem) {
    static const char *const words[] = {"i8",      "u8",      "i16",      "u16",     "i32",      "u32",
                                        "i64",     "u64",     "f32",      "f64",     "c32",      "c64",
                                        "f32_int", "f64_int", "long_int", "int_int", "short_int"};
    return words[static_cast<int>(elem)];
}

int classify_reduction(MPI_Op op, MPI_Datatype type, ReduceSpec *out, std::string *why) {
    const OpEntry ops[] = {
        {MPI_MAX, ReduceOp::MAX, "MPI_MAX"},          {MPI_MIN, ReduceOp::MIN, "MPI_MIN"},
        {MPI_SUM, ReduceOp::SUM, "MPI_SUM"},          {MPI_PROD, ReduceOp::PROD, "MPI_PROD"},
        {MPI_LAND, ReduceOp::LAND, "MPI_LAND"},       {MPI_LOR, ReduceOp::LOR, "MPI_LOR"},
        {MPI_LXOR, ReduceOp::LXOR, "MPI_LXOR"},       {MPI_BAND, ReduceOp::BAND, "MPI_BAND"},
        {MPI_BOR, ReduceOp::BOR, "MPI_BOR"},          {MPI_BXOR, ReduceOp::BXOR, "MPI_BXOR"},
        {MPI_MINLOC, ReduceOp::MINLOC, "MPI_MINLOC"}, {MPI_MAXLOC, ReduceOp::MAXLOC, "MPI_MAXLOC"},
    };
    type = undup_type(type);
    const OpEntry *found = nullptr;
    for (const OpEntry &entry : ops)
        if (entry.op == op) found = &entry;
    const std::string tname = type_name(type);
    if (!found) {
        if (op == MPI_OP_NULL) {
            *why = "the op is MPI_OP_NULL";
            return MPI_ERR_OP;
        }
        if (op == MPI_REPLACE || op == MPI_NO_OP) {
            *why = format("%s on %s: MPI defines it for one-sided accumulates only",
                          op == MPI_REPLACE ? "MPI_REPLACE" : "MPI_NO_OP", tname.c_str());
            return MPI_ERR_OP;
        }
        *why = format("a user-defined op on %s: user-defined ops do not run on device buffers", tname.c_str());
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    TypeEntry entry{};
    if (!find_type(type, &entry)) {
        int ints = 0, addrs = 0, types = 0, combiner = MPI_COMBINER_NAMED;
        if (type != MPI_DATATYPE_NULL) PMPI_Type_get_envelope(type, &ints, &addrs, &types, &combiner);
        if (type != MPI_DATATYPE_NULL && combiner != MPI_COMBINER_NAMED) {
            *why = format("%s on a derived datatype: device reductions take predefined types only", found->name);
            return MPI_ERR_UNSUPPORTED_OPERATION;
        }
        *why = format("%s on %s: MPI defines no reduction on this type", found->name, tname.c_str());
        return MPI_ERR_OP;
    }
    if (!(groups_of(found->kind) & entry.group)) {
        *why = format("%s on %s: MPI does not define this op on this type", found->name, tname.c_str());
        return MPI_ERR_OP;
    }
    if (!entry.kernel) {
        *why = format("%s on %s: %s", found->name, tname.c_str(), entry.why_not);
        return MPI_ERR_UNSUPPORTED_OPERATION;
    }
    MPI_Aint lb = 0, extent = 0;
    PMPI_Type_get_extent(type, &lb, &extent);
    out->op = found->kind;
    out->elem = entry.elem;
    out->extent = static_cast<std::size_t>(extent);
    out->op_name = found->name;
    out->type_name = tname;
    return MPI_SUCCESS;
}

}  // namespace mpiacc
