// Where boards and scores are kept for good: the embedded SQLite tables, the
// PostgreSQL tables shared by every instance, or Redis sorted sets shared by
// every instance. Persistence only; the rules and the read model (a Board per
// board) are the service's (service.h).
//
// Lifecycle, the same for every store of every domain (cmd/serve.cc):
//   Open      a static factory per backend: connects, migrates the schema
//             (the board `default` exists from the first migration on);
//   Load      every board, and every stored player of every board's current
//             season, for the service's Boards;
//   Follow    one change another instance made, as the store's change feed
//             reports it (PostgreSQL NOTIFY on channel()), parsed here, next
//             to the statement that sends it;
//   Stop      answers or fails every request the store holds and stops its
//             threads (at shutdown, while the event loops still run).
//
// Writes: `done` runs exactly once, after the change is durable (SQLite or
// PostgreSQL commit, or Redis with appendfsync always) or has failed. A write
// to a board checks, in its own transaction (or script), that the board
// exists: a post that races a delete is not_found, never an orphan score.
//
// Redis ranks for every instance itself (ZREVRANK on a board's sorted set),
// so it has no players to load: it answers reads through SharedRanking, and
// the service keeps no Board beside it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/inline_function.h"
#include "leaderboard/model.h"

namespace hotrow::leaderboard {

// The season a board begins in.
inline constexpr int64_t kFirstSeason = 1;

// A season's first instant, as a board's history records it.
struct RecordedSeason {
  int64_t season = kFirstSeason;
  int64_t started_us = 0;
};

// A post. The store of record decides it with the board's settings as it
// stores them (not as an instance remembers them: the board may have been
// deleted and made again with others), unless `op` overrides the operator
// (the legacy route's ?mode).
//
// Seasons: a score belongs to the season containing the time at which the
// store of record applies it. The SQLite writer computes it from its own
// clock and the board's schedule; PostgreSQL and Redis are given the season
// the posting instance's clock chose with its bounds [start, next), check
// them against their own clock (clock_timestamp() after the row locks,
// TIME in the script), and answer `moved_at_us` when it falls outside:
// nothing written, post again for the season at that time. They also
// compare `schedule` (ScheduleFingerprint) with the board's as stored, and
// answer `stale_schedule` when the instance computed the season with
// another (it missed a PATCH): nothing written, read the board again. The
// first season's start is given as 0 (a clock a little behind the
// creating instance's is still in it).
//
// Idempotency-Key: with `idempotency_key`, the store of record keeps
// (board incarnation, client, key) -> `fingerprint` and the answer, in the
// same transaction (or script) as the score, for kIdempotencyKeptUs. A post
// that finds its key answers the kept score, seq and season with
// `replayed` (a SharedRanking store: with the rank the kept entry has now,
// and no seq), writes nothing, and is checked before the season and the
// schedule (a retry after a reset still gets its answer); one with another
// fingerprint is idempotency_mismatch (IdempotencyKeyReused).
struct ScorePost {
  std::string board_id = {};
  std::string client_id = {};
  int64_t score = 0;
  std::optional<Operator> op = std::nullopt;
  int64_t season = kFirstSeason;
  int64_t season_start_us = 0;
  std::optional<int64_t> season_next_us = std::nullopt;
  std::string schedule = {};
  std::string idempotency_key = {};  // empty: none
  std::string fingerprint = {};
  // A signed post's X-Signature (lower-case hex; empty: none), kept as a
  // second key (StoredKeys): a repeated signature replays its answer.
  std::string signature = {};
  // Given: replaces the stored one (even when the score stays); none: kept.
  std::optional<std::string> display_name = std::nullopt;
  std::optional<std::string> metadata = std::nullopt;
};

// The player's stored score after a post: what the operator made of it (an
// equal result changes nothing, so the player keeps their place among equal
// scores).
struct StoredScore {
  int64_t score = 0;
  int64_t seq = 0;       // the order among equal scores (0 from a SharedRanking store)
  bool changed = false;  // whether this post changed the stored score
  int64_t rank = 0;      // 1-based, from a SharedRanking store only
  // The board the post went to, as stored: its creation time (a board made
  // again is another), order and ranking.
  int64_t board_created_us = 0;
  Order board_order = Order::kDesc;
  Ranking board_ranking = Ranking::kUnique;
  int64_t season = kFirstSeason;  // the season it went to
  // Set when the store's clock put the post outside the season given:
  // nothing was written (ScorePost).
  std::optional<int64_t> moved_at_us = std::nullopt;
  bool stale_schedule = false;  // nothing written (ScorePost)
  bool replayed = false;        // an Idempotency-Key's kept answer: nothing written
  // The player's display name and metadata after the post, when it changed
  // them (seq: the post's sequence number).
  std::shared_ptr<const Profile> profile = nullptr;
};

// A change another instance made.
struct ScoreChange {
  enum class Kind {
    kSet,      // a stored score changed
    kErase,    // a player was removed
    kBoard,    // board `board_id` was created, changed or deleted: read it again
    kProfile,  // a player's display name or metadata changed
  };
  Kind kind = Kind::kSet;
  std::string board_id = {};
  int64_t season = kFirstSeason;
  std::string client_id = {};    // kSet and kErase
  int64_t score = 0, seq = 0;    // kSet only
  int64_t board_created_us = 0;  // kSet, kErase and kProfile: the board's creation time (a board made again is another)
  std::shared_ptr<const Profile> profile = nullptr;  // kProfile
};

// Reads answered by a store that ranks for every instance (Redis). `done`
// runs later, on the store's client thread.
class SharedRanking {
 public:
  virtual ~SharedRanking() = default;
  // Entries at 0-based positions [offset, offset + limit), and the total.
  virtual void Top(const BoardInfo& board, int64_t season, int64_t offset, int64_t limit,
                   Callback<Result<Page>> done) = 0;
  // not_found for an unknown player.
  virtual void Player(const BoardInfo& board, int64_t season, std::string client_id, std::optional<int64_t> around,
                      std::function<void(Result<PlayerView>)> done) = 0;
  // The entries of those of `client_ids` that have a score, in rank order.
  virtual void Ranks(const BoardInfo& board, int64_t season, std::vector<std::string> client_ids,
                     std::function<void(Result<std::vector<Entry>>)> done) = 0;
};

class LeaderboardStore {
 public:
  virtual ~LeaderboardStore() = default;

