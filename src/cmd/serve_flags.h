// serve's flags (AddServe, declared in commands.h) and the checks of the
// ones whose values need more than CLI11's validators.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace hotrow::cmd {

// --redis-replica's values, each of which may list several URLs separated
// by commas (HOTROW_REDIS_REPLICA): a piece joins the URL before it only
// inside that URL's password (no '@' yet, and an '@' further on), so a
// comma in a password stays in it; each URL trimmed and checked, and none
// the master's (`master`, --redis) own address.
Result<std::vector<std::string>> ReplicaUrls(const std::vector<std::string>& values, const std::string& master = "");

}  // namespace hotrow::cmd
