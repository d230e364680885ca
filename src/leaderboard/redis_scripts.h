// The Lua scripts of the Redis leaderboard store (redis_scripts.cc, where
// each one's KEYS, ARGV and answer are written). Internal to the store.
#pragma once

#include <string_view>

#include "db/redis.h"

namespace hotrow::leaderboard::lua {

extern const std::string_view kBoardsStep;  // step 1 of the key layout (a migration)
extern const db::redis::Script kPostScript;
extern const db::redis::Script kPurgeScript;
extern const db::redis::Script kRemoveScript;
extern const db::redis::Script kBoardScript;
extern const db::redis::Script kTopScript;
extern const db::redis::Script kPlayerScript;
extern const db::redis::Script kRanksScript;
extern const db::redis::Script kClearScript;

}  // namespace hotrow::leaderboard::lua
