// Issue 3, item 6: every schedule kind, R in {2, 4}, ranks as threads; losses and forward-only outputs
// bit-identical to a single-process run, gradients within cosine distance 1e-13.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "dualpipe/schedule/generators.h"
#include "runtime/support/kind_cases.h"
#include "runtime/support/reference_model.h"
#include "runtime/support/thread_ranks.h"

namespace dualpipe::testing {
namespace {

class ReferenceCheck : public ::testing::TestWithParam<KindCase> {};

void check(const KindCase& c, bool training, bool declare_shapes) {
  const Schedule schedule = make_case_schedule(c.kind, c.ranks);
  at::set_num_threads(1);
  ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 1234);
  ReferenceResult reference = run_reference(setup, training);
  auto problems = run_ranks(c.ranks, [&](std::shared_ptr<comm::Communicator> comm) {
    return run_and_check_rank(setup, reference, schedule, comm, training, declare_shapes);
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
}

TEST_P(ReferenceCheck, TrainingStepMatchesSingleProcess) { check(GetParam(), true, true); }
TEST_P(ReferenceCheck, ForwardOnlyMatchesSingleProcess) { check(GetParam(), false, true); }
TEST_P(ReferenceCheck, ShapesExchangedAtRunTime) { check(GetParam(), true, false); }

INSTANTIATE_TEST_SUITE_P(AllKinds, ReferenceCheck, ::testing::ValuesIn(all_kind_cases()), case_name);

}  // namespace
}  // namespace dualpipe::testing
