// The communication lowering: derives SEND_F/RECV_F/SEND_B/RECV_B actions from the compute actions and the
// placement. A RECV is placed right before the action that consumes the tensor and a SEND right after the
// action that produces it. With asynchronous sends (the runtime's contract) the lowered schedule cannot
// deadlock when its compute order is valid: every receive waits on a send that an earlier compute action
// in the dependency order issues. Dependencies between stages on the same rank need no message.
#pragma once

#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

// Returns the schedule with communication added. The input must hold compute actions only.
Schedule lower_communication(const Schedule& schedule);

}  // namespace dualpipe