  // Calls board_sink once per board (a board whose settings this release
  // cannot read is left out, with a warning), which answers the lowest
  // season of it whose players are wanted; then (stores that do not rank
  // themselves) sink once per stored player of those seasons.
  virtual Status Load(
      const std::function<int64_t(BoardInfo)>& board_sink,
      const std::function<void(const std::string& board_id, int64_t season, std::string client_id, Stored)>& sink) = 0;
  // Every player of one season of a board (an archived season's read).
  virtual Status LoadSeason(const std::string& board_id, int64_t season,
                            const std::function<void(std::string client_id, Stored)>& sink) {
    (void)board_id, (void)season, (void)sink;
    return Status::Internal("this store ranks for itself");
  }
  // The starts of seasons before the board's schedule epoch, as recorded
  // when its schedule changed (UpdateBoard), by season.
  virtual Result<std::vector<RecordedSeason>> SeasonHistory(const std::string& board_id) = 0;
  // The display names and metadata of those of `client_ids` that have one
  // in `season` of the board, as stored now (a store whose players the
  // service's Boards hold, which keep profiles for their top only).
  // `done` runs inline or on a store thread.
  virtual void ReadProfiles(const std::string& board_id, int64_t season, std::vector<std::string> client_ids,
                            std::function<void(Result<ProfileMap>)> done) {
    (void)board_id, (void)season, (void)client_ids;
    done(Status::Internal("this store ranks for itself"));
  }
  // One board as stored now; not_found when it does not exist.
  virtual Result<BoardInfo> LoadBoard(const std::string& board_id) = 0;
  // The channel whose notifications Follow parses; nullptr when no other
  // instance can change this store.
  virtual const char* channel() const { return nullptr; }
  // Parses one notification of channel() into the change it reports;
  // nullopt for one it cannot read (logged and ignored: any database user
  // may NOTIFY, and a newer release may add kinds). An error means the
  // change could not be applied: the caller reloads.
  virtual Result<std::optional<ScoreChange>> Follow(std::string_view notification) {
    return Status::Internal("this store has no change feed: " + std::string(notification));
  }
  virtual void Stop() {}

