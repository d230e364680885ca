// The leaderboard service: the rules for boards, seasons, scores and pages,
// and the read model, over one store (store.h).
//
// Boards: a registry of every board (id -> settings and schedule epoch),
// loaded at start-up and kept by every write the service makes; other
// instances' board changes arrive through Follow (a "board" change: read
// that board again), or OnBoardChange on Redis. `default` exists from the
// start and cannot be deleted; the legacy routes use it.
//
// Seasons (season.h): each instance computes a board's current season from
// its clock; there is no reset job. A score belongs to the season the store
// of record applies it in (store.h, ScorePost). The registry keeps, per
// board, the season it last saw current and its Board; a request that finds
// the clock past that season's end moves the board to the new season, with
// an empty Board. Archived seasons (kept for keepSeasons) are read from the
// store on demand and cached (kArchivedBoardsMax).
//
// Read model: on SQLite and PostgreSQL the service keeps a Board (board.h)
// per board's current season, loaded from the store at start-up and changed
// after each commit, before the caller is answered, so every later read sees
// the change; other instances' changes arrive through Follow. On Redis the
// store ranks for every instance (SharedRanking) and the service asks it.
//
// Thread safety: the registry is behind a writer-preferring RwLock; a
// board's state is immutable and shared (shared_ptr) with the requests that
// use it, so a delete, a season change or a reload never pulls it from under
// them. Callbacks run inline (a read from a Board) or on a store thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/domain.h"
#include "base/rw_lock.h"
#include "leaderboard/board.h"
#include "leaderboard/rate_limit.h"
#include "leaderboard/season.h"
#include "leaderboard/store.h"
#include "ops/metrics.h"

namespace hotrow::leaderboard {

// A board as the API shows it: its settings and its current season.
struct BoardView {
  BoardInfo info;
  int64_t season = kFirstSeason;
  int64_t season_started_us = 0;
  std::optional<int64_t> next_reset_us;  // none when the board does not reset
  // An hmac board's secret, in the answer that made it only (a create, a
  // rotation, or a PATCH that switched the board to hmac): never logged.
  std::optional<std::string> secret = std::nullopt;
};

struct BoardList {
  std::vector<BoardView> boards;  // by id
  int64_t total = 0;
};

// The settings PATCH may change on a live board (a field left empty is kept).
struct BoardPatch {
  std::optional<Reset> reset = std::nullopt;
  std::optional<int64_t> reset_every_s = std::nullopt;  // with --test-hooks: instead of reset
  std::optional<std::string> reset_timezone = std::nullopt;
  std::optional<int64_t> keep_seasons = std::nullopt;
  std::optional<BoardAuth> auth = std::nullopt;
};

struct SeasonInfo {
  int64_t season = kFirstSeason;
  int64_t started_us = 0;
  std::optional<int64_t> ended_us;
};

// The friends view: the ranked entries of the ids that have a score, and
// the ids that have none (in the order asked).
struct RanksView {
  std::vector<Entry> entries;
  std::vector<std::string> missing;
};

// What a score post may carry besides the score.
struct PostExtras {
  std::string idempotency_key = {};  // empty: none; else as ValidateIdempotencyKey
  // Given: replaces the stored one, even when the score stays (model.h,
  // Profile); none: the stored one is kept. `metadata` is a JSON object's
  // text as sent, checked by the caller (http::JsonObject::RawObject); the
  // service checks its size.
  std::optional<std::string> display_name = std::nullopt;
  std::optional<std::string> metadata = std::nullopt;
  // A signed post's signature (CheckSignature), kept with the score so
  // that the same signed request twice is one post.
  std::string signature = {};
};

struct LeaderboardOptions {
  // "reset":{"everySeconds":N} boards (serve --test-hooks): tests cannot
  // wait for midnight.
  bool test_hooks = false;
  // Score posts per ClientId per board on this instance (--score-rate).
  ScoreRate score_rate = {};
  // The key boards' HMAC secrets are sealed with (--secrets-key-file,
  // kSealKeyBytes); empty: no board may use auth hmac.
  std::string secrets_key = {};
};

// Archived seasons' Boards kept in memory at once (least recently read
// first out).
inline constexpr size_t kArchivedBoardsMax = 16;
// Archived seasons read from the store at once for reads.
inline constexpr int kArchiveLoadsMax = 4;

class LeaderboardService final : public DomainService {
 public:
  explicit LeaderboardService(LeaderboardStore& store, LeaderboardOptions options = {});
  ~LeaderboardService() override;

