#include "leaderboard/service.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "base/time.h"
#include "ops/log.h"

namespace hotrow::leaderboard {

namespace {

Status ValidateSettings(const BoardSettings& s) {
  if (s.keep_seasons < 1 || s.keep_seasons > kKeepSeasonsMax)
    return Status::OutOfRange("keepSeasons", 1, kKeepSeasonsMax);
  if (s.reset != Reset::kNone)
    return Status::InvalidField("reset",
                                "boards that reset on a schedule are not built yet; only \"none\" is accepted");
  if (s.reset_timezone != "UTC")
    return Status::InvalidField("resetTimezone", "only \"UTC\" is accepted until boards that reset on a schedule land");
  if (s.auth != BoardAuth::kNone)
    return Status::InvalidField("auth", "signed submissions are not built yet; only \"none\" is accepted");
  return Status::Ok();
}

BoardInfo DefaultBoardInfo() { return BoardInfo{.id = std::string(kDefaultBoard), .settings = {}, .created_us = 0}; }

}  // namespace

LeaderboardService::LeaderboardService(LeaderboardStore& store)
    : store_(store),
      ranking_(store.shared_ranking()),
      default_board_(ranking_ ? nullptr : std::make_shared<Board>()),
      default_info_(DefaultBoardInfo()) {
  boards_.emplace(default_info_.id, MakeState(default_info_, default_board_));
  store_.OnBoardChange([this](const std::string& board_id) {
    // "": the feed reconnected and may have missed changes: every board.
    Status s = board_id.empty() ? Load() : ApplyBoardChange(board_id);
    if (s.ok()) return;
    log::Warn("leaderboard: boards changed on another instance and could not be read ({}); reading them all",
              s.ToString());
    if (Status all = Load(); !all.ok()) log::Error("leaderboard: cannot read the boards: {}", all.ToString());
  });
}

LeaderboardService::~LeaderboardService() { store_.OnBoardChange(nullptr); }

std::shared_ptr<LeaderboardService::State> LeaderboardService::MakeState(BoardInfo info,
                                                                         std::shared_ptr<Board> board) const {
  if (!board && !ranking_)
    board =
        info.id == kDefaultBoard ? default_board_ : std::make_shared<Board>(info.settings.order, info.settings.ranking);
  return std::make_shared<State>(State{std::move(info), std::move(board)});
}

Status LeaderboardService::Load() {
  // A board change applied while the store is read may be older or newer
  // than what the read saw: then read again, so the swap below never drops
  // one (a few tries; changes are rare).
  constexpr int kLoadsMax = 5;
  for (int load = 0; load < kLoadsMax; ++load) {
    uint64_t changes = changes_.load(std::memory_order_acquire);
    auto loaded = LoadOnce(changes);
    if (!loaded.ok() || *loaded) return loaded.status();
  }
  return Status::Unavailable("the boards kept changing while they were read");
}

Result<bool> LeaderboardService::LoadOnce(uint64_t changes) {
  auto start = std::chrono::steady_clock::now();
  std::map<std::string, std::shared_ptr<State>, std::less<>> boards;
  std::unordered_map<std::string, std::vector<std::pair<std::string, Stored>>> players;
  Status s = store_.Load(
      [&](BoardInfo info) {
        std::string id = info.id;
        // The same Board objects across reloads (`default`'s is shared with
        // the legacy routes): refilled once below.
        std::shared_ptr<Board> board;
        if (auto old = Find(id); old && old->info.created_us == info.created_us) board = old->board;
        boards[id] = MakeState(std::move(info), std::move(board));
      },
      [&](const std::string& board_id, std::string client_id, Stored st) {
        players[board_id].emplace_back(std::move(client_id), st);
      });
  if (!s.ok()) return s;
  if (!boards.count(kDefaultBoard)) return Status::Internal("the store holds no board 'default'");
  int64_t total = 0;
  for (auto& [id, state] : boards) {
    if (!state->board) continue;
    auto it = players.find(id);
    state->board->ReplaceAll(it == players.end() ? std::vector<std::pair<std::string, Stored>>{} : it->second);
    total += state->board->size();
  }
  size_t count = boards.size();
  {
    std::unique_lock lock(mutex_);
    if (changes_.load(std::memory_order_acquire) != changes) return false;
    boards_ = std::move(boards);
    changes_.fetch_add(1, std::memory_order_acq_rel);
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("leaderboard: loaded {} board(s) and {} player(s) into memory in {} ms", count, total, ms);
  return true;
}

size_t LeaderboardService::entries() const {
  std::shared_lock lock(mutex_);
  size_t n = 0;
  for (const auto& [id, state] : boards_) n += state->board ? static_cast<size_t>(state->board->size()) : 0;
  return n;
}

std::shared_ptr<LeaderboardService::State> LeaderboardService::Find(std::string_view board_id) const {
  std::shared_lock lock(mutex_);
  auto it = boards_.find(board_id);
  return it == boards_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<LeaderboardService::State>> LeaderboardService::FindOrNotFound(std::string_view board_id) const {
  if (Status s = ValidateBoardId(board_id, "board"); !s.ok()) return s;
  auto state = Find(board_id);
  if (!state) return NoSuchBoard(board_id);
  return state;
}

Status LeaderboardService::Follow(std::string_view notification) {
  auto read = store_.Follow(notification);
  if (!read.ok()) return read.status();
  if (!*read) return Status::Ok();
  const ScoreChange& change = **read;
  if (change.kind == ScoreChange::Kind::kBoard) return ApplyBoardChange(change.board_id);
  if (ranking_) return Status::Ok();
  auto state = StateOf(change.board_id, change.board_created_us);
  if (!state) {
    // A change of a board deleted since (a late message), or of one this
    // instance has not heard of: its "board" notification came first, so
    // that board is read, and changes of another incarnation are dropped.
    log::Debug("leaderboard: a change of board '{}' made at {} that this instance does not hold", change.board_id,
               change.board_created_us);
    return Status::Ok();
  }
  if (change.kind == ScoreChange::Kind::kErase)
    state->board->Erase(change.client_id);
  else
    state->board->SetIfNewer(change.client_id, change.score, change.seq);
  return Status::Ok();
}

std::shared_ptr<LeaderboardService::State> LeaderboardService::StateOf(const std::string& board_id,
                                                                       int64_t created_us) const {
  auto state = Find(board_id);
  return state && state->info.created_us == created_us ? state : nullptr;
}

std::shared_ptr<Board> LeaderboardService::BoardFor(const std::string& board_id, const StoredScore& stored) {
  std::unique_lock lock(mutex_);
  auto it = boards_.find(board_id);
  if (it != boards_.end() && it->second->info.created_us == stored.board_created_us) return it->second->board;
  if (it != boards_.end() && it->second->info.created_us > stored.board_created_us) return nullptr;  // gone since
  // A board made again on another instance, whose notification has not
  // reached this one yet: its Board starts here (the notification then
  // fills in the rest of its settings, and the changes after it follow).
  BoardInfo info{.id = board_id,
                 .settings = {.order = stored.board_order, .ranking = stored.board_ranking},
                 .created_us = stored.board_created_us};
  auto state = MakeState(std::move(info));
  boards_[board_id] = state;
  changes_.fetch_add(1, std::memory_order_acq_rel);
  return state->board;
}

Status LeaderboardService::ApplyBoardChange(const std::string& board_id) {
  // The store's board, applied unless this instance changed its entry while
  // it was read (a create or delete of its own that answered meanwhile, and
  // that the read may predate): then read again.
  constexpr int kReadsMax = 5;
  for (int read = 0; read < kReadsMax; ++read) {
    std::shared_ptr<State> before = Find(board_id);
    auto info = store_.LoadBoard(board_id);
    std::unique_lock lock(mutex_);
    auto it = boards_.find(board_id);
    if ((it == boards_.end() ? nullptr : it->second) != before) continue;
    changes_.fetch_add(1, std::memory_order_acq_rel);
    if (!info.ok()) {
      if (info.status().code() != ErrorCode::kNotFound) return info.status();
      if (it != boards_.end() && board_id != kDefaultBoard) boards_.erase(it);
      return Status::Ok();
    }
    // Order and ranking never change on a live board: one of another
    // creation time is a new board of the same id (deleted and made again).
    bool same = it != boards_.end() && it->second->info.created_us == info->created_us;
    boards_[board_id] = MakeState(std::move(*info), same ? it->second->board : nullptr);
    return Status::Ok();
  }
  return Status::Unavailable("board '" + board_id + "' kept changing while it was read");
}

BoardView LeaderboardService::ViewOf(const BoardInfo& info) const {
  return BoardView{.info = info, .season = kFirstSeason, .season_started_us = info.created_us, .next_reset_us = {}};
}

void LeaderboardService::CreateBoard(BoardInfo board, std::function<void(Result<BoardView>)> done) {
  if (Status s = ValidateBoardId(board.id); !s.ok()) return done(s);
  if (Status s = ValidateSettings(board.settings); !s.ok()) return done(s);
  board.created_us = NowMicros();
  auto created = board;
  store_.CreateBoard(std::move(board), [this, created, done = std::move(done)](const Status& s) {
    if (!s.ok()) return done(s);
    {
      std::unique_lock lock(mutex_);
      auto& entry = boards_[created.id];
      // Unless its own notification (and a score after it) got here first.
      if (!entry || entry->info.created_us != created.created_us) entry = MakeState(created);
      changes_.fetch_add(1, std::memory_order_acq_rel);
    }
    done(ViewOf(created));
  });
}

void LeaderboardService::UpdateBoard(const std::string& board_id, BoardPatch patch,
                                     std::function<void(Result<BoardView>)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  BoardInfo info = (*state)->info;
  if (patch.reset) info.settings.reset = *patch.reset;
  if (patch.reset_timezone) info.settings.reset_timezone = *patch.reset_timezone;
  if (patch.keep_seasons) info.settings.keep_seasons = *patch.keep_seasons;
  if (patch.auth) info.settings.auth = *patch.auth;
  if (Status s = ValidateSettings(info.settings); !s.ok()) return done(s);
  auto board = (*state)->board;
  store_.UpdateBoard(info, [this, info, board, done = std::move(done)](const Status& s) {
    if (!s.ok()) return done(s);
    {
      std::unique_lock lock(mutex_);
      auto it = boards_.find(info.id);
      // Unless it was deleted meanwhile, or deleted and made again.
      if (it != boards_.end() && it->second->info.created_us == info.created_us) it->second = MakeState(info, board);
    }
    done(ViewOf(info));
  });
}

void LeaderboardService::DeleteBoard(const std::string& board_id, std::function<void(Status)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  if (board_id == kDefaultBoard) return done(Status::Conflict("the board 'default' cannot be deleted"));
  int64_t created = (*state)->info.created_us;
  store_.DeleteBoard((*state)->info, [this, board_id, created, done = std::move(done)](const Status& s) {
    if (s.ok()) {
      std::unique_lock lock(mutex_);
      auto it = boards_.find(board_id);
      if (it != boards_.end() && it->second->info.created_us == created) boards_.erase(it);
      changes_.fetch_add(1, std::memory_order_acq_rel);
    }
    done(s);
  });
}

Result<BoardView> LeaderboardService::GetBoard(const std::string& board_id) const {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return state.status();
  return ViewOf((*state)->info);
}

Result<BoardList> LeaderboardService::ListBoards(int64_t offset, int64_t limit) const {
  if (limit < 1 || limit > kBoardsPageLimitMax) return Status::OutOfRange("limit", 1, kBoardsPageLimitMax);
  if (offset < 0 || offset > kOffsetMax) return Status::OutOfRange("offset", 0, kOffsetMax);
  std::shared_lock lock(mutex_);
  BoardList list;
  list.total = static_cast<int64_t>(boards_.size());
  auto it = boards_.begin();
  std::advance(it, std::min(offset, list.total));
  for (; it != boards_.end() && static_cast<int64_t>(list.boards.size()) < limit; ++it)
    list.boards.push_back(ViewOf(it->second->info));
  return list;
}

Result<std::vector<SeasonInfo>> LeaderboardService::Seasons(const std::string& board_id) const {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return state.status();
  return std::vector<SeasonInfo>{{kFirstSeason, (*state)->info.created_us, std::nullopt}};
}

void LeaderboardService::PostScore(const std::string& board_id, const std::string& client_id, int64_t score,
                                   std::optional<Operator> op, std::function<void(Result<Posted>)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  if (Status s = ValidateClientId(client_id); !s.ok()) return done(s);
  if (score < -kScoreAbsMax || score > kScoreAbsMax)
    return done(Status::OutOfRange("score", -kScoreAbsMax, kScoreAbsMax));
  ScorePost post{.board_id = board_id, .season = kFirstSeason, .client_id = client_id, .score = score, .op = op};
  store_.PostScore(std::move(post), [this, board_id, client_id, done = std::move(done)](Result<StoredScore> r) {
    if (!r.ok()) return done(r.status());
    if (ranking_) return done(Posted{Entry{r->rank, client_id, r->score}, r->changed});
    // The Board of the board the post went to, as the store says. Changes
    // reach it in seq order whatever order the commits answer in; the rank
    // is this request's score's, even when a later post for the same player
    // reached the Board first.
    auto board = BoardFor(board_id, *r);
    if (!board) {
      // The board was deleted (and made again) since: the score went with
      // it; its rank is what it was, which this instance no longer holds.
      Board gone(r->board_order, r->board_ranking);
      return done(Posted{Entry{gone.RankOf(r->score, r->seq), client_id, r->score}, r->changed});
    }
    board->SetIfNewer(client_id, r->score, r->seq);
    done(Posted{Entry{board->RankOf(r->score, r->seq), client_id, r->score}, r->changed});
  });
}

void LeaderboardService::Remove(const std::string& board_id, const std::string& client_id,
                                std::function<void(Status)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
  store_.Remove(board_id, kFirstSeason, client_id,
                [this, board_id, client_id, done = std::move(done)](Result<int64_t> created) {
                  if (!created.ok()) return done(created.status());
                  if (auto state = StateOf(board_id, *created); state && !ranking_) state->board->Erase(client_id);
                  done(Status::Ok());
                });
}

void LeaderboardService::TopOf(const std::shared_ptr<State>& state, int64_t offset, int64_t limit,
                               Callback<Result<Page>> done) {
  if (limit < 1 || limit > kPageLimitMax) return done(Status::OutOfRange("limit", 1, kPageLimitMax));
  if (offset < 0 || offset > kOffsetMax) return done(Status::OutOfRange("offset", 0, kOffsetMax));
  if (ranking_) return ranking_->Top(state->info, kFirstSeason, offset, limit, std::move(done));
  done(state->board->Top(offset, limit));
}

void LeaderboardService::Top(const std::string& board_id, int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  TopOf(*state, offset, limit, std::move(done));
}

void LeaderboardService::Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  if (limit < 1 || limit > kPageLimitMax) return done(Status::OutOfRange("limit", 1, kPageLimitMax));
  if (offset < 0 || offset > kOffsetMax) return done(Status::OutOfRange("offset", 0, kOffsetMax));
  if (ranking_) return ranking_->Top(default_info_, kFirstSeason, offset, limit, std::move(done));
  done(default_board_->Top(offset, limit));  // no lock: the hot read
}

void LeaderboardService::Player(const std::string& board_id, std::string client_id, std::optional<int64_t> around,
                                std::function<void(Result<PlayerView>)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
  if (around && (*around < 0 || *around > kAroundMax)) return done(Status::OutOfRange("around", 0, kAroundMax));
  if (ranking_) return ranking_->Player((*state)->info, kFirstSeason, std::move(client_id), around, std::move(done));
  auto view = (*state)->board->Player(client_id, around);
  if (!view) return done(NoSuchPlayer(client_id));
  done(std::move(*view));
}

void LeaderboardService::Ranks(const std::string& board_id, std::vector<std::string> client_ids,
                               std::function<void(Result<RanksView>)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  if (client_ids.empty() || static_cast<int64_t>(client_ids.size()) > kRanksIdsMax)
    return done(Status::InvalidField("clientIds", "clientIds must hold 1-" + std::to_string(kRanksIdsMax) + " ids"));
  std::set<std::string_view> seen;
  for (const auto& id : client_ids) {
    if (Status s = ValidateClientId(id, "clientIds"); !s.ok()) return done(s);
    if (!seen.insert(id).second) return done(Status::InvalidField("clientIds", "clientIds lists '" + id + "' twice"));
  }
  // `entries` in rank order; the ids without one, in the order asked.
  auto finish = [client_ids](std::vector<Entry> entries) {
    RanksView view;
    std::set<std::string_view> found;
    for (const auto& e : entries) found.insert(e.client_id);
    for (const auto& id : client_ids)
      if (!found.count(id)) view.missing.push_back(id);
    view.entries = std::move(entries);
    return view;
  };
  if (ranking_)
    return ranking_->Ranks((*state)->info, kFirstSeason, client_ids,
                           [finish, done = std::move(done)](Result<std::vector<Entry>> r) mutable {
                             if (!r.ok()) return done(r.status());
                             done(finish(std::move(*r)));
                           });
  done(finish((*state)->board->Locate(client_ids)));
}

}  // namespace hotrow::leaderboard
