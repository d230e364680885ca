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
  threads_idle_.wait(lock, [this] { return threads_ == 0; });
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

Result<std::pair<std::shared_ptr<LeaderboardService::State>, int64_t>> LeaderboardService::ForRead(
    const std::string& board_id, std::optional<int64_t> season) {
  auto found = FindOrNotFound(board_id);
  if (!found.ok()) return found.status();
  auto state = Current(std::move(*found));
  if (!state.ok()) return state.status();
  const int64_t current = (*state)->season;
  if (!season || *season == current) return std::pair{std::move(*state), current};
  const int64_t oldest = OldestKept((*state)->info, current);
  if (*season < oldest || *season > current)
    return Status::NotFound("board '" + board_id + "' has no season " + std::to_string(*season) + " (it keeps " +
                            std::to_string(oldest) + "-" + std::to_string(current) + ")");
  return std::pair{std::move(*state), *season};
}

Result<int64_t> LeaderboardService::ReadSeason(const std::string& board_id, std::optional<int64_t> season) {
  auto read = ForRead(board_id, season);
  if (!read.ok()) return read.status();
  return read->second;
}

std::shared_ptr<Board> LeaderboardService::CachedArchive(const std::string& board_id, int64_t created_us,
                                                         int64_t season) {
  std::lock_guard lock(archive_mutex_);
  ArchiveKey key{board_id, created_us, season};
  for (auto it = archive_.begin(); it != archive_.end(); ++it) {
    if (it->first != key) continue;
    archive_.splice(archive_.end(), archive_, it);  // most recently read last
    return archive_.back().second;
  }
  return nullptr;
}

void LeaderboardService::Archived(const std::shared_ptr<State>& state, int64_t season, bool limited,
                                  BoardCallback done) {
  if (season == state->previous_season && state->previous) return done(state->previous);
  const BoardInfo& info = state->info;
  if (auto cached = CachedArchive(info.id, info.created_us, season)) return done(std::move(cached));
  uint64_t changes = 0;
  {
    std::lock_guard lock(archive_mutex_);
    changes = archive_changes_;
  }
  // Off the caller's thread (an event loop, or a store's): a season may
  // hold a million players.
  auto load = [this, key = ArchiveKey{info.id, info.created_us, season}, order = info.settings.order,
               ranking = info.settings.ranking, changes](BoardCallback& done) {
    auto board = std::make_shared<Board>(order, ranking);
    std::vector<std::pair<std::string, Stored>> players;
    Status s = store_.LoadSeason(std::get<0>(key), std::get<2>(key), [&](std::string client_id, Stored st) {
      players.emplace_back(std::move(client_id), st);
    });
    if (s.ok()) {
      board->ReplaceAll(players);
      std::lock_guard lock(archive_mutex_);
      auto same = std::find_if(archive_.begin(), archive_.end(), [&](const auto& e) { return e.first == key; });
      if (same != archive_.end()) {
        board = same->second;  // another read's load got there first
      } else if (archive_changes_ == changes) {
        // Kept unless a write to an archived season overlapped the read.
        archive_.emplace_back(key, board);
        if (archive_.size() > kArchivedBoardsMax) archive_.pop_front();
      }
    }
    if (s.ok())
      done(std::move(board));
    else
      done(s);
  };
  auto shared_done = std::make_shared<BoardCallback>(std::move(done));
  if (!OffThread(limited ? kArchiveLoadsMax : 0,
                 [load = std::move(load), shared_done]() mutable { load(*shared_done); }))
    (*shared_done)(Status::Unavailable("too many archived seasons are being read at once; try again"));
}

