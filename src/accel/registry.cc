#include <memory>
#include <vector>

#include "accel/accel.h"
#include "config.h"

namespace mpiacc {

const char *buf_kind_name(BufKind k) {
    switch (k) {
        case BufKind::HOST: return "MPIX_ACC_BUF_HOST";
        case BufKind::CUDA: return "MPIX_ACC_BUF_CUDA";
        case BufKind::OPENCL: return "MPIX_ACC_BUF_OPENCL";
    }
    return "unknown";
}

bool accel_built(BufKind kind) {
    switch (kind) {
        case BufKind::HOST: return true;
#ifdef MPIACC_HAVE_CUDA
        case BufKind::CUDA: return true;
#endif
#ifdef MPIACC_HAVE_OPENCL
        case BufKind::OPENCL: return true;
#endif
        default: return false;
    }
}

namespace {
// Per thread: batches nest (a round inside a completion call's own), and each thread
// flushes what it deferred.
thread_local int batch_depth = 0;
thread_local std::vector<std::shared_ptr<CopyBatch::Holder>> batch_holders;
}  // namespace

CopyBatch::CopyBatch() { ++batch_depth; }

CopyBatch::~CopyBatch() {
    if (--batch_depth != 0 || batch_holders.empty()) return;
    // A flush may defer nothing new (no batch is open now), so one pass empties the list.
    std::vector<std::shared_ptr<Holder>> holders;
    holders.swap(batch_holders);
    for (auto &h : holders) h->flush();
}

bool CopyBatch::open() { return batch_depth > 0; }

void CopyBatch::hold(std::shared_ptr<Holder> holder) {
    // Nothing open to flush it later (a caller that did not ask open()): at once.
    if (batch_depth == 0) {
        holder->flush();
        return;
    }
    for (const auto &h : batch_holders)
        if (h == holder) return;
    batch_holders.push_back(std::move(holder));
}

const AccelCaps &accel_caps(BufKind kind) {
    static const AccelCaps none{};
    switch (kind) {
        case BufKind::HOST: return none;
#ifdef MPIACC_HAVE_CUDA
        case BufKind::CUDA: {
            static const AccelCaps cuda = [] {
                AccelCaps c;
                c.device_memory = c.ipc = c.detects_pointers = c.registers_host = c.packs_types = true;
                return c;
            }();
            return cuda;
        }
#endif
#ifdef MPIACC_HAVE_OPENCL
        case BufKind::OPENCL: {
            static const AccelCaps opencl = [] {
                AccelCaps c;
                c.device_memory = c.handle_addressed = c.packs_types = c.stages_small_isends = true;
                return c;
            }();
            return opencl;
        }
#endif
        default: return none;
    }
}

bool any_accel_has_ipc() {
    for (BufKind k : kAllBufKinds)
        if (accel_caps(k).ipc) return true;
    return false;
}

namespace {
// Components are made on first use and live for the process: the CUDA and OpenCL
// runtimes must not be touched by programs that never pass device memory.
struct Registry {
    AccelSettings settings;
    std::unique_ptr<Accel> host, cuda, opencl;
    bool cuda_made = false, opencl_made = false;
};
Registry &registry() {
    static Registry r;
    return r;
}
}  // namespace

void configure_accels(const AccelSettings &settings) {
    Registry &r = registry();
    r.settings = settings;
    for (Accel *a : {r.cuda.get(), r.opencl.get()})
        if (a) a->reconfigure(settings);
}

const AccelSettings &accel_settings() { return registry().settings; }

Accel *accel_for(BufKind kind) {
    Registry &r = registry();
    switch (kind) {
        case BufKind::HOST:
            if (!r.host) r.host = make_host_accel();
            return r.host.get();
        case BufKind::CUDA:
            if (!r.cuda_made) {
                r.cuda = make_cuda_accel(r.settings);
                r.cuda_made = true;
            }
            return r.cuda.get();
        case BufKind::OPENCL:
            if (!r.opencl_made) {
                r.opencl = make_opencl_accel(r.settings);
                r.opencl_made = true;
            }
            return r.opencl.get();
        default: return nullptr;
    }
}

void shutdown_accels() {
    Registry &r = registry();
    if (r.cuda) r.cuda->shutdown();
    if (r.opencl) r.opencl->shutdown();
}

#ifndef MPIACC_HAVE_CUDA
std::unique_ptr<Accel> make_cuda_accel(const AccelSettings &) { return nullptr; }
#endif
#ifndef MPIACC_HAVE_OPENCL
std::unique_ptr<Accel> make_opencl_accel(const AccelSettings &) { return nullptr; }
#endif

}  // namespace mpiacc
