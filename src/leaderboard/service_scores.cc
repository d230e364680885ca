// LeaderboardService: score posts (the operator, seasons, Idempotency-Key,
// profiles, the rate limit) and removals (service.h).
#include <algorithm>
#include <chrono>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/crypto.h"
#include "base/text.h"
#include "base/time.h"
#include "leaderboard/service.h"
#include "ops/log.h"
#include "ops/metrics.h"

namespace hotrow::leaderboard {

std::optional<int64_t> LeaderboardService::RateLimit(std::string_view board_id, std::string_view client_id) {
  if (!limiter_.enabled()) return std::nullopt;
  if (!ValidateBoardId(board_id, "board").ok() || !ValidateClientId(client_id).ok()) return std::nullopt;
  auto wait = limiter_.Take(board_id, client_id, NowMicros());
  if (wait) rate_limited_->Add();
  return wait;
}

void LeaderboardService::PostScore(const std::string& board_id, const std::string& client_id, int64_t score,
                                   std::optional<Operator> op, PostExtras extras,
                                   std::function<void(Result<Posted>)> done) {
  if (Status s = ValidateBoardId(board_id, "board"); !s.ok()) return done(s);
  if (Status s = ValidateClientId(client_id); !s.ok()) return done(s);
  if (score < -kScoreAbsMax || score > kScoreAbsMax)
    return done(Status::OutOfRange("score", -kScoreAbsMax, kScoreAbsMax));
  if (!extras.idempotency_key.empty())
    if (Status s = ValidateIdempotencyKey(extras.idempotency_key); !s.ok()) return done(s);
  if (extras.display_name)
    if (Status s = ValidateDisplayName(*extras.display_name); !s.ok()) return done(s);
  if (extras.metadata && (extras.metadata->size() > kMetadataBytesMax || extras.metadata->size() < 2 ||
                          extras.metadata->front() != '{' || extras.metadata->back() != '}'))
    return done(Status::InvalidField(
        "metadata", "metadata must be a JSON object of at most " + std::to_string(kMetadataBytesMax) + " bytes"));
  // A few rounds: each is one season boundary crossed between this
  // instance's clock and the store's.
  constexpr int kPostTries = 3;
  PostOnce(board_id, client_id, score, op, extras, 0, kPostTries, std::move(done));
}

void LeaderboardService::PostOnce(const std::string& board_id, const std::string& client_id, int64_t score,
                                  std::optional<Operator> op, const PostExtras& extras, int64_t at_us, int tries,
                                  std::function<void(Result<Posted>)> done) {
  auto found = FindOrNotFound(board_id);
  if (!found.ok()) return done(found.status());
  auto state = Current(std::move(*found));
  if (!state.ok()) return done(state.status());
  ScorePost post{.board_id = board_id,
                 .client_id = client_id,
                 .score = score,
                 .op = op,
                 .season = (*state)->season,
                 .season_start_us = (*state)->season_started_us,
                 .season_next_us = (*state)->season_next_us,
                 .schedule = ScheduleFingerprint((*state)->info)};
  if (!extras.idempotency_key.empty()) {
    // Every field of the request but the key's own scope (board, ClientId).
    post.idempotency_key = extras.idempotency_key;
    // The operator as this instance knows the board's: the legacy route's
    // ?mode=replace and a replace board's own are the same request.
    post.fingerprint = "score=" + std::to_string(score) + " op=" + Name(op.value_or((*state)->info.settings.op));
    // The profile's fields, hashed (1 KiB of metadata need not be kept
    // twice); "-" for one not given.
    if (extras.display_name || extras.metadata)
      post.fingerprint += " profile=" + HexEncode(Sha256((extras.display_name ? "=" + *extras.display_name : "-") +
                                                         "\n" + (extras.metadata ? "=" + *extras.metadata : "-")));
  }
  post.display_name = extras.display_name;
  post.metadata = extras.metadata;
  post.signature = extras.signature;
  if (post.fingerprint.empty() && !post.signature.empty()) post.fingerprint = "signed";  // the signature is the request
  if (at_us != 0) {
    // The store's clock was outside this instance's season: the season at
    // the store's time.
    auto at = SeasonOf(ScheduleOf((*state)->info), at_us);
    if (!at.ok()) return done(at.status());
    post.season = at->season;
    post.season_start_us = at->started_us;
    post.season_next_us = at->next_us;
  }
  // The first season has no lower bound: a store clock a little behind the
  // creating instance's is still in it (there is no season 0).
  if (post.season == kFirstSeasonOfAll) post.season_start_us = 0;
  store_.PostScore(std::move(post), [this, board_id, client_id, score, op, extras, tries,
                                     done = std::move(done)](Result<StoredScore> r) mutable {
    if (!r.ok()) return done(r.status());
    if (r->moved_at_us) {
      // Nothing was written: post again, for the season at the store's time.
      if (tries <= 1)
        return done(
            Status::Unavailable("the board's season kept changing while the score was posted; nothing "
                                "was stored"));
      return PostOnce(board_id, client_id, score, op, extras, *r->moved_at_us, tries - 1, std::move(done));
    }
    if (r->stale_schedule) {
      // This instance missed a change of the board's schedule: read the
      // board again (not on a store thread: the read waits for the store),
      // then post again. Nothing was written.
      if (tries <= 1)
        return done(
            Status::Unavailable("the board's schedule kept changing while the score was posted; nothing "
                                "was stored"));
      auto again = std::make_shared<std::function<void(Result<Posted>)>>(std::move(done));
      bool started = OffThread(0, [this, board_id, client_id, score, op, extras, tries, again] {
        if (Status s = ApplyBoardChange(board_id); !s.ok()) return (*again)(s);
        PostOnce(board_id, client_id, score, op, extras, 0, tries - 1, std::move(*again));
      });
      if (!started) (*again)(Status::Unavailable("the board's schedule changed; nothing was stored; try again"));
      return;
    }
    const int64_t season = r->season;
    const bool replayed = r->replayed;
    auto posted = [&](int64_t rank, int64_t score, bool changed) {
      return Posted{Entry{rank, client_id, score}, changed, season, replayed};
    };
    if (ranking_) return done(posted(r->rank, r->score, r->changed));
    // The Board of the board and season the post went to, as the store
    // says. Changes reach it in seq order whatever order the commits answer
    // in; the rank is this request's score's, even when a later post for
    // the same player reached the Board first. A replay changes nothing,
    // not even which season this instance holds: it ranks the kept entry in
    // a Board held already, or in the season as read (Archived below).
    std::shared_ptr<Board> board;
    if (!replayed) {
      board = BoardFor(board_id, r->board_created_us, season, r->board_order, r->board_ranking);
      if (board) {
        board->SetIfNewer(client_id, r->score, r->seq);
        board->SetProfile(client_id, r->profile);
      }
    } else if (auto held = StateOf(board_id, r->board_created_us)) {
      if (season > held->season)  // the store's clock ahead of this instance's: that season is current
        board = BoardFor(board_id, r->board_created_us, season, r->board_order, r->board_ranking);
      else if (season == held->season)
        board = held->board;
      else if (season == held->previous_season)
        board = held->previous;
      else
        board = CachedArchive(board_id, r->board_created_us, season);
    }
    if (board)
      return done(posted(replayed ? board->RankOfPast(client_id, r->score, r->seq) : board->RankOf(r->score, r->seq),
                         r->score, r->changed));
    auto state = StateOf(board_id, r->board_created_us);
    if (!state) {
      // The board was deleted (and made again) since: the score went with
      // it; its rank is what it was, which this instance no longer holds.
      Board gone(r->board_order, r->board_ranking);
      return done(posted(gone.RankOf(r->score, r->seq), r->score, r->changed));
    }
    // A season that ended while the post was under way, and that this
    // instance does not hold: its rank from the season as stored (after
    // this commit).
    Stored stored{.score = r->score, .seq = r->seq};
    bool changed = r->changed;
    Archived(state, season, /*limited=*/false,
             [client_id, stored, changed, season, replayed, order = r->board_order, ranking = r->board_ranking,
              done = std::move(done)](Result<std::shared_ptr<Board>> b) mutable {
               if (!b.ok()) {
                 // Stored all the same: never a 5xx for a write that landed.
                 log::Warn("leaderboard: the rank of a score posted to an ended season could not be read: {}",
                           b.status().ToString());
                 Board empty(order, ranking);
                 return done(Posted{Entry{empty.RankOf(stored.score, stored.seq), client_id, stored.score}, changed,
                                    season, replayed});
               }
               int64_t rank = replayed ? (*b)->RankOfPast(client_id, stored.score, stored.seq)
                                       : (*b)->RankOf(stored.score, stored.seq);
               done(Posted{Entry{rank, client_id, stored.score}, changed, season, replayed});
             });
  });
}

void LeaderboardService::Remove(const std::string& board_id, const std::string& client_id,
                                std::function<void(Status)> done) {
  auto found = FindOrNotFound(board_id);
  if (!found.ok()) return done(found.status());
  if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
  auto state = Current(std::move(*found));
  if (!state.ok()) return done(state.status());
  const int64_t season = (*state)->season;
  store_.Remove(board_id, season, client_id,
                [this, board_id, client_id, season, done = std::move(done)](Result<int64_t> created) {
                  if (!created.ok()) return done(created.status());
                  if (!ranking_) {
                    auto state = StateOf(board_id, *created);
                    auto board = state ? BoardFor(board_id, *created, season, state->info.settings.order,
                                                  state->info.settings.ranking)
                                       : nullptr;
                    if (board) board->Erase(client_id);
                  }
                  done(Status::Ok());
                });
}

}  // namespace hotrow::leaderboard
