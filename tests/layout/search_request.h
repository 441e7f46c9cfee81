// The layout searches of the layout tests, each written as one request.
#pragma once

#include <string>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/layout.h"

namespace dualpipe::test {

// A search for `model` on the `cluster` preset at `global_batch` sequences a step, held to the values of `fix`
// (--fix's text), ranking the `top` best layouts.
inline layout::LayoutRequest search_request(const layout::ModelSpec& model, const std::string& cluster,
                                            int global_batch, const std::string& fix, int top) {
  layout::LayoutRequest request;
  request.model = model;
  request.cluster = layout::cluster_spec(cluster);
  request.global_batch = global_batch;
  request.fix = layout::LayoutFix::parse(fix);
  request.top = top;
  return request;
}

}  // namespace dualpipe::test
