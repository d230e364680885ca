#include "leaderboard/service.h"

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
#include "ops/log.h"
#include "ops/metrics.h"

namespace hotrow::leaderboard {

namespace {

BoardInfo DefaultBoardInfo() { return BoardInfo{.id = std::string(kDefaultBoard), .settings = {}, .created_us = 0}; }

// When `season` of the board began and when the next one begins (seasons
// from the one before the schedule's epoch on).
Result<SeasonAt> BoundsOf(const BoardInfo& info, int64_t season) {
  SeasonSchedule s = ScheduleOf(info);
  if (season == s.epoch_season - 1) return SeasonAt{season, s.pre_epoch_started_us, s.epoch_us};
  if (season < s.epoch_season)
    return Status::Internal("season " + std::to_string(season) + " of board '" + info.id +
                            "' is before its schedule's epoch");
  auto start = SeasonStart(s, season);
  if (!start.ok()) return start.status();
  return SeasonOf(s, *start);
}

}  // namespace

LeaderboardService::LeaderboardService(LeaderboardStore& store, LeaderboardOptions options)
    : store_(store),
      options_(options),
      limiter_(options.score_rate),
      rate_limited_(&metrics::Registry::Default().GetCounter(
          "hotrow_leaderboard_scores_rate_limited_total",
          "Score posts refused with 429 past --score-rate (per ClientId per board per instance).")),
      bad_signatures_(&metrics::Registry::Default().GetCounter(
          "hotrow_leaderboard_signature_refusals_total",
          "Score posts to auth hmac boards refused with 401 bad_signature (missing, stale or wrong signature).")),
      season_switches_(&metrics::Registry::Default().GetCounter(
          "hotrow_leaderboard_season_switches_total",
          "Boards this instance moved to a new season (its clock, or a store's answer, past the season's end).")),
      profile_reads_(&metrics::Registry::Default().GetCounter(
          "hotrow_leaderboard_profile_reads_total",
          "Reads of display names and metadata from the store (players outside a board's top 100, or just in it).")),
      ranking_(store.shared_ranking()),
      default_board_(ranking_ ? nullptr : std::make_shared<Board>()) {
  // Until Load places it, `default` is an empty board in season 1, read
  // through the registry.
  boards_.emplace(kDefaultBoard, std::make_shared<State>(State{.info = DefaultBoardInfo(),
                                                               .season = kFirstSeason,
                                                               .season_started_us = 0,
                                                               .season_next_us = std::nullopt,
                                                               .board = default_board_,
                                                               .previous_season = 0,
                                                               .previous = nullptr}));
  store_.OnBoardChange([this](const std::string& board_id) {
    // "": the feed reconnected and may have missed changes: every board.
    Status s = board_id.empty() ? Load() : ApplyBoardChange(board_id);
    if (s.ok()) return;
    log::Warn("leaderboard: boards changed on another instance and could not be read ({}); reading them all",
              s.ToString());
    if (Status all = Load(); !all.ok()) log::Error("leaderboard: cannot read the boards: {}", all.ToString());
  });
}

LeaderboardService::~LeaderboardService() {
  store_.OnBoardChange(nullptr);
  std::unique_lock lock(archive_mutex_);
  threads_idle_.wait(lock, [this] { return threads_ == 0 && work_ == 0; });
}

Result<std::shared_ptr<LeaderboardService::State>> LeaderboardService::MakeState(BoardInfo info, int64_t season,
                                                                                 std::shared_ptr<Board> board) const {
  auto at = BoundsOf(info, season);
  if (!at.ok()) return at.status();
  if (!board && !ranking_) board = std::make_shared<Board>(info.settings.order, info.settings.ranking);
  return std::make_shared<State>(State{.info = std::move(info),
                                       .season = season,
                                       .season_started_us = at->started_us,
                                       .season_next_us = at->next_us,
                                       .board = std::move(board),
                                       .previous_season = 0,
                                       .previous = nullptr});
}

Result<std::shared_ptr<LeaderboardService::State>> LeaderboardService::Rebase(const State& old, BoardInfo info,
                                                                              int64_t season) const {
  if (season < old.season) season = old.season;  // a season is never left for an earlier one
  if (season == old.season) {
    auto state = MakeState(std::move(info), season, old.board);
    if (!state.ok()) return state.status();
    (*state)->previous_season = old.previous_season;
    (*state)->previous = old.previous;
    return state;
  }
  auto state = MakeState(std::move(info), season);
  if (!state.ok()) return state.status();
  if (season == old.season + 1 && old.board) {
    (*state)->previous_season = old.season;
    (*state)->previous = old.board;
  }
  return state;
}

void LeaderboardService::Place(std::shared_ptr<State> state) {
  if (state->info.id == kDefaultBoard) {
    bool first = default_board_ && state->board == default_board_;
    default_until_us_.store(first ? state->season_next_us.value_or(INT64_MAX) : 0, std::memory_order_release);
  }
  boards_[state->info.id] = std::move(state);
  changes_.fetch_add(1, std::memory_order_acq_rel);
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
  const int64_t now = NowMicros();
  int64_t default_season = 0;
  {
    std::shared_lock lock(mutex_);
    default_season = default_season_;
  }
  // Each board's season: the clock's, or later when this instance already
  // moved it on (a store clock ahead) or the store holds scores of a later
  // one; never earlier than what this instance holds.
  struct Loading {
    BoardInfo info;
    int64_t season = kFirstSeason;
    std::shared_ptr<State> old;  // this instance's state of the same incarnation
  };
  std::map<std::string, Loading, std::less<>> loading;
  std::map<std::pair<std::string, int64_t>, std::vector<std::pair<std::string, Stored>>> rows;
  Status bad = Status::Ok();
  Status s = store_.Load(
      [&](BoardInfo info) -> int64_t {
        auto at = SeasonOf(ScheduleOf(info), now);
        if (!at.ok()) {
          // Its zone is gone from this machine's tzdata: that board is not
          // served here, the others are.
          log::Warn("leaderboard: board '{}' is not served: {}", info.id, at.status().message());
          if (info.id == kDefaultBoard) bad = at.status();
          return INT64_MAX;
        }
        int64_t season = at->season;
        auto old = Find(info.id);
        if (old && old->info.created_us != info.created_us) old = nullptr;
        if (old) season = std::max(season, old->season);
        std::string id = info.id;
        loading[id] = Loading{std::move(info), season, std::move(old)};
        return std::max(kFirstSeason, season - 1);  // this season's players and the one's before
      },
      [&](const std::string& board_id, int64_t season, std::string client_id, Stored st) {
        rows[{board_id, season}].emplace_back(std::move(client_id), st);
      });
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  if (!loading.count(kDefaultBoard)) return Status::Internal("the store holds no board 'default'");
  std::map<std::string, std::shared_ptr<State>, std::less<>> boards;
  int64_t total = 0;
  for (auto& [id, l] : loading) {
    // A later season the store holds scores of already.
    auto last = rows.lower_bound({id, INT64_MAX});
    if (last != rows.begin() && std::prev(last)->first.first == id)
      l.season = std::max(l.season, std::prev(last)->first.second);
    // The same Board objects across reloads where they hold the same season
    // (`default`'s first is shared with the legacy routes); refilled below.
    std::shared_ptr<Board> board, previous;
    if (l.old) {
      if (l.old->season == l.season) board = l.old->board;
      if (l.old->season == l.season - 1) previous = l.old->board;
      if (l.old->previous_season == l.season - 1) previous = l.old->previous;
    }
    if (id == kDefaultBoard && !board && (default_season == 0 || default_season == l.season)) board = default_board_;
    auto state = MakeState(l.info, l.season, std::move(board));
    if (!state.ok()) return state.status();
    // The season before, for late writes and reads of it.
    if (!ranking_ && l.season > kFirstSeason) {
      (*state)->previous_season = l.season - 1;
      (*state)->previous =
          previous ? previous : std::make_shared<Board>(l.info.settings.order, l.info.settings.ranking);
    }
    for (const auto& [b, season] :
         {std::pair{(*state)->board, (*state)->season}, std::pair{(*state)->previous, (*state)->previous_season}}) {
      if (!b) continue;
      auto it = rows.find({id, season});
      b->ReplaceAll(it == rows.end() ? std::vector<std::pair<std::string, Stored>>{} : it->second);
    }
    if ((*state)->board) total += (*state)->board->size();
    boards[id] = std::move(*state);
  }
  size_t count = boards.size();
  std::vector<std::pair<std::string, std::shared_ptr<State>>> boards_copy(boards.begin(), boards.end());
  {
    std::unique_lock lock(mutex_);
    if (changes_.load(std::memory_order_acquire) != changes) return false;
    boards_ = std::move(boards);
    const auto& def = boards_.at(std::string(kDefaultBoard));
    if (default_board_ && def->board == default_board_) default_season_ = def->season;
    Place(def);
  }
  // The top's profiles are read by the first read of each top
  // (Board::ReplaceAll holds none): one store read per board when it is
  // read, not one per board at every reload.
  for (const auto& [id, state] : boards_copy) PurgeOld(*state);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("leaderboard: loaded {} board(s) and {} player(s) into memory in {} ms", count, total, ms);
  return true;
}

void LeaderboardService::PurgeOld(const State& state) {
  const int64_t through = state.season - state.info.settings.keep_seasons - 1;
  if (through < kFirstSeason) return;
  store_.Purge(state.info.id, state.info.created_us, through, [id = state.info.id, through](const Status& s) {
    // Read past keepSeasons never, so a failed purge only keeps rows longer:
    // the next season move (or start) tries again.
    if (!s.ok()) log::Warn("leaderboard: deleting the seasons through {} of board '{}': {}", through, id, s.ToString());
  });
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

std::shared_ptr<LeaderboardService::State> LeaderboardService::StateOf(const std::string& board_id,
                                                                       int64_t created_us) const {
  auto state = Find(board_id);
  return state && state->info.created_us == created_us ? state : nullptr;
}

Result<std::shared_ptr<LeaderboardService::State>> LeaderboardService::Current(std::shared_ptr<State> state) {
  // A few tries: the entry may change meanwhile (a settings change that
  // keeps the old season's bounds is then moved on by the next round).
  constexpr int kTriesMax = 3;
  for (int tries = 0; tries < kTriesMax; ++tries) {
    const int64_t now = NowMicros();
    if (!state->season_next_us || now < *state->season_next_us) return state;
    auto at = SeasonOf(ScheduleOf(state->info), now);
    if (!at.ok()) return at.status();
    auto moved = Rebase(*state, state->info, at->season);
    if (!moved.ok()) return moved.status();
    std::unique_lock lock(mutex_);
    auto it = boards_.find(state->info.id);
    if (it == boards_.end()) return NoSuchBoard(state->info.id);
    if (it->second == state) {
      Place(*moved);
      lock.unlock();
      season_switches_->Add();
      PurgeOld(**moved);
      return *moved;
    }
    state = it->second;
  }
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
  auto board = BoardFor(change.board_id, change.board_created_us, change.season, state->info.settings.order,
                        state->info.settings.ranking);
  if (!board) return Status::Ok();  // gone, or an archived season not in memory (BoardFor noted it)
  if (change.kind == ScoreChange::Kind::kErase)
    board->Erase(change.client_id);
  else if (change.kind == ScoreChange::Kind::kProfile)
    board->SetProfile(change.client_id, change.profile);
  else
    board->SetIfNewer(change.client_id, change.score, change.seq);
  return Status::Ok();
}

std::shared_ptr<Board> LeaderboardService::BoardFor(const std::string& board_id, int64_t created_us, int64_t season,
                                                    Order order, Ranking ranking) {
  {
    std::unique_lock lock(mutex_);
    auto it = boards_.find(board_id);
    if (it != boards_.end() && it->second->info.created_us == created_us) {
      const State& state = *it->second;
      if (season == state.season) return state.board;
      if (season == state.previous_season) return state.previous;
      if (season > state.season) {
        // The store's clock is past this instance's end of the season.
        auto moved = Rebase(state, state.info, season);
        if (!moved.ok()) {
          log::Warn("leaderboard: board '{}' cannot move to season {}: {}", board_id, season,
                    moved.status().ToString());
          return nullptr;
        }
        Place(*moved);
        lock.unlock();
        season_switches_->Add();
        PurgeOld(**moved);
        return (*moved)->board;
      }
      // An older archived season: below.
    } else if (it != boards_.end() && it->second->info.created_us > created_us) {
      return nullptr;  // gone since
    } else if (auto gone = deleted_.find(board_id); gone != deleted_.end() && gone->second >= created_us) {
      return nullptr;  // deleted here since (a late answer or message)
    } else {
      // A board made again on another instance, whose notification has not
      // reached this one yet: its Board starts here (the notification then
      // fills in the rest of its settings, and the changes after it follow).
      BoardInfo info{.id = board_id,
                     .settings = {.order = order, .ranking = ranking},
                     .created_us = created_us,
                     .epoch_season = season,
                     .epoch_us = created_us};
      auto state = MakeState(std::move(info), season);
      if (!state.ok()) return nullptr;
      Place(*state);
      return (*state)->board;
    }
  }
  // An older archived season: its cached Board, or (atomically with that
  // look-up) a note that a load overlapping this write must not be kept.
  std::lock_guard lock(archive_mutex_);
  ArchiveKey key{board_id, created_us, season};
  for (const auto& [k, board] : archive_)
    if (k == key) return board;
  ++archive_changes_;
  return nullptr;
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
    if (!info.ok()) {
      if (info.status().code() != ErrorCode::kNotFound) return info.status();
      if (it != boards_.end() && board_id != kDefaultBoard) {
        deleted_[board_id] = std::max(deleted_[board_id], it->second->info.created_us);
        boards_.erase(it);
      }
      changes_.fetch_add(1, std::memory_order_acq_rel);
      return Status::Ok();
    }
    auto at = SeasonOf(ScheduleOf(*info), NowMicros());
    if (!at.ok()) {
      log::Warn("leaderboard: board '{}' is not served: {}", board_id, at.status().message());
      if (it != boards_.end() && board_id != kDefaultBoard) boards_.erase(it);
      changes_.fetch_add(1, std::memory_order_acq_rel);
      return Status::Ok();
    }
    // Order and ranking never change on a live board: one of another
    // creation time is a new board of the same id (deleted and made again).
    bool same = it != boards_.end() && it->second->info.created_us == info->created_us;
    auto state = same ? Rebase(*it->second, std::move(*info), at->season) : MakeState(std::move(*info), at->season);
    if (!state.ok()) return state.status();
    Place(std::move(*state));
    return Status::Ok();
  }
  return Status::Unavailable("board '" + board_id + "' kept changing while it was read");
}

}  // namespace hotrow::leaderboard
