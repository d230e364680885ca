// Blocks on an asynchronous store or service call, for the contract suites:
//   Result<Plan> p = Wait<Result<Plan>>([&](auto done) { s.Update(id, f, done); });
#pragma once

#include <utility>

#include "base/await.h"

namespace hotrow::testing {

template <typename R, typename Call>
R Wait(Call call) {
  return Await<R>(std::move(call));
}

}  // namespace hotrow::testing
