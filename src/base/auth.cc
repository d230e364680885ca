#include "base/auth.h"

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

}  // namespace hotrow
