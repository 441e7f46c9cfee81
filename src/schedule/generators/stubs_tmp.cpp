// TEMPORARY placeholders until the generators land.
#include "generator_util.h"
namespace dualpipe {
Schedule make_interleaved_1f1b(const ScheduleOptions&) { throw InvalidArgument("interleaved-1f1b: not yet implemented"); }
Schedule make_zbv(const ScheduleOptions&) { throw InvalidArgument("zbv: not yet implemented"); }
Schedule make_chimera(const ScheduleOptions&) { throw InvalidArgument("chimera: not yet implemented"); }
}