  // already_exists when the id is taken.
  virtual void CreateBoard(BoardInfo board, std::function<void(Status)> done) = 0;
  // Stores `board`'s settings and schedule epoch, and records `history`
  // (the starts of its seasons so far, when its schedule changed), if the
  // board is as `expected` (the settings the change was made from: two
  // changes at once must not each undo the other); conflict otherwise;
  // not_found when it does not exist.
  virtual void UpdateBoard(BoardInfo board, BoardInfo expected, std::vector<RecordedSeason> history,
                           std::function<void(Status)> done) = 0;
  // Deletes the board (of that creation time: not one made again since) and
  // every score of it; not_found when it does not exist. (The service
  // refuses `default`.)
  virtual void DeleteBoard(BoardInfo board, std::function<void(Status)> done) = 0;

  // `done` gets what is stored after the commit; not_found for an unknown
  // board; invalid_field `score` when an increment leaves the range.
  virtual void PostScore(ScorePost post, std::function<void(Result<StoredScore>)> done) = 0;
  // not_found when the player has no score (or the board does not exist);
  // `done` gets the board's creation time.
  virtual void Remove(std::string board_id, int64_t season, std::string client_id,
                      std::function<void(Result<int64_t>)> done) = 0;

  // Deletes the seasons through `through_season` of the board (of that
  // creation time), in batches that never hold up posts for long: the
  // seasons past keepSeasons. Idempotent; any instance may run it when it
  // sees a board move to a new season.
  virtual void Purge(std::string board_id, int64_t created_us, int64_t through_season,
                     std::function<void(Status)> done) = 0;

  // Non-null for a store that ranks for every instance itself (Redis).
  virtual SharedRanking* shared_ranking() { return nullptr; }

  // For a store with a change feed of its own (Redis pub/sub): `f` runs, on
  // the store's thread, with the id of each board another instance
  // created, changed or deleted, and with "" when changes may have been
  // missed (the feed reconnected): then every board is read again.
  virtual void OnBoardChange(std::function<void(const std::string& board_id)> f) { (void)f; }
};

// The error every backend answers for a board changed under a PATCH.
inline Status BoardChangedMeanwhile(std::string_view board_id) {
  return Status::Conflict("board '" + std::string(board_id) +
                          "' was changed by another request meanwhile; read it and send the change again");
}

// The keys a post is kept under: its Idempotency-Key, and " sig:" and its
// signature (a space: never in an Idempotency-Key).
inline std::vector<std::string> StoredKeys(const ScorePost& p) {
  std::vector<std::string> keys;
  if (!p.idempotency_key.empty()) keys.push_back(p.idempotency_key);
  if (!p.signature.empty()) keys.push_back(" sig:" + p.signature);
  return keys;
}

// The error every backend answers for an Idempotency-Key sent again with
// another request.
inline Status IdempotencyKeyReused(std::string_view key) {
  return Status(
      ErrorCode::kIdempotencyMismatch,
      "Idempotency-Key '" + std::string(key) +
          "' was used by this player on this board for a post with another score, operator, displayName or metadata",
      "Idempotency-Key");
}

// The error every backend answers for an unknown board.
inline Status NoSuchBoard(std::string_view board_id) {
  return Status::NotFound("no board '" + std::string(board_id) + "'");
}

}  // namespace hotrow::leaderboard
