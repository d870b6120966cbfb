#include "accel/opencl/pack.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "accel/opencl/pack_kernels_cl.h"
#include "util/error.h"

namespace mpiacc {
namespace opencl {

namespace {

constexpr const char *kProgram = "datatype_pack";
// Work-group sizes: a strided or per-item launch, and a group per unit (two NVIDIA warps,
// 64 work-items moving a 1 KiB unit in 16-byte words is one word each).
constexpr std::size_t kItemGroup = 256, kUnitGroup = 64;
// Grid-stride loops cover the rest: no launch needs more work-items than this. The
// strided kernel's items step without dividing, so it wants fewer of them, each looping:
// about as many as a large GPU keeps resident (132 SMs x 2048 threads on an H100).
constexpr std::size_t kMaxItems = std::size_t{1} << 22, kMaxGroups = std::size_t{1} << 16;
constexpr std::size_t kStridedItems = std::size_t{1} << 18;
// Units shorter than this on average get a work-item each, not a group.
constexpr std::int64_t kGroupUnitBytes = 128;

static_assert(sizeof(WorkUnit) == 3 * sizeof(cl_long), "the kernels read WorkUnit as three longs");

// The widest word (16 down to 1 bytes) that divides every quantity: no word then
// straddles a block, and typed and packed accesses are aligned.
int widest_word(std::int64_t block, const StridedForm &form, std::int64_t base, std::int64_t packed_shift) {
    for (int word = 16; word > 1; word /= 2) {
        bool fits = block % word == 0 && base % word == 0 && packed_shift % word == 0;
        for (int d = 0; d < kMaxStridedDims; ++d)
            if (form.count[d] > 1 && form.stride[d] % word != 0) fits = false;
        if (fits) return word;
    }
    return 1;
}

PackChoice choose(const FlatType &flat, std::int64_t origin, std::int64_t count, std::int64_t first, std::int64_t len,
                  std::size_t packed_offset, StridedForm *form) {
    PackChoice choice;
    if (flat.strided(count, form) && form->block > 0) {
        choice.strided = true;
        const std::int64_t packed_shift = static_cast<std::int64_t>(packed_offset) - first;
        choice.word = widest_word(form->block, *form, origin + form->offset, packed_shift);
        // The kernel's word indices reach (first + len) / word plus one grid's stride.
        choice.wide_index = (first + len) / choice.word + static_cast<std::int64_t>(kMaxItems) + 1 >
                            static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
    } else {
        const std::size_t units = flat.units().size();
        choice.group_per_unit = units > 0 && flat.size() / static_cast<std::int64_t>(units) >= kGroupUnitBytes;
    }
    return choice;
}

std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Index of the unit holding byte `at` of an element's packed form.
std::int64_t unit_at(const std::vector<WorkUnit> &units, std::int64_t at) {
    auto after = std::upper_bound(units.begin(), units.end(), at,
                                  [](std::int64_t value, const WorkUnit &unit) { return value < unit.packed; });
    return std::max<std::int64_t>(0, (after - units.begin()) - 1);
}

int cl_failure(cl_int error, const std::string &what, std::string *why) {
    *why = what + " failed: " + cl_error_name(error);
    return error == CL_INVALID_MEM_OBJECT ? MPI_ERR_BUFFER : MPI_ERR_OTHER;
}

// Sets a kernel's arguments, keeping the first error.
struct ArgSetter {
    cl_kernel kernel;
    cl_int error = CL_SUCCESS;
    cl_uint failed_at = 0;
    template <typename T>
    void operator()(cl_uint index, const T &value) {
        cl_int result = clSetKernelArg(kernel, index, sizeof(T), &value);
        if (result != CL_SUCCESS && error == CL_SUCCESS) {
            error = result;
            failed_at = index;
        }
    }
};

struct Launch {
    bool to_packed;
    const char *call;  // "enqueue_pack" or "enqueue_unpack", for messages
};

int launch(const Launch &how, CacheEntry &entry, cl_command_queue queue, const FlatType &flat, cl_mem typed,
           std::int64_t origin, std::int64_t count, std::int64_t first, std::int64_t len, cl_mem packed,
           std::size_t packed_offset, cl_uint nwait, const cl_event *wait, cl_event *done, std::string *why) {
    const std::int64_t size = flat.size();
    if (!queue || !typed || !packed) {
        *why = format("%s: the %s is null", how.call,
                      !queue   ? "command queue"
                      : !typed ? "typed cl_mem"
                               : "packed cl_mem");
        return MPI_ERR_ARG;
    }
    if (count < 0 || first < 0 || len < 0 || (size > 0 && count > std::numeric_limits<std::int64_t>::max() / size) ||
        first > count * size - len ||
        packed_offset > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())) {
        *why = format("%s: packed bytes [%lld, %lld + %lld) are not within the %lld elements of %lld bytes each",
                      how.call, static_cast<long long>(first), static_cast<long long>(first),
                      static_cast<long long>(len), static_cast<long long>(count), static_cast<long long>(size));
        return MPI_ERR_ARG;
    }
    if (len == 0) {
        cl_int error = done ? clEnqueueMarkerWithWaitList(queue, nwait, wait, done) : CL_SUCCESS;
        return error == CL_SUCCESS ? MPI_SUCCESS
                                   : cl_failure(error, format("%s: clEnqueueMarkerWithWaitList", how.call), why);
    }

    StridedForm form;
    const PackChoice choice = choose(flat, origin, count, first, len, packed_offset, &form);
    const std::string direction = how.to_packed ? "pack" : "unpack";
    const cl_long packed_start = static_cast<cl_long>(packed_offset), end = first + len;
    std::string name;
    CacheEntry::LockedKernel kernel;
    std::size_t local = 0, global = 0;
    ArgSetter set_arg{nullptr};
    std::shared_ptr<void> units_copy;  // kept until the kernel is enqueued (it retains the cl_mem)

