#include "accel/opencl/reduce.h"

#include <algorithm>

#include "util/error.h"

namespace mpiacc {
namespace opencl {

namespace {

constexpr std::size_t kGroup = 256, kMaxItems = std::size_t{1} << 20;

struct ElemSource {
    const char *type;   // the element, as OpenCL C declares it
    const char *wide;   // integers: the unsigned type SUM and PROD wrap in (no signed overflow)
    std::size_t align;  // what an element's offset must be a multiple of
    bool fp64;          // needs cl_khr_fp64
};

ElemSource elem_source(ReduceElem elem) {
    switch (elem) {
        case ReduceElem::I8: return {"char", "uint", 1, false};
        case ReduceElem::U8: return {"uchar", "uint", 1, false};
        case ReduceElem::I16: return {"short", "uint", 2, false};
        case ReduceElem::U16: return {"ushort", "uint", 2, false};
        case ReduceElem::I32: return {"int", "uint", 4, false};
        case ReduceElem::U32: return {"uint", "uint", 4, false};
        case ReduceElem::I64: return {"long", "ulong", 8, false};
        case ReduceElem::U64: return {"ulong", "ulong", 8, false};
        case ReduceElem::F32: return {"float", nullptr, 4, false};
        case ReduceElem::F64: return {"double", nullptr, 8, true};
        case ReduceElem::C32: return {"struct { float re, im; }", nullptr, 4, false};
        case ReduceElem::C64: return {"struct { double re, im; }", nullptr, 8, true};
        case ReduceElem::F32_INT: return {"struct { float v; int l; }", nullptr, 4, false};
        case ReduceElem::F64_INT: return {"struct { double v; int l; }", nullptr, 8, true};
        case ReduceElem::LONG_INT: return {"struct { long v; int l; }", nullptr, 8, false};
        case ReduceElem::INT_INT: return {"struct { int v; int l; }", nullptr, 4, false};
        case ReduceElem::SHORT_INT: return {"struct { short v; int l; }", nullptr, 4, false};
    }
    return {"uchar", "uint", 1, false};
}

bool is_pair(ReduceElem elem) { return elem >= ReduceElem::F32_INT; }
bool is_complex(ReduceElem elem) { return elem == ReduceElem::C32 || elem == ReduceElem::C64; }

// The statement that combines a = in[i] and b = inout[i] into io[i]. MAX and MIN keep
// MPICH's operand order, so that of two equal values (0.0 and -0.0) the same one wins.
std::string body(ReduceOp op, ReduceElem elem) {
    const ElemSource s = elem_source(elem);
    if (is_pair(elem)) {
        const char *better = op == ReduceOp::MINLOC ? "a.v < b.v" : "a.v > b.v";
        return format("if (%s) { io[i].v = a.v; io[i].l = a.l; } else if (a.v == b.v && a.l < b.l) io[i].l = a.l;",
                      better);
    }
    if (is_complex(elem)) {
        if (op == ReduceOp::SUM) return "io[i].re = b.re + a.re; io[i].im = b.im + a.im;";
        return "T r; r.re = b.re * a.re - b.im * a.im; r.im = b.re * a.im + b.im * a.re; io[i] = r;";
    }
    switch (op) {
        case ReduceOp::MAX: return "io[i] = b > a ? b : a;";
        case ReduceOp::MIN: return "io[i] = b < a ? b : a;";
        case ReduceOp::SUM:
            return s.wide ? format("io[i] = (T)((%s)b + (%s)a);", s.wide, s.wide) : std::string("io[i] = b + a;");
        case ReduceOp::PROD:
            return s.wide ? format("io[i] = (T)((%s)b * (%s)a);", s.wide, s.wide) : std::string("io[i] = b * a;");
        case ReduceOp::LAND: return "io[i] = (T)(b && a);";
        case ReduceOp::LOR: return "io[i] = (T)(b || a);";
        case ReduceOp::LXOR: return "io[i] = (T)(!b != !a);";
        case ReduceOp::BAND: return "io[i] = b & a;";
        case ReduceOp::BOR: return "io[i] = b | a;";
        case ReduceOp::BXOR: return "io[i] = b ^ a;";
        default: return "";
    }
}

// The ops MPI defines on an element kind (only these get a kernel: the others would not
// compile, e.g. a bitwise op on floats).
bool op_applies(ReduceOp op, ReduceElem elem) {
    if (is_pair(elem)) return op == ReduceOp::MINLOC || op == ReduceOp::MAXLOC;
    if (op == ReduceOp::MINLOC || op == ReduceOp::MAXLOC) return false;
    if (is_complex(elem)) return op == ReduceOp::SUM || op == ReduceOp::PROD;
    if (elem == ReduceElem::F32 || elem == ReduceElem::F64)
        return op == ReduceOp::MAX || op == ReduceOp::MIN || op == ReduceOp::SUM || op == ReduceOp::PROD;
    return true;
}

int cl_failure(cl_int error, const std::string &what, std::string *why) {
    *why = what + " failed: " + cl_error_name(error);
    return error == CL_INVALID_MEM_OBJECT ? MPI_ERR_BUFFER : MPI_ERR_OTHER;
}

}  // namespace

std::string reduce_program_source(ReduceElem elem) {
    const ElemSource s = elem_source(elem);
    // One rounding per operation, as on the host: no fused multiply-add.
    std::string src = "#pragma OPENCL FP_CONTRACT OFF\n";
    if (s.fp64) src += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    src += format("typedef %s T;\n", s.type);
    // One kernel, the op an argument (uniform, so no divergence): a kernel per op took
    // PoCL a compile each, several times the reductions' own time in the tests.
    src +=
        "__kernel void reduce(__global const uchar *in_bytes, ulong in_offset, __global uchar *io_bytes,\n"
        "                     ulong io_offset, ulong n, int op) {\n"
        "    __global const T *in = (__global const T *)(in_bytes + in_offset);\n"
        "    __global T *io = (__global T *)(io_bytes + io_offset);\n"
        "    switch (op) {\n";
    for (int o = 0; o < kReduceOps; ++o) {
        const auto op = static_cast<ReduceOp>(o);
        if (!op_applies(op, elem)) continue;
        src += format(
            "    case %d:\n"
            "        for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
            "            const T a = in[i], b = io[i];\n"
            "            %s\n"
            "        }\n"
            "        break;\n",
            o, body(op, elem).c_str());
    }
    src += "    }\n}\n";
    return src;
}

int enqueue_reduce(CacheEntry &entry, cl_command_queue queue, const ReduceSpec &spec, cl_mem in, std::size_t in_offset,
                   cl_mem inout, std::size_t inout_offset, std::int64_t count, cl_uint nwait, const cl_event *wait,
                   cl_event *done, std::string *why) {
    const ElemSource s = elem_source(spec.elem);
    if (in_offset % s.align != 0 || inout_offset % s.align != 0) {
        *why = format("%s on %s: the buffers start at bytes %zu and %zu of their cl_mem, not both multiples of %zu",
                      spec.op_name.c_str(), spec.type_name.c_str(), in_offset, inout_offset, s.align);
        return MPI_ERR_BUFFER;
    }
    if (!op_applies(spec.op, spec.elem) || count < 0) {
        *why = format("%s on %s: no OpenCL kernel", spec.op_name.c_str(), spec.type_name.c_str());
        return MPI_ERR_INTERN;
    }
    if (s.fp64) {
        char extensions[4096] = {0};
        clGetDeviceInfo(entry.device(), CL_DEVICE_EXTENSIONS, sizeof extensions - 1, extensions, nullptr);
        if (std::string(extensions).find("cl_khr_fp64") == std::string::npos) {
            *why = format("%s on %s: the OpenCL device has no double precision (cl_khr_fp64)", spec.op_name.c_str(),
                          spec.type_name.c_str());
            return MPI_ERR_UNSUPPORTED_OPERATION;
        }
    }
    const std::string program = std::string("reduce_") + reduce_elem_word(spec.elem);
    const std::string name = "reduce";
    const cl_int op = static_cast<cl_int>(spec.op);
    CacheEntry::LockedKernel kernel = entry.kernel(program, reduce_program_source(spec.elem), name, queue, why);
    if (!kernel.kernel) return MPI_ERR_OTHER;
    const cl_ulong args[] = {in_offset, inout_offset, static_cast<cl_ulong>(count)};
    cl_int error = clSetKernelArg(kernel.kernel, 0, sizeof in, &in);
    if (error == CL_SUCCESS) error = clSetKernelArg(kernel.kernel, 1, sizeof args[0], &args[0]);
    if (error == CL_SUCCESS) error = clSetKernelArg(kernel.kernel, 2, sizeof inout, &inout);
    if (error == CL_SUCCESS) error = clSetKernelArg(kernel.kernel, 3, sizeof args[1], &args[1]);
    if (error == CL_SUCCESS) error = clSetKernelArg(kernel.kernel, 4, sizeof args[2], &args[2]);
    if (error == CL_SUCCESS) error = clSetKernelArg(kernel.kernel, 5, sizeof op, &op);
    if (error != CL_SUCCESS) return cl_failure(error, "clSetKernelArg of " + program + "." + name, why);
    const std::size_t local = std::min(kGroup, kernel.max_group);
    const std::size_t items = std::min(static_cast<std::size_t>(count), kMaxItems);
    const std::size_t global = std::max<std::size_t>(1, (items + local - 1) / local) * local;
    error = clEnqueueNDRangeKernel(queue, kernel.kernel, 1, nullptr, &global, &local, nwait, wait, done);
    if (error != CL_SUCCESS) return cl_failure(error, "clEnqueueNDRangeKernel of " + program + "." + name, why);
    return MPI_SUCCESS;
}

}  // namespace opencl
}  // namespace mpiacc
