/* The OpenCL datatype pack and unpack kernels (src/accel/opencl/pack.h) against their
 * anchor from the same run: clEnqueueCopyBuffer of the same number of bytes, device to
 * device (BRIEF D2 asks the vector kernel for 94% of it, D3 the triangle for 80%). One
 * rank, the platform MPIACC_OPENCL_PLATFORM names. Every layout is checked against
 * MPI_Pack before it is timed. Writes a CSV (results_csv.h).
 *
 *   pack_opencl [--bytes N] [--iters N] [--csv FILE|DIR/]   (N: packed bytes per layout) */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "results_csv.h"
#include "accel/opencl/object_cache.h"
#include "accel/opencl/pack.h"
#include "datatype/flat_type.h"

namespace {

using mpiacc::opencl::MemRef;

[[noreturn]] void die(const char *what, const std::string &why) {
    std::fprintf(stderr, "pack_opencl: %s: %s\n", what, why.c_str());
    PMPI_Abort(MPI_COMM_WORLD, 1);
    std::exit(1);
}

void cl_check(cl_int error, const char *what) {
    if (error != CL_SUCCESS) die(what, mpiacc::opencl::cl_error_name(error));
}

struct Layout {
    std::string name;
    MPI_Datatype type;
};

// Layouts of about `bytes` packed bytes (one element each): vectors of 8-byte, 64-byte
// and 1 KiB blocks at twice their length apart, and a triangle of doubles (row i has
// i + 1 of n), whose rows are cut into work units.
std::vector<Layout> layouts(long bytes) {
    std::vector<Layout> list;
    for (int block : {8, 64, 1024}) {
        MPI_Datatype t;
        MPI_Type_vector(static_cast<int>(bytes / block), block / 8, block / 4, MPI_DOUBLE, &t);
        MPI_Type_commit(&t);
        list.push_back({"vector_" + std::to_string(block) + "B_blocks", t});
    }
    int n = 1;
    while (static_cast<long>(n + 1) * (n + 2) / 2 * 8 <= bytes) ++n;
    std::vector<int> lens(n), displs(n);
    for (int i = 0; i < n; ++i) lens[i] = i + 1, displs[i] = i * n;
    MPI_Datatype t;
    MPI_Type_indexed(n, lens.data(), displs.data(), MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    list.push_back({"triangle_" + std::to_string(n) + "_rows", t});
    return list;
}

// Seconds per call of `enqueue`, over `iters` calls after two unmeasured ones.
template <typename F>
double seconds_per_call(cl_command_queue queue, int iters, F enqueue) {
    for (int i = 0; i < 2; ++i) enqueue();
    cl_check(clFinish(queue), "clFinish");
    const double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i) enqueue();
    cl_check(clFinish(queue), "clFinish");
    return (MPI_Wtime() - start) / iters;
}

// "64M", "4096", "1K": bytes.
long parse_bytes(const char *text) {
    char *end = nullptr;
    long value = std::strtol(text, &end, 0);
    if (*end == 'K' || *end == 'k') value <<= 10;
    if (*end == 'M' || *end == 'm') value <<= 20;
    if (*end == 'G' || *end == 'g') value <<= 30;
    return value;
}

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long bytes = 64L << 20;
    int iters = 20;
    const char *csv_path = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = parse_bytes(argv[++i]);
        else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else {
            std::fprintf(stderr, "usage: pack_opencl [--bytes N] [--iters N] [--csv FILE|DIR/]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (bytes < 4096 || iters < 1) die("arguments", "--bytes must be at least 4096 and --iters at least 1");

    // The first platform with a device whose name contains MPIACC_OPENCL_PLATFORM.
    const char *want = std::getenv("MPIACC_OPENCL_PLATFORM");
    cl_platform_id platforms[16];
    cl_uint np = 0;
    cl_device_id device = nullptr;
    char platform_name[256] = "", device_name[256] = "";
    if (clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS) np = 0;
    for (cl_uint i = 0; i < np && !device; ++i) {
        clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof platform_name - 1, platform_name, nullptr);
        if (want && *want && !std::strstr(platform_name, want)) continue;
        if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &device, nullptr) != CL_SUCCESS) device = nullptr;
    }
    if (!device)
        die("setup", std::string("no OpenCL device") + (want ? " on a platform named like " : "") + (want ? want : ""));
    clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof device_name - 1, device_name, nullptr);
    cl_int error = CL_SUCCESS;
    cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &error);
    cl_check(error, "clCreateContext");
    std::string why;
    {
        mpiacc::opencl::ObjectCache cache(1, mpiacc::opencl::EntrySettings{});
        std::shared_ptr<mpiacc::opencl::CacheEntry> entry = cache.acquire(context, device, &why);
        if (!entry) die("object cache", why);
        cl_command_queue queue = entry->next_copy_queue();  // kernels cached for the entry's own queues

        char path[1024], lib[MPI_MAX_LIBRARY_VERSION_STRING];
        FILE *csv = open_results_csv(csv_path, "pack_opencl", path, sizeof path);
        if (!csv) die("CSV", path);
        begin_results_csv(csv, "pack_opencl", argc, argv, lib);
        std::fprintf(csv, "# platform=\"%s\" device=\"%s\" %s\n", platform_name, device_name, lib);
        std::fprintf(csv,
                     "layout,kernel,packed_bytes,pack_gbs,unpack_gbs,copy_gbs,pack_pct_of_copy,unpack_pct_of_copy\n");
        std::printf("# pack_opencl: platform \"%s\", device \"%s\"; GB/s = 1e9 packed bytes/s, %d calls each\n",
                    platform_name, device_name, iters);
        std::printf("%-22s %-22s %12s %9s %9s %9s %7s %7s\n", "layout", "kernel", "bytes", "pack", "unpack", "copy",
                    "pack%", "unpack%");

        for (Layout &layout : layouts(bytes)) {
            int mpi_error = MPI_SUCCESS;
            std::shared_ptr<const mpiacc::FlatType> flat = mpiacc::flat_type(layout.type, &mpi_error, &why);
            if (!flat) die("flat_type", why);
            const long packed_bytes = flat->size();
            const long typed_bytes = flat->true_lb() + flat->true_extent();
            std::vector<unsigned char> host(typed_bytes), reference(packed_bytes), out(packed_bytes);
            for (long i = 0; i < typed_bytes; ++i) host[i] = static_cast<unsigned char>(i * 131 + (i >> 9));
            int at = 0;
            PMPI_Pack(host.data(), 1, layout.type, reference.data(), static_cast<int>(packed_bytes), &at,
                      MPI_COMM_SELF);
            MemRef typed = MemRef::adopt(clCreateBuffer(context, CL_MEM_READ_WRITE, typed_bytes, nullptr, &error));
            cl_check(error, "clCreateBuffer");
            MemRef packed = MemRef::adopt(clCreateBuffer(context, CL_MEM_READ_WRITE, packed_bytes, nullptr, &error));
            cl_check(error, "clCreateBuffer");
            MemRef copy = MemRef::adopt(clCreateBuffer(context, CL_MEM_READ_WRITE, packed_bytes, nullptr, &error));
            cl_check(error, "clCreateBuffer");
            cl_check(
                clEnqueueWriteBuffer(queue, typed.get(), CL_TRUE, 0, typed_bytes, host.data(), 0, nullptr, nullptr),
                "clEnqueueWriteBuffer");

            auto pack = [&] {
                int rc = mpiacc::opencl::enqueue_pack(*entry, queue, *flat, typed.get(), 0, 1, 0, packed_bytes,
                                                      packed.get(), 0, 0, nullptr, nullptr, &why);
                if (rc != MPI_SUCCESS) die("enqueue_pack", why);
            };
            auto unpack = [&] {
                int rc = mpiacc::opencl::enqueue_unpack(*entry, queue, *flat, packed.get(), 0, packed_bytes,
                                                        typed.get(), 0, 1, 0, 0, nullptr, nullptr, &why);
                if (rc != MPI_SUCCESS) die("enqueue_unpack", why);
            };
            pack();
            cl_check(
                clEnqueueReadBuffer(queue, packed.get(), CL_TRUE, 0, packed_bytes, out.data(), 0, nullptr, nullptr),
                "clEnqueueReadBuffer");
            if (out != reference) die(layout.name.c_str(), "the packed bytes differ from MPI_Pack's");

            const double t_pack = seconds_per_call(queue, iters, pack);
            const double t_unpack = seconds_per_call(queue, iters, unpack);
            const double t_copy = seconds_per_call(queue, iters, [&] {
                cl_check(clEnqueueCopyBuffer(queue, packed.get(), copy.get(), 0, 0, packed_bytes, 0, nullptr, nullptr),
                         "clEnqueueCopyBuffer");
            });
            const mpiacc::opencl::PackChoice choice =
                mpiacc::opencl::choose_pack_kernel(*flat, 0, 1, 0, packed_bytes, 0);
            const std::string kernel = choice.strided ? "strided_w" + std::to_string(choice.word)
                                                      : (choice.group_per_unit ? "units_group" : "units_item");
            const double gbs_pack = packed_bytes / t_pack / 1e9, gbs_unpack = packed_bytes / t_unpack / 1e9,
                         gbs_copy = packed_bytes / t_copy / 1e9;
            std::printf("%-22s %-22s %12ld %9.1f %9.1f %9.1f %6.0f%% %6.0f%%\n", layout.name.c_str(), kernel.c_str(),
                        packed_bytes, gbs_pack, gbs_unpack, gbs_copy, 100 * gbs_pack / gbs_copy,
                        100 * gbs_unpack / gbs_copy);
            std::fprintf(csv, "%s,%s,%ld,%.3f,%.3f,%.3f,%.1f,%.1f\n", layout.name.c_str(), kernel.c_str(), packed_bytes,
                         gbs_pack, gbs_unpack, gbs_copy, 100 * gbs_pack / gbs_copy, 100 * gbs_unpack / gbs_copy);
            MPI_Type_free(&layout.type);
        }
        std::fclose(csv);
        std::printf("# CSV: %s\n", path);
    }
    clReleaseContext(context);
    MPI_Finalize();
    return 0;
}