  // DomainService: the boards and their Boards from the store (no Boards on
  // a SharedRanking store).
  std::string_view name() const override { return "leaderboard"; }
  Status Load() override;
  size_t entries() const override;
  const char* channel() const override { return store_.channel(); }
  Status Follow(std::string_view notification) override;
  void Stop() override { store_.Stop(); }

  // Boards. `board.id` as ValidateBoardId, keep_seasons 1-kKeepSeasonsMax,
  // reset_timezone an IANA name; already_exists for a taken id.
  void CreateBoard(BoardInfo board, std::function<void(Result<BoardView>)> done);
  // A changed schedule takes effect at the current schedule's next boundary.
  void UpdateBoard(const std::string& board_id, BoardPatch patch, std::function<void(Result<BoardView>)> done);
  // conflict for `default`; not_found for an unknown board.
  void DeleteBoard(const std::string& board_id, std::function<void(Status)> done);
  Result<BoardView> GetBoard(const std::string& board_id) const;
  // A new secret for an hmac board (its view carries it); the one before
  // stays accepted for `grace_s` seconds (0-kSecretGraceSecondsMax).
  // conflict unless the board is hmac and --secrets-key-file was given.
  void RotateSecret(const std::string& board_id, int64_t grace_s, std::function<void(Result<BoardView>)> done);
  // For a post to `board_id`: "" when the board takes unsigned posts (or
  // does not exist: the post says so), the signature (lower-case hex) when
  // it is an hmac board and `r` is signed by its secret (or the one before
  // a rotation, within its grace); bad_signature otherwise (counted).
  Result<std::string> CheckSignature(const std::string& board_id, const SignedRequest& r);
  // offset >= 0, limit 1-kBoardsPageLimitMax.
  Result<BoardList> ListBoards(int64_t offset, int64_t limit) const;
  // The kept seasons, oldest first, the current one last.
  Result<std::vector<SeasonInfo>> Seasons(const std::string& board_id) const;

  // Scores. client_id as ValidateClientId; |score| <= kScoreAbsMax. The
  // board's operator, or `op` when given (the legacy route's ?mode). `done`
  // gets the score stored after the request, its rank and its season.
  void PostScore(const std::string& board_id, const std::string& client_id, int64_t score, std::optional<Operator> op,
                 std::function<void(Result<Posted>)> done) {
    PostScore(board_id, client_id, score, op, PostExtras{}, std::move(done));
  }
  // With an Idempotency-Key (store.h, ScorePost): a retry gets the kept
  // answer (score, season), `replayed`, with the rank that answer's entry
  // has now; the same key with another score or operator is
  // idempotency_mismatch.
  void PostScore(const std::string& board_id, const std::string& client_id, int64_t score, std::optional<Operator> op,
                 PostExtras extras, std::function<void(Result<Posted>)> done);
  // Removes the player from the current season; not_found when it has no
  // score there.
  void Remove(const std::string& board_id, const std::string& client_id, std::function<void(Status)> done);
  // The season a read of `season` (none: the current one) gets: not_found
  // for an unknown board or a season it does not keep.
  Result<int64_t> ReadSeason(const std::string& board_id, std::optional<int64_t> season);
  // Reads of the current season, or of a kept archived one (ReadSeason).
  // An archived season not in memory is read from the store on a thread of
  // its own (at most kArchiveLoadsMax at once: unavailable beyond) and kept
  // (kArchivedBoardsMax). offset >= 0, limit 1-kPageLimitMax.
  void Top(const std::string& board_id, std::optional<int64_t> season, int64_t offset, int64_t limit,
           Callback<Result<Page>> done);
  // around 0-kAroundMax; not_found for an unknown player.
  void Player(const std::string& board_id, std::optional<int64_t> season, std::string client_id,
              std::optional<int64_t> around, std::function<void(Result<PlayerView>)> done);
  // 1-kRanksIdsMax distinct valid ids (invalid_field `clientIds` otherwise).
  void Ranks(const std::string& board_id, std::optional<int64_t> season, std::vector<std::string> client_ids,
             std::function<void(Result<RanksView>)> done);

  // --score-rate: nullopt when a post of `client_id` to `board_id` may go
  // on now (or the ids are invalid: PostScore refuses those), else the
  // whole seconds until it may (429, Retry-After). Counts the refusal.
  std::optional<int64_t> RateLimit(std::string_view board_id, std::string_view client_id);

