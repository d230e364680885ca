// Admin credentials. The token is held only as a SHA-256 digest and compared
// in constant time.
#pragma once

#include <atomic>
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

// A credential that names itself, "<id>.<secret>" with an id of
// kCredentialIdLength lowercase hex digits and a secret of
// kCredentialSecretLength (a point-card store key): its id, or nullopt for
// any other shape.
inline constexpr size_t kCredentialIdLength = 16;
inline constexpr size_t kCredentialSecretLength = 64;
std::optional<std::string_view> NamedCredentialId(std::string_view bearer);
// True when `id` has the shape of such an id.
bool IsCredentialId(std::string_view id);

// Throttles guessing, for every route that checks an Authorization header
// (the HTTP layer counts its 401 and 403 answers and names the client:
// http::AuthThrottleClient). A client whose credentials failed its limit
// within `window` of its first failure is refused until that window ends.
// The limit is `max_failures`, or kStoreKeyFactor times that for a client
// named with kStoreKeySuffix (the failures of store keys from one address,
// counted apart: guessing a 256-bit secret gains nothing from more tries,
// and a till whose key was revoked should not shut out the admin behind the
// same address). Fixed windows; expired windows are forgotten once a
// minute, and at most kClientsMax clients are tracked (past that a new
// client goes untracked until the next sweep), so the table never grows
// without bound.
class AuthFailureThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kClientsMax = 65536;
  static constexpr int64_t kStoreKeyFactor = 10;
  static constexpr std::string_view kStoreKeySuffix = "#keys";
  // max_failures 0: never throttles.
  AuthFailureThrottle(int64_t max_failures, Clock::duration window) : max_(max_failures), window_(window) {}

  // No client is tracked: nothing to look up (no lock, no allocation).
  bool idle() const { return max_ <= 0 || tracked_.load(std::memory_order_relaxed) == 0; }
  // Whole seconds (at least 1) until `client` may try again; 0 when it may now.
  int64_t RetryAfterSeconds(std::string_view client, Clock::time_point now = Clock::now());
  // Counts a failure; true when it is the one that makes `client` refused.
  bool Failed(std::string_view client, Clock::time_point now = Clock::now());
  int64_t LimitOf(std::string_view client) const {
    return client.ends_with(kStoreKeySuffix) ? max_ * kStoreKeyFactor : max_;
  }

 private:
  struct Window {
    Clock::time_point start;
    int64_t failures = 0;
  };
  // Forgets expired windows; mutex_ held.
  void Sweep(Clock::time_point now);
  const int64_t max_;
  const Clock::duration window_;
  std::atomic<size_t> tracked_{0};  // clients_.size(): no lock while nobody failed
  std::mutex mutex_;
  std::unordered_map<std::string, Window> clients_;  // guarded by mutex_
  Clock::time_point last_sweep_{};                   // guarded by mutex_
};

}  // namespace hotrow
