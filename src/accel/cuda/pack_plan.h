// How a pack or unpack of packed bytes [first, first + len) is cut into the kernels'
// arguments (pack_body.h): host arithmetic only, so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accel/cuda/pack_body.h"
#include "datatype/flat_type.h"

namespace mpiacc {
namespace cuda {

// How packed bytes [first, first + len) of (origin, count, flat) move: nothing (len 0),
// one copy of `copy_bytes` bytes from `copy_from` to `copy_to` (a dense type), the
// strided kernels with `word`-byte words over `form` (from `base`), or the generic kernel.
struct PackChoice {
    enum class Kind { NOTHING, COPY, STRIDED, UNITS } kind = Kind::NOTHING;
    char *copy_to = nullptr;
    const char *copy_from = nullptr;
    std::int64_t copy_bytes = 0;
    StridedForm form;
    char *base = nullptr;
    unsigned word = 1;
};

// Checks the range and chooses; `pack` says which way the bytes go. MPI_ERR_ARG with
// *why when the range is not inside the count * size packed bytes.
int choose_pack(const FlatType &flat, char *origin, std::int64_t count, std::int64_t first, std::int64_t len,
                char *packed, bool pack, PackChoice *choice, std::string *why);

// The widest word (16, 8, 4, 2 or 1 bytes) that divides the block, every stride in use,
// the range's start and length, and the addresses of the form's first block (`base`) and
// of the packed range.
unsigned strided_word_bytes(const StridedForm &form, const char *base, const void *packed, std::int64_t first,
                            std::int64_t len);

// The strided kernel's arguments for `threads` threads moving `word`-byte words.
StridedArgs plan_strided(const StridedForm &form, char *base, char *packed, std::int64_t first, std::int64_t len,
                         unsigned word, std::uint64_t threads);

// The generic kernel's arguments (units left null: the caller puts the device copy in),
// with the lanes a unit from the units' average length.
// `units` are one element's, in packed order, covering [0, size); len > 0.
UnitsArgs plan_units(const std::vector<WorkUnit> &units, std::int64_t size, std::int64_t extent, char *origin,
                     char *packed, std::int64_t first, std::int64_t len);

}  // namespace cuda
}  // namespace mpiacc
