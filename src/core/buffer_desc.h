// Attribute capture: what a call's buffer is, decided from its datatype's MPI-ACC
// attributes (or by pointer query) when the call is made (DESIGN.md 1, BRIEF A1-A4).
#pragma once

#include <mpi.h>

#include <string>

#include "accel/accel.h"
#include "core/context.h"

namespace mpiacc {

// Reads and validates the MPI-ACC attributes of `type` into *attrs. Returns MPI_SUCCESS or
// an MPI error class, with *why naming the attribute and the problem.
int read_buffer_attrs(MPI_Datatype type, BufferAttrs *attrs, std::string *why);

// The kind's name as users say it in prose, for error messages: "host", "CUDA", "OpenCL".
const char *buf_kind_word(BufKind kind);

// The component a public MPIX_ACC_BUF_* value names (null for another value, or a kind
// not built in): the support queries ask it.
Accel *accel_for_buf_type(int mpix_acc_buf_value);

// Decides the kind of `buf`: attributes first, then CUDA pointer autodetection. A kind that
// is not built or has no usable device gives MPI_ERR_UNSUPPORTED_OPERATION. A message
// about the buffer names it as the call's argument `arg` ("buf", or "sendbuf" ...).
int classify_buffer(const void *buf, MPI_Datatype type, BufferAttrs *attrs, std::string *why, const char *arg = "buf");

// No buffer can be of a device kind: no type carries an MPI-ACC attribute, and CUDA
// pointers are not looked for. The calls that only refuse device buffers (collectives,
// one-sided, pack) then look at nothing.
inline bool only_host_buffers(const Context &ctx) {
    return ctx.tagged_type_count.load(std::memory_order_relaxed) == 0 && !ctx.autodetect_active;
}

// The common case, inlined into every binding: no type carries attributes, and either
// autodetection is off or `buf` is host memory. Memory autodetection has seen before is
// read from the memory-kind cache's host table inline (known_host.h: a few loads, the
// CUDA-aware convention's cost, DESIGN.md 5); the rest is asked of the cache, and of the
// driver once. The entry points test `!autodetect_active` first, so with it off none
// of this is compiled into their fast path.
inline bool buffer_is_plain_host(const Context &ctx, const void *buf) {
    if (ctx.tagged_type_count.load(std::memory_order_relaxed) != 0) return false;
    if (!ctx.autodetect_active || ctx.known_host.contains(buf)) return true;
    int ordinal;
    return !ctx.detecting_accel->owns_pointer(buf, &ordinal);
}

// Keyval callbacks: they keep Context::tagged_types exact as types are duplicated,
// re-tagged and freed.
int attr_copy_callback(MPI_Datatype oldtype, int keyval, void *extra, void *in, void *out, int *flag);
int attr_delete_callback(MPI_Datatype type, int keyval, void *value, void *extra);
void note_attr_set(MPI_Datatype type);
void note_type_duplicated(MPI_Datatype newtype);

}  // namespace mpiacc
