#include "leaderboard/model.h"

namespace hotrow::leaderboard {

Status ValidateClientId(std::string_view id) {
  if (id.empty() || id.size() > kClientIdLengthMax)
    return Status::InvalidField("ClientId", "ClientId must be 1-64 characters of A-Z a-z 0-9 _ . : -");
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '-';
    if (!ok) return Status::InvalidField("ClientId", "ClientId must be 1-64 characters of A-Z a-z 0-9 _ . : -");
  }
  return Status::Ok();
}

}  // namespace hotrow::leaderboard
