#include "base/auth.h"

#include <algorithm>

#include "base/crypto.h"

namespace hotrow {

AdminAuth::AdminAuth(std::string_view token, std::string_view what) : what_(what) {
  if (!token.empty()) digest_ = Sha256(token);
}

bool AdminAuth::Matches(std::optional<std::string_view> bearer) const {
  return enabled() && bearer && ConstantTimeEquals(Sha256(*bearer), digest_);
}

Status AdminAuth::Check(std::optional<std::string_view> bearer) const {
  if (!enabled()) return Status::Forbidden("admin actions are disabled: start the server with --admin-token");
  if (!bearer) return Status::Unauthorized("this action needs 'Authorization: Bearer <" + what_ + ">'");
  if (!Matches(bearer)) return Status::Forbidden("the " + what_ + " is wrong");
  return Status::Ok();
}

namespace {

bool LowerHex(std::string_view t) {
  return std::all_of(t.begin(), t.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

bool IsCredentialId(std::string_view id) { return id.size() == kCredentialIdLength && LowerHex(id); }

std::optional<std::string_view> NamedCredentialId(std::string_view bearer) {
  if (bearer.size() != kCredentialIdLength + 1 + kCredentialSecretLength || bearer[kCredentialIdLength] != '.')
    return std::nullopt;
  std::string_view id = bearer.substr(0, kCredentialIdLength);
  if (!IsCredentialId(id) || !LowerHex(bearer.substr(kCredentialIdLength + 1))) return std::nullopt;
  return id;
}

void AuthFailureThrottle::Sweep(Clock::time_point now) {
  last_sweep_ = now;
  std::erase_if(clients_, [&](const auto& e) { return e.second.start + window_ <= now; });
  tracked_.store(clients_.size(), std::memory_order_relaxed);
}

int64_t AuthFailureThrottle::RetryAfterSeconds(std::string_view client, Clock::time_point now) {
  if (idle()) return 0;
  std::lock_guard lock(mutex_);
  if (now - last_sweep_ >= std::chrono::minutes(1)) Sweep(now);
  auto it = clients_.find(std::string(client));
  if (it == clients_.end() || it->second.failures < LimitOf(client)) return 0;
  auto left = it->second.start + window_ - now;
  if (left <= Clock::duration::zero()) return 0;
  return std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(left).count());
}

bool AuthFailureThrottle::Failed(std::string_view client, Clock::time_point now) {
  if (max_ <= 0) return false;
  std::lock_guard lock(mutex_);
  // Once a minute (or when full, at most once a second): so the table
  // empties, and idle() holds again, once failures stop.
  if (now - last_sweep_ >= std::chrono::minutes(1) ||
      (clients_.size() >= kClientsMax && now - last_sweep_ >= std::chrono::seconds(1)))
    Sweep(now);
  auto it = clients_.find(std::string(client));
  if (it == clients_.end()) {
    if (clients_.size() >= kClientsMax) return false;
    it = clients_.emplace(std::string(client), Window{now, 0}).first;
    tracked_.store(clients_.size(), std::memory_order_relaxed);
  } else if (it->second.start + window_ <= now) {
    it->second = Window{now, 0};
  }
  return ++it->second.failures == LimitOf(client);
}

}  // namespace hotrow