bool LeaderboardService::OffThread(int limit, std::function<void()> work) {
  {
    std::lock_guard lock(archive_mutex_);
    if (limit > 0 && threads_ >= limit) return false;
    ++threads_;
  }
  auto finished = [this] {
    std::lock_guard lock(archive_mutex_);
    if (--threads_ == 0) threads_idle_.notify_all();
  };
  try {
    std::thread([work = std::move(work), finished]() {
      work();
      finished();
    }).detach();
  } catch (const std::system_error& e) {
    log::Error("leaderboard: cannot start a thread: {}", e.what());
    finished();
    return false;
  }
  return true;
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

namespace {
Status CheckPage(int64_t offset, int64_t limit) {
  if (limit < 1 || limit > kPageLimitMax) return Status::OutOfRange("limit", 1, kPageLimitMax);
  if (offset < 0 || offset > kOffsetMax) return Status::OutOfRange("offset", 0, kOffsetMax);
  return Status::Ok();
}
}  // namespace

void LeaderboardService::Top(const std::string& board_id, std::optional<int64_t> season, int64_t offset, int64_t limit,
                             Callback<Result<Page>> done) {
  auto read = ForRead(board_id, season);
  if (!read.ok()) return done(read.status());
  if (Status s = CheckPage(offset, limit); !s.ok()) return done(s);
  auto& [state, s] = *read;
  if (ranking_) return ranking_->Top(state->info, s, offset, limit, std::move(done));
  if (s == state->season) return done(state->board->Top(offset, limit));
  Archived(state, s, /*limited=*/true,
           [offset, limit, done = std::move(done)](Result<std::shared_ptr<Board>> b) mutable {
             if (!b.ok()) return done(b.status());
             done((*b)->Top(offset, limit));
           });
}

void LeaderboardService::Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  if (Status s = CheckPage(offset, limit); !s.ok()) return done(s);
  // The hot read: `default`'s first Board, no lock.
  if (default_board_ && NowMicros() < default_until_us_.load(std::memory_order_acquire))
    return done(default_board_->Top(offset, limit));
  Top(std::string(kDefaultBoard), std::nullopt, offset, limit, std::move(done));
}

void LeaderboardService::Player(std::string client_id, std::optional<int64_t> around,
                                std::function<void(Result<PlayerView>)> done) {
  if (default_board_ && NowMicros() < default_until_us_.load(std::memory_order_acquire)) {
    if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
    if (around && (*around < 0 || *around > kAroundMax)) return done(Status::OutOfRange("around", 0, kAroundMax));
    auto view = default_board_->Player(client_id, around);
    if (!view) return done(NoSuchPlayer(client_id));
    return done(std::move(*view));
  }
  Player(std::string(kDefaultBoard), std::nullopt, std::move(client_id), around, std::move(done));
}

void LeaderboardService::Player(const std::string& board_id, std::optional<int64_t> season, std::string client_id,
                                std::optional<int64_t> around, std::function<void(Result<PlayerView>)> done) {
  auto read = ForRead(board_id, season);
  if (!read.ok()) return done(read.status());
  if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
  if (around && (*around < 0 || *around > kAroundMax)) return done(Status::OutOfRange("around", 0, kAroundMax));
  auto& [state, s] = *read;
  if (ranking_) return ranking_->Player(state->info, s, std::move(client_id), around, std::move(done));
  auto answer = [client_id = std::move(client_id), around, done = std::move(done)](Result<std::shared_ptr<Board>> b) {
    if (!b.ok()) return done(b.status());
    auto view = (*b)->Player(client_id, around);
    if (!view) return done(NoSuchPlayer(client_id));
    done(std::move(*view));
  };
  if (s == state->season) return answer(state->board);
  Archived(state, s, /*limited=*/true, std::move(answer));
}

void LeaderboardService::Ranks(const std::string& board_id, std::optional<int64_t> season,
                               std::vector<std::string> client_ids, std::function<void(Result<RanksView>)> done) {
  auto read = ForRead(board_id, season);
  if (!read.ok()) return done(read.status());
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
  auto& [state, s] = *read;
  if (ranking_)
    return ranking_->Ranks(state->info, s, client_ids,
                           [finish, done = std::move(done)](Result<std::vector<Entry>> r) mutable {
                             if (!r.ok()) return done(r.status());
                             done(finish(std::move(*r)));
                           });
  auto answer = [finish, client_ids, done = std::move(done)](Result<std::shared_ptr<Board>> b) {
    if (!b.ok()) return done(b.status());
    done(finish((*b)->Locate(client_ids)));
  };
  if (s == state->season) return answer(state->board);
  Archived(state, s, /*limited=*/true, std::move(answer));
}

}  // namespace hotrow::leaderboard
