// InlineFunction: a move-only std::function that never allocates.
//
// std::function heap-allocates any callable larger than two pointers or not
// trivially copyable -- which every callback holding a Responder (a
// shared_ptr) is -- so each request on an asynchronous path paid one or two
// allocations just to carry its continuation. InlineFunction stores the
// callable in a fixed buffer inside itself; a callable that does not fit is
// a compile-time error (raise the capacity where it is declared), never a
// hidden allocation.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace hotrow {

template <typename Signature, size_t Capacity = 128>
class InlineFunction;

template <typename R, typename... Args, size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
 public:
  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}  // NOLINT: like std::function

  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, InlineFunction>>>
  InlineFunction(F&& f) {  // NOLINT: implicit, like std::function
    using Fn = std::decay_t<F>;
    static_assert(sizeof(Fn) <= Capacity, "callable too large for this InlineFunction; raise its capacity");
    static_assert(alignof(Fn) <= alignof(std::max_align_t), "over-aligned callable");
    ::new (static_cast<void*>(storage_)) Fn(std::forward<F>(f));
    invoke_ = [](void* s, Args&&... args) -> R { return (*static_cast<Fn*>(s))(std::forward<Args>(args)...); };
    manage_ = [](void* src, void* dst) {
      if (dst) ::new (dst) Fn(std::move(*static_cast<Fn*>(src)));
      static_cast<Fn*>(src)->~Fn();
    };
  }

  InlineFunction(InlineFunction&& other) noexcept { MoveFrom(other); }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      Reset();
      MoveFrom(other);
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { Reset(); }

  // const, like std::function: the callable itself may change its state.
  R operator()(Args... args) const { return invoke_(storage_, std::forward<Args>(args)...); }
  explicit operator bool() const { return invoke_ != nullptr; }

 private:
  void MoveFrom(InlineFunction& other) {
    if (!other.invoke_) return;
    other.manage_(other.storage_, storage_);  // move-construct here, destroy there
    invoke_ = std::exchange(other.invoke_, nullptr);
    manage_ = std::exchange(other.manage_, nullptr);
  }
  void Reset() {
    if (manage_) manage_(storage_, nullptr);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

  alignas(std::max_align_t) mutable unsigned char storage_[Capacity];
  R (*invoke_)(void*, Args&&...) = nullptr;
  void (*manage_)(void* src, void* dst) = nullptr;
};

// A handler's continuation (a Responder, an id, a reused body buffer).
template <typename T>
using Callback = InlineFunction<void(T), 128>;
// A service's continuation wrapped around a handler's.
template <typename T>
using StoreCallback = InlineFunction<void(T), 256>;

}  // namespace hotrow
