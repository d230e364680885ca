// LeaderboardService: reads -- pages, a player and the friends view, of the
// current season or an archived one (service.h).
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

void LeaderboardService::BeginWork() {
  std::lock_guard lock(archive_mutex_);
  ++work_;
}

void LeaderboardService::EndWork() {
  std::lock_guard lock(archive_mutex_);
  if (--work_ == 0 && threads_ == 0) threads_idle_.notify_all();
}

void LeaderboardService::ThreadDone() {
  std::lock_guard lock(archive_mutex_);
  if (--threads_ == 0 && work_ == 0) threads_idle_.notify_all();
}

bool LeaderboardService::OffThread(int limit, std::function<void()> work) {
  {
    std::lock_guard lock(archive_mutex_);
    if (limit > 0 && threads_ >= limit) return false;
    ++threads_;
  }
  try {
    std::thread([this, work = std::move(work)]() {
      work();
      ThreadDone();
    }).detach();
  } catch (const std::system_error& e) {
    log::Error("leaderboard: cannot start a thread: {}", e.what());
    ThreadDone();
    return false;
  }
  return true;
}

namespace {
bool AnyUnread(std::span<const Entry> entries) {
  return std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return e.profile_unread; });
}
bool AnyUnread(const PlayerView& v) { return v.entry.profile_unread || (v.around && AnyUnread(*v.around)); }
}  // namespace

void LeaderboardService::FillProfiles(const std::shared_ptr<Board>& board, const std::string& board_id, int64_t season,
                                      std::vector<Entry> entries,
                                      std::function<void(Result<std::vector<Entry>>)> done) {
  std::vector<std::string> unread;
  bool in_top = false;  // an entry the Board may hold (its rank is at most its position + 1)
  for (const auto& e : entries)
    if (e.profile_unread && std::find(unread.begin(), unread.end(), e.client_id) == unread.end()) {
      unread.push_back(e.client_id);
      in_top |= e.rank <= kPageLimitMax;
    }
  if (unread.empty()) return done(std::move(entries));
  const Board::ProfileToken token = board->profile_token();  // before the store read (CacheProfiles)
  profile_reads_->Add();
  const size_t asked = unread.size();
  store_.ReadProfiles(board_id, season, std::move(unread),
                      [board, token, asked, in_top, entries = std::move(entries),
                       done = std::move(done)](Result<ProfileMap> found) mutable {
                        if (!found.ok()) return done(found.status());
                        std::vector<std::string_view> read;  // into `entries`, which outlive its use
                        for (auto& e : entries) {
                          if (!e.profile_unread) continue;
                          read.push_back(e.client_id);
                          auto it = found->find(e.client_id);
                          e.profile = it == found->end() ? nullptr : it->second;
                          e.profile_unread = false;
                        }
                        // The Board's exclusive lock only when it may keep
                        // something: a profile of its top, or a player to
                        // unmark.
                        if (in_top || found->size() < asked) board->CacheProfiles(token, read, *found);
                        done(std::move(entries));
                      });
}

void LeaderboardService::ReadTop(const std::shared_ptr<Board>& board, const std::string& board_id, int64_t season,
                                 int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  Page page = board->Top(offset, limit);
  if (!AnyUnread(page.entries)) return done(std::move(page));
  auto shared_done = std::make_shared<Callback<Result<Page>>>(std::move(done));
  // A read of its own: this page's profiles.
  auto own = [this, board, board_id, season, shared_done](const Page& page) {
    FillProfiles(board, board_id, season, std::vector<Entry>(page.entries.begin(), page.entries.end()),
                 [total = page.total, shared_done](Result<std::vector<Entry>> r) {
                   if (!r.ok()) return (*shared_done)(r.status());
                   (*shared_done)(Page::Own(std::move(*r), total));
                 });
  };
  if (offset + limit > kPageLimitMax) return own(page);
  // Within the top, which every hot read shows: one store read of all of
  // its unread profiles at a time per Board, which answers its request from
  // what it read. Reads that came meanwhile wait for it: its failure is
  // theirs; else they read the Board again, and read for themselves only
  // if it kept nothing they show (a name set meanwhile, an erase). A
  // waiter is not answered from the read: it may have come after a write
  // the read did not see.
  auto waiter = [board, offset, limit, shared_done, own](const Status& read) {
    if (!read.ok()) return (*shared_done)(read);
    Page page = board->Top(offset, limit);
    if (!AnyUnread(page.entries)) return (*shared_done)(std::move(page));
    own(page);
  };
  {
    std::lock_guard lock(top_reads_mutex_);
    auto [it, first] = top_reads_.try_emplace(board.get());
    if (!first) return it->second.push_back(std::move(waiter));
  }
  Page top = board->Top(0, kPageLimitMax);
  BeginWork();  // the callback uses the service
  FillProfiles(board, board_id, season, std::vector<Entry>(top.entries.begin(), top.entries.end()),
               [this, board, shared_done, offset, limit, total = top.total](Result<std::vector<Entry>> r) {
                 std::vector<std::function<void(const Status&)>> waiting;
                 {
                   std::lock_guard lock(top_reads_mutex_);
                   auto it = top_reads_.find(board.get());
                   waiting = std::move(it->second);
                   top_reads_.erase(it);
                 }
                 const Status read = r.ok() ? Status::Ok() : r.status();
                 if (r.ok()) {
                   auto list = std::make_shared<const std::vector<Entry>>(std::move(*r));
                   (*shared_done)(Page::Slice(std::move(list), offset, limit, total));
                 } else {
                   (*shared_done)(read);
                 }
                 for (auto& w : waiting) w(read);
                 EndWork();
               });
}

