#include <cstdio>

#include "core/context.h"
#include "core/counters.h"
#include "protocol/transfer.h"

namespace mpiacc {

namespace {

// One poll takes at most this many messages, so a flood of them cannot hold a blocking
// call inside progress indefinitely; the rest wait for the next round.
constexpr int kMessagesPerPoll = 64;

// The next control message addressed to this rank, received; false when none is there.
bool take_control_message(ControlMessage *msg, int *from) {
    int flag = 0;
    MPI_Message handle = MPI_MESSAGE_NULL;
    MPI_Status st;
    if (PMPI_Improbe(MPI_ANY_SOURCE, kControlTag, context().proto_comm, &flag, &handle, &st) != MPI_SUCCESS || !flag)
        return false;
    if (PMPI_Mrecv(msg, sizeof *msg, MPI_BYTE, &handle, &st) != MPI_SUCCESS) return false;
    *from = st.MPI_SOURCE;
    return true;
}

}  // namespace

void poll_control_messages() {
    Context &ctx = context();
    ControlMessage msg;
    int from = MPI_PROC_NULL;
    for (int k = 0; k < kMessagesPerPoll && take_control_message(&msg, &from); ++k) {
        if (msg.magic != kEnvelopeMagic) continue;
        auto type = static_cast<ControlType>(msg.type);
        if (type == ControlType::ABORT) {
            auto it = ctx.receivers.find({from, msg.transfer_id});
            if (it != ctx.receivers.end()) it->second->on_abort(msg);
        } else {
            auto it = ctx.senders.find(msg.transfer_id);
            if (it != ctx.senders.end())
                it->second->on_control(msg);
            else
                MPIACC_COUNT("protocol.control.orphan");
        }
    }
}

void drain_control_messages() {
    ControlMessage msg;
    int from = MPI_PROC_NULL;
    while (take_control_message(&msg, &from)) MPIACC_COUNT("protocol.control.orphan");
}

}  // namespace mpiacc
