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

int64_t AuthFailureThrottle::RetryAfterSeconds(std::string_view client, Clock::time_point now) {
  if (max_ <= 0) return 0;
  std::lock_guard lock(mutex_);
  auto it = clients_.find(std::string(client));
  if (it == clients_.end() || it->second.failures < max_) return 0;
  auto left = it->second.start + window_ - now;
  if (left <= Clock::duration::zero()) return 0;
  return std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(left).count());
}

void AuthFailureThrottle::Failed(std::string_view client, Clock::time_point now) {
  if (max_ <= 0) return;
  std::lock_guard lock(mutex_);
  auto it = clients_.find(std::string(client));
  if (it == clients_.end()) {
    if (clients_.size() >= kClientsMax)
      std::erase_if(clients_, [&](const auto& e) { return e.second.start + window_ <= now; });
    if (clients_.size() >= kClientsMax) return;
    it = clients_.emplace(std::string(client), Window{now, 0}).first;
  } else if (it->second.start + window_ <= now) {
    it->second = Window{now, 0};
  }
  ++it->second.failures;
}

}  // namespace hotrow