void LeaderboardService::ReadPlayer(const std::shared_ptr<Board>& board, const std::string& board_id, int64_t season,
                                    const std::string& client_id, std::optional<int64_t> around,
                                    std::function<void(Result<PlayerView>)> done) {
  auto view = board->Player(client_id, around);
  if (!view) return done(NoSuchPlayer(client_id));
  if (!AnyUnread(*view)) return done(std::move(*view));
  // The entry first, then those around it.
  std::vector<Entry> entries{view->entry};
  if (view->around) entries.insert(entries.end(), view->around->begin(), view->around->end());
  const bool with_around = view->around.has_value();
  FillProfiles(board, board_id, season, std::move(entries),
               [with_around, done = std::move(done)](Result<std::vector<Entry>> r) {
                 if (!r.ok()) return done(r.status());
                 PlayerView filled{std::move(r->front()), std::nullopt};
                 if (with_around)
                   filled.around.emplace(std::make_move_iterator(r->begin() + 1), std::make_move_iterator(r->end()));
                 done(std::move(filled));
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
  if (s == state->season) return ReadTop(state->board, state->info.id, s, offset, limit, std::move(done));
  Archived(state, s, /*limited=*/true,
           [this, board_id = state->info.id, s = s, offset, limit,
            done = std::move(done)](Result<std::shared_ptr<Board>> b) mutable {
             if (!b.ok()) return done(b.status());
             ReadTop(*b, board_id, s, offset, limit, std::move(done));
           });
}

void LeaderboardService::Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  if (Status s = CheckPage(offset, limit); !s.ok()) return done(s);
  // The hot read: `default`'s first Board, no lock.
  if (default_board_ && NowMicros() < default_until_us_.load(std::memory_order_acquire)) {
    Page page = default_board_->Top(offset, limit);
    if (!AnyUnread(page.entries)) return done(std::move(page));  // else the registry knows the season
  }
  Top(std::string(kDefaultBoard), std::nullopt, offset, limit, std::move(done));
}

void LeaderboardService::Player(std::string client_id, std::optional<int64_t> around,
                                std::function<void(Result<PlayerView>)> done) {
  if (default_board_ && NowMicros() < default_until_us_.load(std::memory_order_acquire)) {
    if (Status s = ValidateClientId(client_id, "clientId"); !s.ok()) return done(s);
    if (around && (*around < 0 || *around > kAroundMax)) return done(Status::OutOfRange("around", 0, kAroundMax));
    auto view = default_board_->Player(client_id, around);
    if (!view) return done(NoSuchPlayer(client_id));
    if (!AnyUnread(*view)) return done(std::move(*view));
    // Else the registry knows the season to read profiles from.
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
  auto answer = [this, board_id = state->info.id, s = s, client_id = std::move(client_id), around,
                 done = std::move(done)](Result<std::shared_ptr<Board>> b) mutable {
    if (!b.ok()) return done(b.status());
    ReadPlayer(*b, board_id, s, client_id, around, std::move(done));
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
  auto answer = [this, board_id = state->info.id, s = s, finish, client_ids,
                 done = std::move(done)](Result<std::shared_ptr<Board>> b) mutable {
    if (!b.ok()) return done(b.status());
    FillProfiles(*b, board_id, s, (*b)->Locate(client_ids),
                 [finish, done = std::move(done)](Result<std::vector<Entry>> r) {
                   if (!r.ok()) return done(r.status());
                   done(finish(std::move(*r)));
                 });
  };
  if (s == state->season) return answer(state->board);
  Archived(state, s, /*limited=*/true, std::move(answer));
}

}  // namespace hotrow::leaderboard
