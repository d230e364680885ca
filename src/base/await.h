// Await: blocks the calling thread on an asynchronous call, for the callers
// that are synchronous by nature (start-up and reloads, the CLI, the
// simulator, tests). Never on an event loop or a store thread: the call's
// callback may need that very thread to run.
//
//   Result<Plan> p = Await<Result<Plan>>([&](auto done) { store.Update(id, f, done); });
//
// `call` receives a callable that takes the result; it must be called
// exactly once. A second call stops the process (an assert, kept in
// Release builds); the state is shared with the callable, so even a call
// after Await returned touches nothing freed.
#pragma once

#include <atomic>
#include <cassert>
#include <future>
#include <memory>
#include <utility>

namespace hotrow {

template <typename R, typename Call>
R Await(Call&& call) {
  struct State {
    std::promise<R> promise;
    std::atomic<bool> called{false};
  };
  auto state = std::make_shared<State>();
  auto result = state->promise.get_future();
  std::forward<Call>(call)([state](R r) {
    bool twice = state->called.exchange(true);
    assert(!twice && "an Await callback was called twice");
    if (!twice) state->promise.set_value(std::move(r));
  });
  return result.get();
}

}  // namespace hotrow
