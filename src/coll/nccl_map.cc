// Which MPI (op, type) pairs NCCL computes: built with or without CUDA, so that the table
// is checked where no GPU is.
#include "accel/reduce_op.h"
#include "coll/nccl.h"
#include "util/error.h"

namespace mpiacc {

std::size_t nccl_type_size(NcclType type) {
    switch (type) {
        case NcclType::INT8:
        case NcclType::UINT8: return 1;
        case NcclType::INT32:
        case NcclType::UINT32:
        case NcclType::FLOAT32: return 4;
        case NcclType::INT64:
        case NcclType::UINT64:
        case NcclType::FLOAT64: return 8;
    }
    return 0;
}

bool nccl_reduction(MPI_Op op, MPI_Datatype type, NcclReduction *out, std::string *why) {
    ReduceSpec spec;
    std::string reason;
    if (classify_reduction(op, type, &spec, &reason) != MPI_SUCCESS) {
        *why = "NCCL does not serve this call: " + reason;
        return false;
    }
    NcclReduction red;
    switch (spec.op) {
        case ReduceOp::SUM: red.op = NcclOp::SUM; break;
        case ReduceOp::PROD: red.op = NcclOp::PROD; break;
        case ReduceOp::MAX: red.op = NcclOp::MAX; break;
        case ReduceOp::MIN: red.op = NcclOp::MIN; break;
        default:
            *why = format("%s on %s: NCCL has no %s", spec.op_name.c_str(), spec.type_name.c_str(),
                          spec.op == ReduceOp::MINLOC || spec.op == ReduceOp::MAXLOC ? "MINLOC/MAXLOC"
                                                                                     : "logical or bitwise ops");
            return false;
    }
    const char *lacks = nullptr;
    switch (spec.elem) {
        case ReduceElem::I8: red.type = NcclType::INT8; break;
        case ReduceElem::U8: red.type = NcclType::UINT8; break;
        case ReduceElem::I32: red.type = NcclType::INT32; break;
        case ReduceElem::U32: red.type = NcclType::UINT32; break;
        case ReduceElem::I64: red.type = NcclType::INT64; break;
        case ReduceElem::U64: red.type = NcclType::UINT64; break;
        case ReduceElem::F32: red.type = NcclType::FLOAT32; break;
        case ReduceElem::F64: red.type = NcclType::FLOAT64; break;
        case ReduceElem::I16:
        case ReduceElem::U16: lacks = "16-bit integers"; break;
        case ReduceElem::C32:
        case ReduceElem::C64: lacks = "complex types"; break;
        default: lacks = "(value, index) pairs"; break;
    }
    if (lacks) {
        *why = format("%s on %s: NCCL has no %s", spec.op_name.c_str(), spec.type_name.c_str(), lacks);
        return false;
    }
    // A predefined type whose extent is not its NCCL element's size would be read wrongly.
    if (spec.extent != nccl_type_size(red.type)) {
        *why = format("%s on %s: its extent is %zu bytes, not %zu", spec.op_name.c_str(), spec.type_name.c_str(),
                      spec.extent, nccl_type_size(red.type));
        return false;
    }
    *out = red;
    return true;
}

}  // namespace mpiacc
