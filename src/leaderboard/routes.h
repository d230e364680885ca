// HTTP routes of the leaderboard (the reference's paths):
//   POST   /api/v1/score                  header ClientId, {"score":666}, ?mode=best
//   GET    /api/v1/leaderboard            ?limit=1..100&offset=N
//   GET    /api/v1/leaderboard/{clientId} ?around=0..50
//   DELETE /api/v1/leaderboard/{clientId} admin token
#pragma once

#include "base/auth.h"
#include "http/router.h"
#include "leaderboard/service.h"

namespace hotrow::leaderboard {

void AddRoutes(http::Router& router, LeaderboardService& service, const AdminAuth& admin);

}  // namespace hotrow::leaderboard
