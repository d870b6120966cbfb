// Packing derived datatypes on cl_mem buffers: kernels that read a FlatType (BRIEF D1-D3).
// A type with a strided form gets the strided kernel in the widest word the layout
// allows (D2); any other type the work-unit kernel (D3). Both move any packed byte range
// of `count` elements, so a pipeline packs chunk by chunk. Nothing here blocks: the
// kernel is enqueued after `wait` and *done (when asked for) completes with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "accel/opencl/object_cache.h"
#include "datatype/flat_type.h"

namespace mpiacc {
namespace opencl {

// Which kernel moves a range, and how (tests and traces read it).
struct PackChoice {
    bool strided = false;         // the strided kernel; else the work-unit kernel
    int word = 1;                 // strided: bytes per access (1, 2, 4, 8 or 16)
    bool wide_index = false;      // strided: 64-bit word indices
    bool group_per_unit = false;  // work units: one work-group per unit (else one work-item)
};
PackChoice choose_pack_kernel(const FlatType &flat, std::int64_t origin, std::int64_t count, std::int64_t first,
                              std::int64_t len, std::size_t packed_offset);

// Packed bytes [first, first + len) of `count` elements of `flat`, whose origin is byte
// `origin` of `typed`, into `packed` from byte `packed_offset` on; enqueued on `queue`
// (of the entry's context and device) after the nwait events of `wait`. *done, when
// done is not null, gets an event for the kernel (a marker when len is 0). The
// elements' touched bytes must lie inside `typed`. MPI_SUCCESS, or an MPI error class
// with *why naming what failed (a range outside the elements, a kernel that does not
// build or launch).
int enqueue_pack(CacheEntry &entry, cl_command_queue queue, const FlatType &flat, cl_mem typed, std::int64_t origin,
                 std::int64_t count, std::int64_t first, std::int64_t len, cl_mem packed, std::size_t packed_offset,
                 cl_uint nwait, const cl_event *wait, cl_event *done, std::string *why);

// The reverse: `len` packed bytes at byte `packed_offset` of `packed` are bytes
// [first, first + len) of the packed form of `count` elements, written into `typed`.
int enqueue_unpack(CacheEntry &entry, cl_command_queue queue, const FlatType &flat, cl_mem packed,
                   std::size_t packed_offset, std::int64_t len, cl_mem typed, std::int64_t origin, std::int64_t count,
                   std::int64_t first, cl_uint nwait, const cl_event *wait, cl_event *done, std::string *why);

}  // namespace opencl
}  // namespace mpiacc
