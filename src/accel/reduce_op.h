// Reductions on device buffers: which (op, type) pairs MPI defines, and the element
// kind a kernel works on. Kind-neutral: each device kind maps ReduceSpec onto its own
// kernels (DeviceBuffer::reduce_local).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace mpiacc {

enum class ReduceOp : int { MAX, MIN, SUM, PROD, LAND, LOR, LXOR, BAND, BOR, BXOR, MINLOC, MAXLOC };
// Element kinds, by layout: MPI types of one size and signedness share one (MPI_LONG and
// MPI_INT64_T are both I64 here). F32_INT ... SHORT_INT are the MINLOC/MAXLOC pairs.
enum class ReduceElem : int {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    C32,
    C64,
    F32_INT,
    F64_INT,
    LONG_INT,
    INT_INT,
    SHORT_INT
};
constexpr int kReduceOps = 12, kReduceElems = 17;

struct ReduceSpec {
    ReduceOp op = ReduceOp::SUM;
    ReduceElem elem = ReduceElem::I32;
    std::size_t extent = 0;          // bytes from one element to the next
    std::string op_name, type_name;  // "MPI_SUM", "MPI_INT": for messages
};

// Lower-case names for kernel names: "max", "i32".
const char *reduce_op_word(ReduceOp op);
const char *reduce_elem_word(ReduceElem elem);

// What `op` on `type` computes on a device, per MPI's table of which predefined op
// applies to which type group. MPI_ERR_OP for a pair MPI does not define (the message
// names both); MPI_ERR_UNSUPPORTED_OPERATION for one MPI defines but no device kernel
// does (long double, Fortran types, derived types, user-defined ops).
int classify_reduction(MPI_Op op, MPI_Datatype type, ReduceSpec *out, std::string *why);

// The predefined type a chain of MPI_Type_dup leads to (device buffers are tagged on a
// dup, and MPICH reduces predefined types only), or `type` itself when the chain ends
// elsewhere. The dups get_contents made along the way are freed; named types never are.
MPI_Datatype undup_type(MPI_Datatype type);

}  // namespace mpiacc
