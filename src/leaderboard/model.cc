#include "leaderboard/model.h"

#include <algorithm>

namespace hotrow::leaderboard {

int64_t DemoScore(std::mt19937_64& rng) {
  std::normal_distribution<double> dist(5000, 1500);
  return static_cast<int64_t>(std::max(0.0, dist(rng)));
}

Status ValidateClientId(std::string_view id, const char* field) {
  auto bad = [field] {
    return Status::InvalidField(field, std::string(field) + " must be 1-" + std::to_string(kClientIdLengthMax) +
                                           " characters of A-Z a-z 0-9 _ . : -");
  };
  if (id.empty() || id.size() > kClientIdLengthMax) return bad();
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '-';
    if (!ok) return bad();
  }
  return Status::Ok();
}

}  // namespace hotrow::leaderboard
