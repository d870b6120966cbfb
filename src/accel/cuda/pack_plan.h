// How a pack or unpack of packed bytes [first, first + len) is cut into the kernels'
// arguments (pack_body.h): host arithmetic only, so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "accel/cuda/pack_body.h"
#include "datatype/flat_type.h"

namespace mpiacc {
namespace cuda {

// The widest word (16, 8, 4, 2 or 1 bytes) that divides the block, every stride in use,
// the range's start and length, and the addresses of the form's first block (`base`) and
// of the packed range.
unsigned strided_word_bytes(const StridedForm &form, const char *base, const void *packed, std::int64_t first,
                            std::int64_t len);

// The strided kernel's arguments for `threads` threads moving `word`-byte words.
StridedArgs plan_strided(const StridedForm &form, char *base, char *packed, std::int64_t first, std::int64_t len,
                         unsigned word, std::uint64_t threads);

// The generic kernel's arguments (units left null: the caller puts the device copy in).
// `units` are one element's, in packed order, covering [0, size); len > 0.
UnitsArgs plan_units(const std::vector<WorkUnit> &units, std::int64_t size, std::int64_t extent, char *origin,
                     char *packed, std::int64_t first, std::int64_t len);

}  // namespace cuda
}  // namespace mpiacc
