// The leaderboard service: the rules for boards, scores and pages, and the
// read model, over one store (store.h).
//
// Boards: a registry of every board (id -> settings), loaded at start-up and
// kept by every write the service makes; other instances' board changes
// arrive through Follow (a "board" change: read that board again). `default`
// exists from the start and cannot be deleted; the legacy routes use it.
//
// Read model: on SQLite and PostgreSQL the service keeps a Board (board.h)
// per board, loaded from the store at start-up and changed after each
// commit, before the caller is answered, so every later read sees the
// change; other instances' changes arrive through Follow. On Redis the store
// ranks for every instance (SharedRanking) and the service asks it.
//
// Seasons: every board is in season 1 until boards that reset on a schedule
// land (their settings are stored and shown, and a reset other than "none"
// is refused for now).
//
// Thread safety: the registry is behind a writer-preferring RwLock; a
// board's state is shared (shared_ptr) with the requests that use it, so a
// delete or a reload never pulls it from under them. Callbacks run inline (a
// read from a Board) or on a store thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/domain.h"
#include "base/rw_lock.h"
#include "leaderboard/board.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

// A board as the API shows it: its settings and its current season.
struct BoardView {
  BoardInfo info;
  int64_t season = kFirstSeason;
  int64_t season_started_us = 0;
  std::optional<int64_t> next_reset_us;  // none while reset is "none"
};

struct BoardList {
  std::vector<BoardView> boards;  // by id
  int64_t total = 0;
};

// The settings PATCH may change on a live board (a field left empty is kept).
struct BoardPatch {
  std::optional<Reset> reset = std::nullopt;
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

class LeaderboardService final : public DomainService {
 public:
  explicit LeaderboardService(LeaderboardStore& store);
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
  void UpdateBoard(const std::string& board_id, BoardPatch patch, std::function<void(Result<BoardView>)> done);
  // conflict for `default`; not_found for an unknown board.
  void DeleteBoard(const std::string& board_id, std::function<void(Status)> done);
  Result<BoardView> GetBoard(const std::string& board_id) const;
  // offset >= 0, limit 1-kBoardsPageLimitMax.
  Result<BoardList> ListBoards(int64_t offset, int64_t limit) const;
  Result<std::vector<SeasonInfo>> Seasons(const std::string& board_id) const;

  // Scores. client_id as ValidateClientId; |score| <= kScoreAbsMax. The
  // board's operator, or `op` when given (the legacy route's ?mode). `done`
  // gets the score stored after the request and its rank.
  void PostScore(const std::string& board_id, const std::string& client_id, int64_t score, std::optional<Operator> op,
                 std::function<void(Result<Posted>)> done);
  // not_found when the player has no score.
  void Remove(const std::string& board_id, const std::string& client_id, std::function<void(Status)> done);
  // offset >= 0, limit 1-kPageLimitMax.
  void Top(const std::string& board_id, int64_t offset, int64_t limit, Callback<Result<Page>> done);
  // around 0-kAroundMax; not_found for an unknown player.
  void Player(const std::string& board_id, std::string client_id, std::optional<int64_t> around,
              std::function<void(Result<PlayerView>)> done);
  // 1-kRanksIdsMax distinct valid ids (invalid_field `clientIds` otherwise).
  void Ranks(const std::string& board_id, std::vector<std::string> client_ids,
             std::function<void(Result<RanksView>)> done);

  // The legacy routes: `default`, whose state is never replaced.
  void PostScore(const std::string& client_id, int64_t score, ScoreMode mode,
                 std::function<void(Result<Posted>)> done) {
    PostScore(std::string(kDefaultBoard), client_id, score,
              mode == ScoreMode::kBest ? Operator::kBest : Operator::kReplace, std::move(done));
  }
  void Remove(const std::string& client_id, std::function<void(Status)> done) {
    Remove(std::string(kDefaultBoard), client_id, std::move(done));
  }
  void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done);
  void Player(std::string client_id, std::optional<int64_t> around, std::function<void(Result<PlayerView>)> done) {
    Player(std::string(kDefaultBoard), std::move(client_id), around, std::move(done));
  }

 private:
  // Immutable once made: a change of settings makes a new State with the
  // same Board.
  struct State {
    BoardInfo info;
    std::shared_ptr<Board> board;  // null on a SharedRanking store
  };
  std::shared_ptr<State> Find(std::string_view board_id) const;
  Result<std::shared_ptr<State>> FindOrNotFound(std::string_view board_id) const;
  std::shared_ptr<State> MakeState(BoardInfo info, std::shared_ptr<Board> board = nullptr) const;
  BoardView ViewOf(const BoardInfo& info) const;
  // Reads the board again (another instance created, changed or deleted it).
  Status ApplyBoardChange(const std::string& board_id);
  // One load; false when a board change landed meanwhile (read again).
  Result<bool> LoadOnce(uint64_t changes);
  // The board's state if it is that incarnation (creation time).
  std::shared_ptr<State> StateOf(const std::string& board_id, int64_t created_us) const;
  // The Board a post's answer belongs to, made here when this instance has
  // not heard of that incarnation yet; null when it is gone since.
  std::shared_ptr<Board> BoardFor(const std::string& board_id, const StoredScore& stored);
  void TopOf(const std::shared_ptr<State>& state, int64_t offset, int64_t limit, Callback<Result<Page>> done);

  LeaderboardStore& store_;
  SharedRanking* const ranking_;  // the store's, or nullptr: then each State's Board answers
  mutable RwLock mutex_;
  std::map<std::string, std::shared_ptr<State>, std::less<>> boards_;
  std::atomic<uint64_t> changes_{0};  // bumped by every change of boards_ (Load's check)
  // `default`'s Board: the same object for the service's life (a reload
  // refills it), so the legacy routes' hot reads take no lock. Its order and
  // ranking never change (desc, unique).
  std::shared_ptr<Board> default_board_;
  const BoardInfo default_info_;
};

}  // namespace hotrow::leaderboard
