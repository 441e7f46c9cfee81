#include <iostream>
#include "dualpipe/generators.h"
#include "dualpipe/text_format.h"
#include "dualpipe/simulate.h"
#include "dualpipe/validate.h"
int main(int argc, char** argv) {
  auto s = dualpipe::make_schedule(argv[1], {std::atoi(argv[2]), std::atoi(argv[3])});
  std::cout << dualpipe::format_text(s);
  dualpipe::validate(s);
  auto sim = dualpipe::simulate(s, dualpipe::CostModel{});
  std::cout << "makespan " << sim.metrics.makespan << " bubble " << sim.metrics.bubble << " peak " << sim.metrics.peak_activations() << "\n";
}
