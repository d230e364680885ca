// Await: blocks the calling thread on an asynchronous call, for the callers
// that are synchronous by nature (start-up and reloads, the CLI, the
// simulator, tests). Never on an event loop or a store thread: the call's
// callback may need that very thread to run.
//
//   Result<Plan> p = Await<Result<Plan>>([&](auto done) { store.Update(id, f, done); });
//
// `call` receives a callable that takes the result; it must be called
// exactly once (a second call aborts: std::promise refuses it).
#pragma once

#include <future>
#include <utility>

namespace hotrow {

template <typename R, typename Call>
R Await(Call&& call) {
  std::promise<R> p;
  std::forward<Call>(call)([&p](R r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

}  // namespace hotrow
