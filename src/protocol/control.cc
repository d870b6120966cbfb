#include <cstdio>

#include "core/context.h"
#include "core/counters.h"
#include "protocol/transfer.h"

namespace mpiacc {

ControlChannel::ControlChannel(int slots) : buffers_(std::max(1, slots)), requests_(std::max(1, slots)) {
    Context &ctx = context();
    for (std::size_t i = 0; i < requests_.size(); ++i)
        PMPI_Irecv(&buffers_[i], sizeof(ControlMessage), MPI_BYTE, MPI_ANY_SOURCE, kControlTag, ctx.proto_comm,
                   &requests_[i]);
}

ControlChannel::~ControlChannel() { shutdown(); }

void ControlChannel::shutdown() {
    for (auto &r : requests_) {
        if (r == MPI_REQUEST_NULL) continue;
        PMPI_Cancel(&r);
        PMPI_Wait(&r, MPI_STATUS_IGNORE);
    }
}

void ControlChannel::poll() {
    Context &ctx = context();
    int outcount = 0;
    std::vector<int> indices(requests_.size());
    std::vector<MPI_Status> statuses(requests_.size());
    PMPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &outcount, indices.data(), statuses.data());
    if (outcount == MPI_UNDEFINED) return;
    for (int k = 0; k < outcount; ++k) {
        int i = indices[k];
        const ControlMessage &msg = buffers_[i];
        int from = statuses[k].MPI_SOURCE;
        if (msg.magic == kEnvelopeMagic) {
            auto type = static_cast<ControlType>(msg.type);
            if (type == ControlType::ABORT) {
                auto it = ctx.receivers.find({from, msg.transfer_id});
                if (it != ctx.receivers.end()) it->second->on_abort(msg);
            } else {
                auto it = ctx.senders.find(msg.transfer_id);
                if (it != ctx.senders.end())
                    it->second->on_control(msg);
                else
                    counter("protocol.control.orphan")++;
            }
        }
        PMPI_Irecv(&buffers_[i], sizeof(ControlMessage), MPI_BYTE, MPI_ANY_SOURCE, kControlTag, ctx.proto_comm,
                   &requests_[i]);
    }
}

}  // namespace mpiacc
