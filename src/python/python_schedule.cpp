// dualpipe.Action, Placement and Schedule, bound from the schedule IR's structs (schedule/action.h, placement.h,
// schedule.h). Conversion only: the text forms, the lowering, the validation and the export are the library's.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <functional>
#include <string>
#include <vector>

#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/result_json.h"
#include "dualpipe/util/error.h"
#include "json_to_python.h"
#include "python_results.h"

namespace py = pybind11;

namespace dualpipe::python {
namespace {

// -1 in the struct (a field the action's type has not): None in Python.
py::object unless_unset(int value) { return value < 0 ? py::object(py::none()) : py::int_(value); }

void bind_action(py::module_& m) {
  py::class_<Action>(m, "Action",
                     "One step of a rank's schedule. str() is its text form: '0F1', '(0F3;3B5)', '1SEND_F0', "
                     "'3REDUCE_GRAD'.")
      .def_property_readonly("type", [](const Action& a) { return std::string(type_name(a.type)); },
                             "F, B, I, W, OVERLAP_F_B, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD or "
                             "REDUCE_GRAD")
      .def_readonly("stage", &Action::stage, "for an overlapped pair, its forward half's")
      .def_property_readonly("microbatch", [](const Action& a) { return unless_unset(a.microbatch); },
                             "for an overlapped pair, its forward half's; None for a data-parallel action")
      .def_property_readonly("backward_stage", [](const Action& a) { return unless_unset(a.bwd_stage); },
                             "an overlapped pair's backward half's; None otherwise")
      .def_property_readonly("backward_microbatch", [](const Action& a) { return unless_unset(a.bwd_microbatch); },
                             "an overlapped pair's backward half's; None otherwise")
      .def_property_readonly("peer", [](const Action& a) { return unless_unset(a.peer); },
                             "a SEND's or RECV's rank on the other end; None otherwise")
      .def_property_readonly("is_compute", &Action::is_compute)
      .def("__str__", [](const Action& a) { return to_string(a); })
      .def("__repr__", [](const Action& a) { return "<dualpipe.Action " + to_string(a) + ">"; })
      .def(py::self == py::self)
      .def("__hash__", [](const Action& a) { return std::hash<std::string>{}(to_string(a)) ^ std::hash<int>{}(a.peer); });
}

void bind_placement(py::module_& m) {
  py::class_<Placement>(m, "Placement",
                        "Where the stages live: one replica (each stage on one rank), or two (DualPipe, Chimera: "
                        "each micro-batch takes one of two directions).")
      .def_property_readonly("replicas", &Placement::num_replicas)
      .def_property_readonly("rank_of_stage",
                             [](const Placement& p) {
                               std::vector<std::vector<int>> ranks(p.num_replicas());
                               for (int replica = 0; replica < p.num_replicas(); ++replica)
                                 for (int s = 0; s < p.num_stages(); ++s) ranks[replica].push_back(p.rank_of(replica, s));
                               return ranks;
                             },
                             "per replica, the rank of each stage")
      .def_property_readonly("replica_of_microbatch",
                             [](const Placement& p) -> py::object {
                               if (p.num_replicas() == 1) return py::none();
                               py::list replicas;
                               for (int m = 0; m < p.num_microbatches(); ++m) replicas.append(p.replica(m));
                               return std::move(replicas);
                             },
                             "with two replicas, the direction each micro-batch takes; None with one")
      .def("rank",
           [](const Placement& p, int stage, int microbatch) {
             DUALPIPE_REQUIRE(stage >= 0 && stage < p.num_stages(), "stage ", stage, " is not one of the ",
                              p.num_stages(), " stages");
             DUALPIPE_REQUIRE(microbatch >= 0 && (p.num_replicas() == 1 || microbatch < p.num_microbatches()),
                              "micro-batch ", microbatch, " is not one of the placement's ",
                              p.num_replicas() == 1 ? std::string("(from 0)") : std::to_string(p.num_microbatches()));
             return p.rank(stage, microbatch);
           },
           py::arg("stage"), py::arg("microbatch"), "The rank that runs the stage for the micro-batch.")
      .def(py::self == py::self)
      .def("__repr__", [](const Placement& p) {
        return "<dualpipe.Placement " + std::to_string(p.num_stages()) + " stages on " +
               std::to_string(p.num_ranks()) + " ranks, " + std::to_string(p.num_replicas()) + " replica(s)>";
      });
}

// PyTorch's compute actions per rank as (type, stage, micro-batch, backward stage, backward micro-batch); the
// package's dualpipe.pytorch turns them into torch.distributed.pipelining actions.
py::list pytorch_actions(const Schedule& schedule) {
  require_one_rank_per_stage(schedule);
  py::list rows;
  for (const auto& rank_actions : schedule.actions) {
    py::list row;
    for (const Action& a : rank_actions)
      if (a.is_compute())
        row.append(py::make_tuple(std::string(type_name(a.type)), a.stage, a.microbatch, a.bwd_stage,
                                  a.bwd_microbatch));
    rows.append(row);
  }
  return rows;
}

}  // namespace

void bind_schedule(py::module_& m) {
  bind_action(m);
  bind_placement(m);
  py::class_<Schedule> schedule(m, "Schedule",
                                "A pipeline schedule: the ordered actions of every rank and the placement of the "
                                "stages. to_dict() is `dualpipe schedule --format json`.");
  add_json_output(schedule, [](const Schedule& s) { return schedule_json(s); }, "a schedule");
  schedule.def_readonly("kind", &Schedule::kind, "the generator's name, or 'custom' for one read from a file")
      .def_readonly("ranks", &Schedule::num_ranks)
      .def_readonly("stages", &Schedule::num_stages)
      .def_readonly("microbatches", &Schedule::num_microbatches)
      .def_readonly("placement", &Schedule::placement)
      .def_readonly("actions", &Schedule::actions, "per rank, its dualpipe.Action list in execution order")
      .def_static("from_text",
                  [](const std::string& text) {
                    Schedule s = parse_text(text);
                    validate(s);
                    return s;
                  },
                  py::arg("text"), "Reads and validates the text form to_text() writes (`rank 0: 0F0 ...`).")
      .def("to_text", &format_text, "The text form, one line per rank (`dualpipe schedule`).")
      .def("to_csv", &format_pytorch_csv,
           "PyTorch's compute-only CSV form (`dualpipe schedule --format csv`), which dualpipe reads back; "
           "to_pytorch_csv() also refuses what PyTorch's runtime cannot run.")
      .def("to_pytorch_csv",
           [](const Schedule& s) {
             require_one_rank_per_stage(s);
             return format_pytorch_csv(s);
           },
           "The CSV torch.distributed.pipelining's _PipelineScheduleRuntime._load_csv and torchtitan's "
           "pipeline_parallel_schedule_csv load. Raises ValueError for a stage on two ranks (DualPipe, Chimera).")
      .def("to_pytorch",
           [](const Schedule& s) { return py::module_::import("dualpipe.pytorch").attr("actions")(s); },
           "torch.distributed.pipelining's actions, {rank: [_Action, ...]}: F FORWARD, B FULL_BACKWARD, "
           "I BACKWARD_INPUT, W BACKWARD_WEIGHT, a pair OVERLAP_F_B with its two halves. Raises ValueError for a "
           "stage on two ranks (DualPipe, Chimera).")
      .def("_pytorch_actions", &pytorch_actions)
      .def("lower", &lower_communication, "The schedule with the SEND/RECV actions the runtime executes.")
      .def("draw",
           [](const Schedule& s, const std::string& path, const CostModel& costs) {
             const SimulationResult r = simulate_schedule(s, costs);
             draw(r.schedule, r.simulation, r.costs, path);
           },
           py::arg("path"), py::arg("costs") = CostModel{},
           "Writes the simulated timeline to path: .svg, or .html with a tooltip per action (`dualpipe draw`).")
      .def("__len__", &Schedule::num_actions)
      .def("__repr__", [](const Schedule& s) {
        return "<dualpipe.Schedule " + s.kind + ": " + std::to_string(s.num_ranks) + " ranks, " +
               std::to_string(s.num_stages) + " stages, " + std::to_string(s.num_microbatches) + " micro-batches>";
      });
}

}  // namespace dualpipe::python
