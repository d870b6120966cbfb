// Fault injection for tests (MPIACC_FAULT_* in core/test_knobs.def): a spec names which
// events of which rank fail, so that tests reach the failure paths on purpose.
#pragma once

#include <string>

namespace mpiacc {

// `spec` is "RANK:N[,RANK:N...]"; true when `event`, counted from 1 on this process, is
// the N-th of world rank `rank` in it.
bool fault_planned(const std::string &spec, int rank, long event);

}  // namespace mpiacc
