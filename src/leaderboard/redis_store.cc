#include "leaderboard/redis_store.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "base/await.h"
#include "leaderboard/redis_scripts.h"
#include "ops/log.h"

namespace hotrow::leaderboard {

using lua::kBoardScript, lua::kBoardsStep, lua::kClearScript, lua::kPlayerScript, lua::kPostScript, lua::kPurgeScript,
    lua::kRanksScript, lua::kRemoveScript, lua::kTopScript;

namespace {

constexpr const char* kBoards = "hotrow:lb:boards";
constexpr const char* kSeq = "hotrow:lb:seq";
constexpr const char* kPurged = "hotrow:lb:purged";  // board -> the season up to which its keys are deleted
constexpr const char* kChannel = "hotrow:lb:changed";
constexpr size_t kSeqDigits = 16;  // width of the sequence prefix

std::string KeyOf(std::string_view board_id, int64_t season, const char* what) {
  return "hotrow:lb:b:" + std::string(board_id) + ":" + std::to_string(season) + ":" + what;
}

// Redis replies with scores as text ("666", "9007199254740991"); scores
// are integers below 2^53, which a double holds exactly.
int64_t ParseScore(const db::redis::Reply& r) { return static_cast<int64_t>(std::strtod(r.str.c_str(), nullptr)); }

int64_t ReplyInt(const db::redis::Reply& r) {
  return r.type == db::redis::Reply::Type::kInteger ? r.integer : std::strtoll(r.str.c_str(), nullptr, 10);
}

std::string ClientOf(const std::string& member) {
  return member.size() > kSeqDigits ? member.substr(kSeqDigits) : member;
}

// A profile as a season's :p hash keeps it ("<name bytes, -1: none>
// <name><metadata>"); null for nil or text it cannot read.
std::shared_ptr<const Profile> ProfileOf(const db::redis::Reply& r) {
  if (r.is_nil() || r.str.empty()) return nullptr;
  size_t space = r.str.find(' ');
  if (space == std::string::npos) return nullptr;
  int64_t length = std::strtoll(r.str.c_str(), nullptr, 10);
  std::string_view rest = std::string_view(r.str).substr(space + 1);
  if (length < -1 || length > static_cast<int64_t>(rest.size())) return nullptr;
  size_t name_bytes = length < 0 ? 0 : static_cast<size_t>(length);
  return std::make_shared<const Profile>(Profile{.display_name = std::string(rest.substr(0, name_bytes)),
                                                 .metadata = std::string(rest.substr(name_bytes))});
}

// Entries from a flat [member, score, profile, ...] list starting at
// elements[first], at positions from first_position, ranked as `ranking`
// from first_rank (shared ranks change only where the score does).
std::vector<Entry> Entries(const std::vector<db::redis::Reply>& elements, size_t first, int64_t first_position,
                           int64_t first_rank, Ranking ranking) {
  std::vector<Entry> out;
  for (size_t i = first; i + 2 < elements.size(); i += 3) {
    int64_t position = first_position + static_cast<int64_t>((i - first) / 3);
    int64_t score = ParseScore(elements[i + 1]);
    int64_t rank = out.empty()                   ? first_rank
                   : ranking == Ranking::kUnique ? position
                   : score == out.back().score   ? out.back().rank
                                                 : position;
    out.push_back({rank, ClientOf(elements[i].str), score, ProfileOf(elements[i + 2])});
  }
  return out;
}

std::string Encode(const BoardInfo& b) {
  const BoardSettings& s = b.settings;
  return std::string(Name(s.order)) + " " + Name(s.op) + " " + Name(s.reset) + " " + s.reset_timezone + " " +
         Name(s.ranking) + " " + Name(s.auth) + " " + std::to_string(s.keep_seasons) + " " +
         std::to_string(b.created_us) + " " + std::to_string(s.reset_every_s) + " " + std::to_string(b.epoch_season) +
         " " + std::to_string(b.epoch_us) + " " + std::to_string(b.pre_epoch_started_us) +
         // Without secrets, as before them (the board script compares the text).
         (b.secret_sealed.empty() && b.previous_secret_sealed.empty()
              ? std::string()
              : " " + (b.secret_sealed.empty() ? std::string("-") : b.secret_sealed) + " " +
                    (b.previous_secret_sealed.empty() ? std::string("-") : b.previous_secret_sealed) + " " +
                    std::to_string(b.previous_until_us));
}

Result<BoardInfo> Decode(const std::string& id, const std::string& text) {
  std::istringstream in(text);
  std::string order, op, reset, tz, ranking, auth;
  int64_t keep = 0, created = 0, every = 0, epoch_season = 1, epoch = 0, pre_epoch = 0;
  in >> order >> op >> reset >> tz >> ranking >> auth >> keep >> created >> every >> epoch_season >> epoch >> pre_epoch;
  auto o = ParseOrder(order);
  auto p = ParseOperator(op);
  auto r = ParseReset(reset);
  auto k = ParseRanking(ranking);
  auto a = ParseBoardAuth(auth);
  if (!in || !o || !p || !r || !k || !a)
    return Status::Internal("board '" + id + "' has settings this release cannot read: " + text);
  // Sealed secrets (hex, "-" for none) and the grace's end; absent on a
  // board written before them.
  std::string secret = "-", previous = "-";
  int64_t previous_until = 0;
  if (in >> secret) in >> previous >> previous_until;
  if (secret == "-") secret.clear();
  if (previous == "-") previous.clear();
  return BoardInfo{.id = id,
                   .settings = {.order = *o,
                                .op = *p,
                                .reset = *r,
                                .reset_timezone = tz,
                                .ranking = *k,
                                .auth = *a,
                                .keep_seasons = keep,
                                .reset_every_s = every},
                   .created_us = created,
                   .epoch_season = epoch_season,
                   .epoch_us = epoch,
                   .pre_epoch_started_us = pre_epoch,
                   .secret_sealed = secret,
                   .previous_secret_sealed = previous,
                   .previous_until_us = previous_until};
}

}  // namespace

Result<std::unique_ptr<RedisLeaderboardStore>> RedisLeaderboardStore::Open(const std::string& url,
                                                                           db::redis::Options options,
                                                                           RedisReads reads) {
  auto client = db::redis::Client::Connect(url, options);
  if (!client.ok()) return client.status();
  std::unique_ptr<RedisLeaderboardStore> store(new RedisLeaderboardStore());
  store->client_ = std::move(client).value();
  auto config = store->client_->CommandSync({"CONFIG", "GET", "appendfsync"});
  if (config.ok() && config->elements.size() == 2 && config->elements[1].str != "always")
    log::Warn(
        "Redis runs with appendfsync {}: an acknowledged score can be lost in a crash; "
        "run it with appendonly yes and appendfsync always",
        config->elements[1].str);
  if (Status s = db::redis::Migrate(*store->client_, {{.sql = kBoardsStep, .contract = true}}); !s.ok()) return s;
  auto* raw = store.get();
  auto subscriber = db::redis::Subscriber::Start(
      url, kChannel, [raw](const std::string& payload) { raw->OnMessage(payload); },
      [raw] {
        // Messages may have been missed: every cache is stale, and every
        // board is read again.
        raw->InvalidateAll();
        std::lock_guard lock(raw->listener_mutex_);
        if (raw->on_board_change_) raw->on_board_change_("");
      });
  if (!subscriber.ok()) return subscriber.status();
  store->subscriber_ = std::move(subscriber).value();
  store->cache_ms_ = reads.cache_ms;
  if (!reads.replicas.urls.empty()) {
    reads.replicas.client = options;
    auto replicas = db::redis::ReplicaSet::Start(*store->client_, std::move(reads.replicas));
    if (!replicas.ok()) return replicas.status();
    store->replicas_ = std::move(replicas).value();
  }
  return store;
}

RedisLeaderboardStore::~RedisLeaderboardStore() { Stop(); }

void RedisLeaderboardStore::Stop() {
  subscriber_.reset();
  // The replicas' heartbeat sends on client_, and answers on its thread:
  // stopped first, it sends no more; client_'s Stop then runs the answers
  // still queued while the ReplicaSet they touch still exists.
  if (replicas_) replicas_->Stop();
  if (client_) client_->Stop();
}

void RedisLeaderboardStore::OnBoardChange(std::function<void(const std::string&)> f) {
  std::lock_guard lock(listener_mutex_);
  on_board_change_ = std::move(f);
}

void RedisLeaderboardStore::OnMessage(const std::string& payload) {
  if (payload.starts_with("board ")) {
    std::string id = payload.substr(6);
    {
      std::lock_guard lock(cache_mutex_);  // a board made again starts a cache of its own
      for (auto it = caches_.lower_bound({id, INT64_MIN}); it != caches_.end() && it->first.first == id;)
        it = it->second.waiters.empty() ? caches_.erase(it) : std::next(it);
    }
    Invalidate(id);
    std::lock_guard lock(listener_mutex_);
    if (on_board_change_) on_board_change_(id);
    return;
  }
  Invalidate(payload);  // a score of that board changed
}

// Only boards this instance reads have a cache: a message for any other (a
// board it never read, or an older release's payload) makes none.
void RedisLeaderboardStore::Invalidate(const std::string& board_id) {
  std::lock_guard lock(cache_mutex_);
  for (auto it = caches_.lower_bound({board_id, INT64_MIN}); it != caches_.end() && it->first.first == board_id; ++it)
    ++it->second.version;
}

void RedisLeaderboardStore::InvalidateAll() {
  std::lock_guard lock(cache_mutex_);
  for (auto& [id, cache] : caches_) ++cache.version;
}

Status RedisLeaderboardStore::Load(const std::function<int64_t(BoardInfo)>& board_sink,
                                   const std::function<void(const std::string&, int64_t, std::string, Stored)>&) {
  auto all = client_->CommandSync({"HGETALL", kBoards});
  if (!all.ok()) return all.status();
  const auto& e = all->elements;
  for (size_t i = 0; i + 1 < e.size(); i += 2) {
    auto board = Decode(e[i].str, e[i + 1].str);
    if (!board.ok()) {
      log::Warn("leaderboard: {}; it is not served", board.status().message());
      continue;
    }
    board_sink(std::move(*board));
  }
  return Status::Ok();
}

Result<std::vector<RecordedSeason>> RedisLeaderboardStore::SeasonHistory(const std::string& board_id) {
  auto all = client_->CommandSync({"HGETALL", "hotrow:lb:b:" + board_id + ":seasons"});
  if (!all.ok()) return all.status();
  std::vector<RecordedSeason> out;
  const auto& e = all->elements;
  for (size_t i = 0; i + 1 < e.size(); i += 2) out.push_back({ReplyInt(e[i]), ReplyInt(e[i + 1])});
  std::sort(out.begin(), out.end(),
            [](const RecordedSeason& a, const RecordedSeason& b) { return a.season < b.season; });
  return out;
}

Result<BoardInfo> RedisLeaderboardStore::LoadBoard(const std::string& board_id) {
  auto r = client_->CommandSync({"HGET", kBoards, board_id});
  if (!r.ok()) return r.status();
  if (r->is_nil()) return NoSuchBoard(board_id);
  return Decode(board_id, r->str);
}

void RedisLeaderboardStore::CreateBoard(BoardInfo board, std::function<void(Status)> done) {
  client_->Eval(kBoardScript, {"2", kBoards, kPurged, board.id, Encode(board), kChannel, "create", "0"},
                [this, id = board.id, done = std::move(done)](Result<db::redis::Reply> r) {
                  Wrote();
                  if (!r.ok()) return done(r.status());
                  if (r->integer != 1) return done(Status::AlreadyExists("a board '" + id + "' exists already"));
                  Invalidate(id);
                  done(Status::Ok());
                });
}

void RedisLeaderboardStore::UpdateBoard(BoardInfo board, BoardInfo expected, std::vector<RecordedSeason> history,
                                        std::function<void(Status)> done) {
  std::vector<std::string> args = {"2",
                                   kBoards,
                                   kPurged,
                                   board.id,
                                   Encode(board),
                                   kChannel,
                                   "update",
                                   std::to_string(board.created_us),
                                   Encode(expected)};
  for (const RecordedSeason& h : history) {
    args.push_back(std::to_string(h.season));
    args.push_back(std::to_string(h.started_us));
  }
  client_->Eval(kBoardScript, std::move(args),
                [this, id = board.id, done = std::move(done)](Result<db::redis::Reply> r) {
                  Wrote();
                  if (!r.ok()) return done(r.status());
                  done(r->integer == 1 ? Status::Ok() : r->integer == 2 ? BoardChangedMeanwhile(id) : NoSuchBoard(id));
                });
}

void RedisLeaderboardStore::DeleteBoard(BoardInfo board, std::function<void(Status)> done) {
  client_->Eval(kBoardScript,
                {"2", kBoards, kPurged, board.id, "", kChannel, "delete", std::to_string(board.created_us)},
                [this, board_id = board.id, done = std::move(done)](Result<db::redis::Reply> r) {
                  Wrote();
                  if (!r.ok()) return done(r.status());
                  if (r->integer != 1) return done(NoSuchBoard(board_id));
                  Invalidate(board_id);
                  done(Status::Ok());
                });
}

void RedisLeaderboardStore::PostScore(ScorePost p, std::function<void(Result<StoredScore>)> done) {
  std::string board_id = p.board_id;
  const int64_t posted = p.score;
  const int64_t season = p.season;
  client_->Eval(
      kPostScript,
      {"7", kBoards, KeyOf(p.board_id, p.season, "z"), KeyOf(p.board_id, p.season, "m"), kSeq,
       // (A space never appears in a ClientId, nor in a key; a signature's
       // " sig:" cannot be a key's.)
       "hotrow:lb:b:" + p.board_id + ":key:" + p.client_id + " " + p.idempotency_key, KeyOf(p.board_id, p.season, "p"),
       "hotrow:lb:b:" + p.board_id + ":key:" + p.client_id + "  sig:" + p.signature, p.board_id, p.client_id,
       std::to_string(p.score), p.op ? Name(*p.op) : "", kChannel, std::to_string(p.season),
       std::to_string(p.season_start_us), p.season_next_us ? std::to_string(*p.season_next_us) : "", p.schedule,
       p.fingerprint, std::to_string(kIdempotencyKeptUs / 1000), p.display_name ? "=" + *p.display_name : std::string(),
       p.metadata ? "=" + *p.metadata : std::string(), p.idempotency_key.empty() ? "" : "1",
       p.signature.empty() ? "" : "1"},
      [this, board_id, posted, season,
       key = p.idempotency_key.empty() ? std::string("(the signature)") : p.idempotency_key,
       done = std::move(done)](Result<db::redis::Reply> r) {
        if (!r.ok()) {
          Wrote();  // it may have run
          return done(r.status());
        }
        const auto& e = r->elements;
        if (e.empty()) return done(Status::Internal("unexpected reply from the score script"));
        if (e[0].str == "noboard") return done(NoSuchBoard(board_id));
        if (e[0].str == "season" && e.size() == 2) {
          StoredScore moved;
          moved.moved_at_us = ParseScore(e[1]);
          return done(moved);
        }
        if (e[0].str == "mismatch") return done(IdempotencyKeyReused(key));
        if (e[0].str == "replay" && e.size() == 7) {
          // The write it replays may have been answered on another instance:
          // this one's reads must see it too.
          Wrote();
          auto order = ParseOrder(e[5].str);
          auto ranking = ParseRanking(e[6].str);
          if (!order || !ranking) return done(Status::Internal("unexpected reply from the score script"));
          return done(StoredScore{.score = ParseScore(e[1]),
                                  .rank = ReplyInt(e[2]),
                                  .board_created_us = ReplyInt(e[4]),
                                  .board_order = *order,
                                  .board_ranking = *ranking,
                                  .season = ReplyInt(e[3]),
                                  .replayed = true});
        }
        if (e[0].str == "stale") {
          StoredScore stale;
          stale.stale_schedule = true;
          return done(stale);
        }
        // The stored score, exact; the sum in int64 (Lua's double may round it).
        if (e[0].str == "range" && e.size() == 2) return done(IncrementOutOfRange(ParseScore(e[1]) + posted));
        auto order = e.size() == 8 ? ParseOrder(e[5].str) : std::nullopt;
        auto ranking = e.size() == 8 ? ParseRanking(e[6].str) : std::nullopt;
        if (e[0].str != "ok" || !order || !ranking)
          return done(Status::Internal("unexpected reply from the score script"));
        bool changed = ReplyInt(e[3]) == 1;
        // Before answering: our next read must see it. (Every other answer
        // above wrote nothing: no fence for it.)
        if (changed || ReplyInt(e[7]) == 1) {
          Wrote();
          Invalidate(board_id);
        }
        done(StoredScore{.score = ParseScore(e[1]),
                         .changed = changed,
                         .rank = ReplyInt(e[2]),
                         .board_created_us = ReplyInt(e[4]),
                         .board_order = *order,
                         .board_ranking = *ranking,
                         .season = season});
      });
}

void RedisLeaderboardStore::Purge(std::string board_id, int64_t created_us, int64_t through_season,
                                  std::function<void(Status)> done) {
  client_->Eval(kPurgeScript,
                {"2", kBoards, kPurged, board_id, std::to_string(created_us), std::to_string(through_season)},
                [this, done = std::move(done)](Result<db::redis::Reply> r) {
                  Wrote();
                  done(r.status());
                });
}

void RedisLeaderboardStore::Remove(std::string board_id, int64_t season, std::string client_id,
                                   std::function<void(Result<int64_t>)> done) {
  client_->Eval(kRemoveScript,
                {"4", kBoards, KeyOf(board_id, season, "z"), KeyOf(board_id, season, "m"), KeyOf(board_id, season, "p"),
                 board_id, client_id, kChannel},
                [this, board_id, client_id, done = std::move(done)](Result<db::redis::Reply> r) {
                  Wrote();
                  if (!r.ok()) return done(r.status());
                  int64_t answer = ReplyInt(*r);
                  if (answer == -1) return done(NoSuchBoard(board_id));
                  if (answer == 0) return done(NoSuchPlayer(client_id));
                  Invalidate(board_id);
                  done(answer);
                });
}

namespace {
Page SliceOf(const std::shared_ptr<const RedisLeaderboardStore::CachedView>& c, int64_t offset, int64_t limit) {
  return Page::Slice(std::shared_ptr<const std::vector<Entry>>(c, &c->top), offset, limit, c->total);
}
}  // namespace

void RedisLeaderboardStore::ReadEval(const db::redis::Script& script, std::vector<std::string> args,
                                     db::redis::Client::Callback done) {
  if (replicas_) return replicas_->Read(script, std::move(args), std::move(done));
  client_->Eval(script, std::move(args), std::move(done));
}

// A page past the cached top (or any page without the cache), read as asked.
void RedisLeaderboardStore::DeepTop(const BoardInfo& board, int64_t season, int64_t offset, int64_t limit,
                                    Callback<Result<Page>> done) {
  const Ranking ranking = board.settings.ranking;
  ReadEval(kTopScript,
           {"2", KeyOf(board.id, season, "z"), KeyOf(board.id, season, "p"), std::to_string(offset),
            std::to_string(limit), Name(board.settings.order), Name(ranking)},
           [offset, ranking, done = std::move(done)](Result<db::redis::Reply> r) {
             if (!r.ok()) return done(r.status());
             const auto& e = r->elements;
             if (e.size() < 2) return done(Status::Internal("unexpected reply from the top script"));
             done(Page::Own(Entries(e, 2, offset + 1, ReplyInt(e[1]), ranking), ReplyInt(e[0])));
           });
}

void RedisLeaderboardStore::Top(const BoardInfo& board, int64_t season, int64_t offset, int64_t limit,
                                Callback<Result<Page>> done) {
  if (offset + limit > kPageLimitMax || cache_ms_ == 0) return DeepTop(board, season, offset, limit, std::move(done));
  std::unique_lock lock(cache_mutex_);
  if (caches_.size() >= kCachedSeasonsMax && !caches_.count({board.id, season})) {
    // Bounded (a reader may walk every archived season): the idle entries
    // go; a read after refetches.
    for (auto it = caches_.begin(); it != caches_.end();)
      it = it->second.waiters.empty() && !it->second.fetching ? caches_.erase(it) : std::next(it);
  }
  BoardCache& cache = caches_[{board.id, season}];
  if (cache.board.created_us != board.created_us && !cache.fetching) {
    // Another incarnation of the id (deleted and made again): start over.
    cache.cached.reset();
    ++cache.version;
  }
  cache.board = board;
  uint64_t version = cache.version;
  if (cache.cached && cache.cached->version >= version &&
      std::chrono::steady_clock::now() - cache.cached->fetched < std::chrono::milliseconds(cache_ms_)) {
    auto cached = cache.cached;
    lock.unlock();
    return done(SliceOf(cached, offset, limit));
  }
  cache.waiters.push_back({version, offset, limit, std::move(done)});
  if (cache.fetching) return;  // the fetch in flight (or the one after it) answers
  cache.fetching = true;
  lock.unlock();
  FetchTop(board, season, version);
}

// Single flight per board: one fetch of its top 100 at a time. A fetch
// started at version v answers every reader that arrived at version <= v;
// readers that arrived after a newer change get the next fetch.
void RedisLeaderboardStore::FetchTop(const BoardInfo& board, int64_t season, uint64_t version) {
  auto started = std::chrono::steady_clock::now();
  ReadEval(kTopScript,
           {"2", KeyOf(board.id, season, "z"), KeyOf(board.id, season, "p"), "0", std::to_string(kPageLimitMax),
            Name(board.settings.order), Name(board.settings.ranking)},
           [this, board, season, version, started](Result<db::redis::Reply> r) {
             Result<std::shared_ptr<const Cached>> result = Status::Internal("unset");
             if (r.ok() && r->elements.size() >= 2) {
               auto c = std::make_shared<Cached>();
               c->version = version;
               c->fetched = started;  // conservative: the data is at least this fresh
               c->total = ReplyInt(r->elements[0]);
               c->top = Entries(r->elements, 2, 1, ReplyInt(r->elements[1]), board.settings.ranking);
               result = std::shared_ptr<const Cached>(std::move(c));
             } else {
               result = r.ok() ? Status::Internal("unexpected reply from the top script") : r.status();
             }
             std::vector<Waiter> answered;
             uint64_t next_version = 0;
             {
               std::lock_guard lock(cache_mutex_);
               BoardCache& cache = caches_[{board.id, season}];
               if (result.ok()) cache.cached = *result;
               std::vector<Waiter> later;
               for (auto& w : cache.waiters) {
                 if (w.version <= version) {
                   answered.push_back(std::move(w));
                 } else {
                   next_version = std::max(next_version, w.version);
                   later.push_back(std::move(w));
                 }
               }
               cache.waiters.swap(later);
               cache.fetching = !cache.waiters.empty();
             }
             for (auto& w : answered) {
               if (result.ok())
                 w.done(SliceOf(*result, w.offset, w.limit));
               else
                 w.done(result.status());
             }
             if (next_version) {
               BoardInfo latest;
               {
                 std::lock_guard lock(cache_mutex_);
                 latest = caches_[{board.id, season}].board;  // as the newest reader had it
               }
               FetchTop(latest, season, next_version);
             }
           });
}

void RedisLeaderboardStore::Player(const BoardInfo& board, int64_t season, std::string client_id,
                                   std::optional<int64_t> around, std::function<void(Result<PlayerView>)> done) {
  const Ranking ranking = board.settings.ranking;
  client_->Eval(
      kPlayerScript,
      {"3", KeyOf(board.id, season, "z"), KeyOf(board.id, season, "m"), KeyOf(board.id, season, "p"), client_id,
       std::to_string(around.value_or(-1)), Name(board.settings.order), Name(ranking)},
      [client_id, around, ranking, done = std::move(done)](Result<db::redis::Reply> r) {
        if (!r.ok()) return done(r.status());
        if (r->is_nil()) return done(NoSuchPlayer(client_id));
        const auto& e = r->elements;
        PlayerView view{{ReplyInt(e.at(0)), client_id, ParseScore(e.at(1)), ProfileOf(e.at(2))}, std::nullopt};
        if (around) view.around = Entries(e, 5, ReplyInt(e.at(3)), ReplyInt(e.at(4)), ranking);
        done(std::move(view));
      });
}

void RedisLeaderboardStore::Ranks(const BoardInfo& board, int64_t season, std::vector<std::string> client_ids,
                                  std::function<void(Result<std::vector<Entry>>)> done) {
  std::vector<std::string> args = {"3",
                                   KeyOf(board.id, season, "z"),
                                   KeyOf(board.id, season, "m"),
                                   KeyOf(board.id, season, "p"),
                                   Name(board.settings.order),
                                   Name(board.settings.ranking)};
  for (auto& id : client_ids) args.push_back(std::move(id));
  ReadEval(kRanksScript, std::move(args), [done = std::move(done)](Result<db::redis::Reply> r) {
    if (!r.ok()) return done(r.status());
    const auto& e = r->elements;
    std::vector<std::pair<int64_t, Entry>> placed;
    for (size_t i = 0; i + 4 < e.size(); i += 5)
      placed.push_back(
          {ReplyInt(e[i + 1]), Entry{ReplyInt(e[i + 2]), e[i].str, ParseScore(e[i + 3]), ProfileOf(e[i + 4])}});
    std::sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Entry> entries;
    for (auto& [position, entry] : placed) entries.push_back(std::move(entry));
    done(std::move(entries));
  });
}

Result<int64_t> RedisLeaderboardStore::Count(const std::string& board_id, int64_t season) {
  auto r = client_->CommandSync({"ZCARD", KeyOf(board_id, season, "z")});
  if (!r.ok()) return r.status();
  return r->integer;
}

Status RedisLeaderboardStore::Clear() {
  // `default`'s players only, as the embedded store's --replace: every other
  // board, the sequence counter and the settings stay. One script; its
  // PUBLISH makes running instances drop their cached pages.
  auto r = Await<Result<db::redis::Reply>>([&](auto done) {
    client_->Eval(kClearScript, {"0", std::string(kDefaultBoard), kChannel}, done);
  });
  InvalidateAll();
  Wrote();
  return r.status();
}

}  // namespace hotrow::leaderboard