  // The legacy routes: `default`, whose Board object the service keeps as
  // long as `default` is in one season (it never resets unless PATCHed).
  void PostScore(const std::string& client_id, int64_t score, ScoreMode mode, std::function<void(Result<Posted>)> done,
                 PostExtras extras = {}) {
    PostScore(std::string(kDefaultBoard), client_id, score,
              mode == ScoreMode::kBest ? Operator::kBest : Operator::kReplace, std::move(extras), std::move(done));
  }
  void Remove(const std::string& client_id, std::function<void(Status)> done) {
    Remove(std::string(kDefaultBoard), client_id, std::move(done));
  }
  void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done);
  void Player(std::string client_id, std::optional<int64_t> around, std::function<void(Result<PlayerView>)> done);

  // Board convenience for tests and tools: the current season.
  void Top(const std::string& board_id, int64_t offset, int64_t limit, Callback<Result<Page>> done) {
    Top(board_id, std::nullopt, offset, limit, std::move(done));
  }
  void Player(const std::string& board_id, std::string client_id, std::optional<int64_t> around,
              std::function<void(Result<PlayerView>)> done) {
    Player(board_id, std::nullopt, std::move(client_id), around, std::move(done));
  }
  void Ranks(const std::string& board_id, std::vector<std::string> client_ids,
             std::function<void(Result<RanksView>)> done) {
    Ranks(board_id, std::nullopt, std::move(client_ids), std::move(done));
  }

 private:
  // Immutable once made: a change of settings or of season makes a new
  // State (the same Boards while the season stays).
  struct State {
    BoardInfo info;
    int64_t season = kFirstSeason;  // the season `board` holds
    int64_t season_started_us = 0;
    std::optional<int64_t> season_next_us;  // when the next season begins
    std::shared_ptr<Board> board;           // null on a SharedRanking store
    // The season before (0: none held), kept for late writes to it and for
    // the most read archived season.
    int64_t previous_season = 0;
    std::shared_ptr<Board> previous;
  };
  std::shared_ptr<State> Find(std::string_view board_id) const;
  Result<std::shared_ptr<State>> FindOrNotFound(std::string_view board_id) const;
  // A state holding `season`, with a new Board unless one is given.
  Result<std::shared_ptr<State>> MakeState(BoardInfo info, int64_t season,
                                           std::shared_ptr<Board> board = nullptr) const;
  // `old`'s board with `info`, in `season` (never earlier than old's): the
  // same Boards when the season stays; old's Board becomes `previous` when
  // `season` is the next one.
  Result<std::shared_ptr<State>> Rebase(const State& old, BoardInfo info, int64_t season) const;
  // Replaces boards_[id] (under mutex_, exclusive), keeping the hot path's
  // bounds right.
  void Place(std::shared_ptr<State> state);
  Result<BoardView> ViewOf(const BoardInfo& info) const;
  // The oldest season a board keeps when `current` is current.
  static int64_t OldestKept(const BoardInfo& info, int64_t current) {
    return std::max(kFirstSeason, current - info.settings.keep_seasons);
  }
  Status ValidateSettings(const BoardSettings& settings) const;
  // The state in the season the clock is in now (moved on when it ended).
  Result<std::shared_ptr<State>> Current(std::shared_ptr<State> state);
  // The current state of a board, and the season a read of `season` gets.
  Result<std::pair<std::shared_ptr<State>, int64_t>> ForRead(const std::string& board_id,
                                                             std::optional<int64_t> season);
  // `done` gets the Board of an archived season of `state`: `previous`, a
  // cached one, or one read from the store on a thread of its own
  // (`limited`: unavailable when kArchiveLoadsMax are under way).
  using BoardCallback = InlineFunction<void(Result<std::shared_ptr<Board>>), 256>;
  void Archived(const std::shared_ptr<State>& state, int64_t season, bool limited, BoardCallback done);
  // Deletes, in the store, the board's seasons past keepSeasons (after it
  // moved to a new season, or its keepSeasons changed).
  void PurgeOld(const State& state);
  // Runs `work` on a thread of its own, unless `limit` > 0 of them run
  // already (or no thread can start): then false.
  bool OffThread(int limit, std::function<void()> work);
  // Reads from the store the profiles of `entries` marked profile_unread
  // (players outside the Board's top), fills them in, and hands them to
  // `board`, which keeps those of its top. Inline when none is unread.
  void FillProfiles(const std::shared_ptr<Board>& board, const std::string& board_id, int64_t season,
                    std::vector<Entry> entries, std::function<void(Result<std::vector<Entry>>)> done);
  // A Board's reads with their profiles filled in. Reads of its top share
  // one store read at a time (top_reads_: the reads waiting for it).
  void ReadTop(const std::shared_ptr<Board>& board, const std::string& board_id, int64_t season, int64_t offset,
               int64_t limit, Callback<Result<Page>> done);
  // A store read whose callback uses the service (work_): the destructor
  // waits until none is under way. ThreadDone: an OffThread thread ended.
  void BeginWork();
  void EndWork();
  void ThreadDone();
  void ReadPlayer(const std::shared_ptr<Board>& board, const std::string& board_id, int64_t season,
                  const std::string& client_id, std::optional<int64_t> around,
                  std::function<void(Result<PlayerView>)> done);
  // A cached archived Board, or null.
  std::shared_ptr<Board> CachedArchive(const std::string& board_id, int64_t created_us, int64_t season);
  // Reads the board again (another instance created, changed or deleted it).
  Status ApplyBoardChange(const std::string& board_id);
  // One load; false when a board change landed meanwhile (read again).
  Result<bool> LoadOnce(uint64_t changes);
  // The board's state if it is that incarnation (creation time).
  std::shared_ptr<State> StateOf(const std::string& board_id, int64_t created_us) const;
  // The Board a change of (board incarnation, season) belongs to: the
  // current season's (moving on when the change is in a later one), the
  // previous one's, or a cached archived one; made here when this instance
  // has not heard of that incarnation yet. Null when the board is gone
  // since, or the season is archived and not in memory (then a load of it
  // that overlapped this write is not kept).
  std::shared_ptr<Board> BoardFor(const std::string& board_id, int64_t created_us, int64_t season, Order order,
                                  Ranking ranking);
  void PostOnce(const std::string& board_id, const std::string& client_id, int64_t score, std::optional<Operator> op,
                const PostExtras& extras, int64_t at_us, int tries, std::function<void(Result<Posted>)> done);

