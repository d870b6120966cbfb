// Reductions on cl_mem buffers (MPI_Reduce_local): one program per element kind, whose
// one kernel takes the op as an argument, built on first use and kept by the cache entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "accel/opencl/object_cache.h"
#include "accel/reduce_op.h"

namespace mpiacc {
namespace opencl {

// The OpenCL C source of the program for `elem` (tests read it).
std::string reduce_program_source(ReduceElem elem);

// inout[i] = in[i] op inout[i] for `count` elements of spec.extent bytes, `in` from byte
// `in_offset` of its cl_mem, `inout` from `inout_offset`; enqueued on `queue` after the
// nwait events of `wait`, *done an event for the kernel. MPI_SUCCESS, or an MPI error
// class with *why (an offset not aligned for the element, a kernel that does not build
// or launch).
int enqueue_reduce(CacheEntry &entry, cl_command_queue queue, const ReduceSpec &spec, cl_mem in, std::size_t in_offset,
                   cl_mem inout, std::size_t inout_offset, std::int64_t count, cl_uint nwait, const cl_event *wait,
                   cl_event *done, std::string *why);

}  // namespace opencl
}  // namespace mpiacc
