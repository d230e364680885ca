// Admin credentials. The token is held only as a SHA-256 digest and compared
// in constant time.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hotrow {

class AdminAuth {
 public:
  // An empty token disables admin actions: they answer 403.
  explicit AdminAuth(std::string_view token, std::string_view what = "admin token");

  bool enabled() const { return !digest_.empty(); }

  // OK when `bearer` is the admin token. Otherwise: forbidden when admin
  // actions are disabled, unauthorized when no token was given, forbidden
  // when it is wrong.
  Status Check(std::optional<std::string_view> bearer) const;

  // True when `bearer` is present and is the admin token.
  bool Matches(std::optional<std::string_view> bearer) const;

 private:
  std::string digest_;
  std::string what_;  // "admin token", "metrics token": named in the refusals
};

}  // namespace hotrow
