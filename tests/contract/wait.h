// Blocks on an asynchronous store or service call, for the contract suites:
//   Result<Plan> p = Wait<Result<Plan>>([&](auto done) { s.Update(id, f, done); });
#pragma once

#include <future>
#include <utility>

namespace hotrow::testing {

template <typename R, typename Call>
R Wait(Call call) {
  std::promise<R> p;
  call([&p](R r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

}  // namespace hotrow::testing
