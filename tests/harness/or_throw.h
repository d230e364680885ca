// Fixtures set a backend up or throw: gtest turns the exception into a
// failed test that names the reason.
#pragma once

#include <stdexcept>
#include <utility>

#include "base/status.h"

namespace hotrow::testing {

template <typename T>
T OrThrow(Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return std::move(r).value();
}

inline void OrThrow(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.ToString());
}

}  // namespace hotrow::testing
