// The bodies of the board routes (POST /api/v1/boards, PATCH
// /api/v1/boards/{board}) parsed into settings: each bad field is a 400
// naming it and its choices.
#pragma once

#include <string_view>

#include "base/status.h"
#include "leaderboard/service.h"

namespace hotrow::leaderboard {

// {"id", "order", "operator", "reset", "resetTimezone", "ranking", "auth",
// "keepSeasons"}: every field but id optional, with the defaults of
// BoardSettings.
Result<BoardInfo> ParseNewBoard(std::string_view text);
// The settings PATCH may change ("reset", "resetTimezone", "keepSeasons",
// "auth"); a field left out stays empty.
Result<BoardPatch> ParsePatch(std::string_view text);

}  // namespace hotrow::leaderboard