    if (choice.strided) {
        if (form.block * form.count[0] * form.count[1] * form.count[2] != count * size) {
            *why = format("%s: the strided form of %lld elements holds %lld bytes, not %lld", how.call,
                          static_cast<long long>(count),
                          static_cast<long long>(form.block * form.count[0] * form.count[1] * form.count[2]),
                          static_cast<long long>(count * size));
            return MPI_ERR_INTERN;
        }
        const int w = choice.word;
        name = format("%s_strided_w%d%s", direction.c_str(), w, choice.wide_index ? "_wide" : "");
        kernel = entry.kernel(kProgram, kPackKernelsSource, name, queue, why);
        if (!kernel.kernel) return MPI_ERR_OTHER;
        set_arg.kernel = kernel.kernel;
        const cl_long args[] = {origin + form.offset, packed_start,   form.block / w, form.count[0], form.count[1],
                                form.stride[0],       form.stride[1], form.stride[2], first,         end};
        set_arg(0, typed);
        set_arg(1, args[0]);
        set_arg(2, packed);
        for (cl_uint i = 1; i < sizeof args / sizeof args[0]; ++i) set_arg(i + 2, args[i]);
        const std::size_t words = static_cast<std::size_t>((end + w - 1) / w - first / w);
        local = std::min(kItemGroup, kernel.max_group);
        global = round_up(std::min(words, kStridedItems), local);
    } else {
        const std::vector<WorkUnit> &units = flat.units();
        const std::int64_t nunits = static_cast<std::int64_t>(units.size());
        if (nunits == 0 || size == 0) {
            *why = format("%s: a type of %lld packed bytes has no work units", how.call, static_cast<long long>(size));
            return MPI_ERR_INTERN;
        }
        std::string make_why;
        units_copy = flat.device_copy(entry.device_copy_key(), [&] {
            return entry.make_constant_buffer(units.data(), units.size() * sizeof(WorkUnit), &make_why);
        });
        cl_mem units_mem = CacheEntry::constant_buffer_mem(units_copy);
        if (!units_mem) {
            *why = format("%s: no device copy of the type's work units: %s", how.call,
                          make_why.empty() ? "its OpenCL context has gone" : make_why.c_str());
            return MPI_ERR_OTHER;
        }
        const std::int64_t last = end - 1;
        const cl_long pair_begin = first / size * nunits + unit_at(units, first % size);
        const cl_long pair_end = last / size * nunits + unit_at(units, last % size) + 1;
        name = direction + (choice.group_per_unit ? "_units_group" : "_units_item");
        kernel = entry.kernel(kProgram, kPackKernelsSource, name, queue, why);
        if (!kernel.kernel) return MPI_ERR_OTHER;
        set_arg.kernel = kernel.kernel;
        const cl_long extent = flat.extent(), n = nunits, bytes = size;
        set_arg(0, typed);
        set_arg(1, static_cast<cl_long>(origin));
        set_arg(2, extent);
        set_arg(3, packed);
        set_arg(4, packed_start);
        set_arg(5, units_mem);
        set_arg(6, n);
        set_arg(7, bytes);
        set_arg(8, pair_begin);
        set_arg(9, pair_end);
        set_arg(10, static_cast<cl_long>(first));
        set_arg(11, static_cast<cl_long>(end));
        const std::size_t pairs = static_cast<std::size_t>(pair_end - pair_begin);
        if (choice.group_per_unit) {
            local = std::min(kUnitGroup, kernel.max_group);
            global = std::min(pairs, kMaxGroups) * local;
        } else {
            local = std::min(kItemGroup, kernel.max_group);
            global = round_up(std::min(pairs, kMaxItems), local);
        }
    }
    if (set_arg.error != CL_SUCCESS)
        return cl_failure(set_arg.error,
                          format("%s: clSetKernelArg %u of '%s'", how.call, set_arg.failed_at, name.c_str()), why);
    cl_int error = clEnqueueNDRangeKernel(queue, kernel.kernel, 1, nullptr, &global, &local, nwait, wait, done);
    if (error != CL_SUCCESS)
        return cl_failure(error, format("%s: clEnqueueNDRangeKernel of '%s'", how.call, name.c_str()), why);
    return MPI_SUCCESS;
}

}  // namespace

PackChoice choose_pack_kernel(const FlatType &flat, std::int64_t origin, std::int64_t count, std::int64_t first,
                              std::int64_t len, std::size_t packed_offset) {
    StridedForm form;
    return choose(flat, origin, count, first, len, packed_offset, &form);
}

int enqueue_pack(CacheEntry &entry, cl_command_queue queue, const FlatType &flat, cl_mem typed, std::int64_t origin,
                 std::int64_t count, std::int64_t first, std::int64_t len, cl_mem packed, std::size_t packed_offset,
                 cl_uint nwait, const cl_event *wait, cl_event *done, std::string *why) {
    return launch({true, "enqueue_pack"}, entry, queue, flat, typed, origin, count, first, len, packed, packed_offset,
                  nwait, wait, done, why);
}

int enqueue_unpack(CacheEntry &entry, cl_command_queue queue, const FlatType &flat, cl_mem packed,
                   std::size_t packed_offset, std::int64_t len, cl_mem typed, std::int64_t origin, std::int64_t count,
                   std::int64_t first, cl_uint nwait, const cl_event *wait, cl_event *done, std::string *why) {
    return launch({false, "enqueue_unpack"}, entry, queue, flat, typed, origin, count, first, len, packed,
                  packed_offset, nwait, wait, done, why);
}

}  // namespace opencl
}  // namespace mpiacc
