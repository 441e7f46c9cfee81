#include "dualpipe/schedule/zero_stage.h"

#include "dualpipe/util/error.h"

namespace dualpipe {

ZeroStage zero_stage(int number, const std::string& option) {
  DUALPIPE_REQUIRE(number >= 0 && number <= 3, option, " must be 0, 1, 2 or 3, got ", number);
  return static_cast<ZeroStage>(number);
}

}  // namespace dualpipe
