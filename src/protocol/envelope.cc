#include "protocol/envelope.h"

#include <cstring>

namespace mpiacc {

const char *mode_name(TransferMode m) {
    switch (m) {
        case TransferMode::DIRECT: return "direct";
        case TransferMode::PIPELINE: return "pipeline";
        case TransferMode::IPC: return "ipc";
        case TransferMode::SHARED: return "shared";
    }
    return "?";
}

bool looks_like_envelope(const void *buf, std::size_t bytes) {
    if (bytes != kEnvelopeBytes) return false;
    Envelope e;
    std::memcpy(&e, buf, sizeof e);
    return e.magic == kEnvelopeMagic && e.version == kProtocolVersion;
}

}  // namespace mpiacc
