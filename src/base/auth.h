// Admin credentials. The token is held only as a SHA-256 digest and compared
// in constant time.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

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

// Throttles guessing: a client (an address) whose credentials failed
// `max_failures` times within `window` of its first failure is refused
// until that window ends. Fixed windows, at most kClientsMax clients
// tracked (past that, expired ones are forgotten; if none has expired, a new
// client goes untracked: the table never grows without bound).
class AuthFailureThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kClientsMax = 65536;
  // max_failures 0: never throttles.
  AuthFailureThrottle(int64_t max_failures, Clock::duration window) : max_(max_failures), window_(window) {}

  // Whole seconds (at least 1) until `client` may try again; 0 when it may now.
  int64_t RetryAfterSeconds(std::string_view client, Clock::time_point now = Clock::now());
  void Failed(std::string_view client, Clock::time_point now = Clock::now());

 private:
  struct Window {
    Clock::time_point start;
    int64_t failures = 0;
  };
  const int64_t max_;
  const Clock::duration window_;
  std::mutex mutex_;
  std::unordered_map<std::string, Window> clients_;  // guarded by mutex_
};

}  // namespace hotrow
