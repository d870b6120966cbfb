// The host component of the accelerator table: memory the CPU addresses directly, the
// same role as Open MPI's null accelerator. It has none of the capabilities (no IPC, no
// pointer detection, no registration), and a capture says that the buffer moves as
// host memory, without staging.
#include "accel/accel.h"

namespace mpiacc {

namespace {

class HostAccel final : public Accel {
public:
    BufKind kind() const override { return BufKind::HOST; }
    const char *name() const override { return "host"; }
    bool available() override { return true; }
    // Host memory needs no device buffer: *out stays null, as for pinned memory a device
    // kind recognises (make_message_buffer then keeps the user's buffer and datatype).
    int capture(void * /*addr*/, std::size_t /*bytes*/, const BufferAttrs & /*attrs*/,
                std::unique_ptr<DeviceBuffer> *out, std::string * /*why*/) override {
        out->reset();
        return MPI_SUCCESS;
    }
};

}  // namespace

std::unique_ptr<Accel> make_host_accel() { return std::make_unique<HostAccel>(); }

}  // namespace mpiacc