  LeaderboardStore& store_;
  const LeaderboardOptions options_;
  ScoreRateLimiter limiter_;
  metrics::Counter* const rate_limited_;     // hotrow_leaderboard_scores_rate_limited_total
  metrics::Counter* const bad_signatures_;   // hotrow_leaderboard_signature_refusals_total
  metrics::Counter* const season_switches_;  // hotrow_leaderboard_season_switches_total
  metrics::Counter* const profile_reads_;    // hotrow_leaderboard_profile_reads_total
  // A fresh secret for `info`, sealed into it; the plain one returned.
  Result<std::string> NewSecret(BoardInfo& info) const;
  SharedRanking* const ranking_;  // the store's, or nullptr: then each State's Board answers
  mutable RwLock mutex_;
  std::map<std::string, std::shared_ptr<State>, std::less<>> boards_;
  std::atomic<uint64_t> changes_{0};  // bumped by every change of boards_ (Load's check)
  // The last deleted incarnation (creation time) of each board id this
  // instance saw go: a late change of it must not bring it back.
  std::map<std::string, int64_t, std::less<>> deleted_;
  // `default`'s first Board, which the legacy routes' hot reads use without
  // the lock or a season computation while the clock is before
  // default_until_us_ (0 once `default` moved to another season: then the
  // registry answers them too).
  const std::shared_ptr<Board> default_board_;
  int64_t default_season_ = 0;  // the season default_board_ holds; 0: not placed yet (under mutex_)
  std::atomic<int64_t> default_until_us_{0};
  // Archived seasons' Boards: (board, creation time, season), least
  // recently read first; archive_changes_ counts late writes to archived
  // seasons (a load that overlapped one is not kept).
  using ArchiveKey = std::tuple<std::string, int64_t, int64_t>;
  std::mutex archive_mutex_;
  std::list<std::pair<ArchiveKey, std::shared_ptr<Board>>> archive_;
  uint64_t archive_changes_ = 0;
  std::mutex top_reads_mutex_;
  std::map<const Board*, std::vector<std::function<void(const Status&)>>> top_reads_;
  // Threads of OffThread (threads_, which kArchiveLoadsMax limits) and
  // store reads of ReadTop (work_) under way: the destructor waits for
  // both. Under archive_mutex_.
  std::condition_variable threads_idle_;
  int threads_ = 0;
  int work_ = 0;
};

}  // namespace hotrow::leaderboard
