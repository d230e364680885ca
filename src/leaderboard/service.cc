#include "leaderboard/service.h"

#include <chrono>
#include <vector>

#include "ops/log.h"

namespace hotrow::leaderboard {

Status LeaderboardService::Load() {
  if (ranking_) return Status::Ok();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, Stored>> players;  // one ReplaceAll: the top is built once
  if (Status s = store_.Load([&](std::string id, Stored st) { players.emplace_back(std::move(id), st); }); !s.ok())
    return s;
  board_.ReplaceAll(players);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("leaderboard: loaded {} player(s) into memory in {} ms", board_.size(), ms);
  return Status::Ok();
}

Status LeaderboardService::Follow(std::string_view notification) {
  auto read = store_.Follow(notification);
  if (!read.ok()) return read.status();
  if (ranking_ || !*read) return Status::Ok();
  const ScoreChange& change = **read;
  if (change.kind == ScoreChange::Kind::kErase)
    board_.Erase(change.client_id);
  else
    board_.SetIfNewer(change.client_id, change.score, change.seq);
  return Status::Ok();
}

void LeaderboardService::PostScore(const std::string& client_id, int64_t score, ScoreMode mode,
                                   std::function<void(Result<Posted>)> done) {
  if (Status s = ValidateClientId(client_id); !s.ok()) return done(s);
  if (score < -kScoreAbsMax || score > kScoreAbsMax)
    return done(Status::OutOfRange("score", -kScoreAbsMax, kScoreAbsMax));
  store_.PostScore(client_id, score, mode, [this, client_id, done = std::move(done)](Result<StoredScore> r) {
    if (!r.ok()) return done(r.status());
    if (ranking_) return done(Posted{Entry{r->rank, client_id, r->score}, r->changed});
    // Changes reach the Board in seq order whatever order the commits
    // answer in; the rank is this request's score's, even when a later post
    // for the same player reached the Board first.
    board_.SetIfNewer(client_id, r->score, r->seq);
    done(Posted{Entry{board_.RankOf(r->score, r->seq), client_id, r->score}, r->changed});
  });
}

void LeaderboardService::Remove(const std::string& client_id, std::function<void(Status)> done) {
  if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
  store_.Remove(client_id, [this, client_id, done = std::move(done)](const Status& s) {
    if (s.ok() && !ranking_) board_.Erase(client_id);
    done(s);
  });
}

void LeaderboardService::Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  if (limit < 1 || limit > kPageLimitMax) return done(Status::OutOfRange("limit", 1, kPageLimitMax));
  if (offset < 0 || offset > kOffsetMax) return done(Status::OutOfRange("offset", 0, kOffsetMax));
  if (ranking_) return ranking_->Top(offset, limit, std::move(done));
  done(board_.Top(offset, limit));
}

void LeaderboardService::Player(std::string client_id, std::optional<int64_t> around,
                                std::function<void(Result<PlayerView>)> done) {
  if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
  if (around && (*around < 0 || *around > kAroundMax)) return done(Status::OutOfRange("around", 0, kAroundMax));
  if (ranking_) return ranking_->Player(std::move(client_id), around, std::move(done));
  auto view = board_.Player(client_id, around);
  if (!view) return done(NoSuchPlayer(client_id));
  done(std::move(*view));
}

}  // namespace hotrow::leaderboard
