#include "leaderboard/redis_store.h"

#include <cstdlib>

#include "ops/log.h"

namespace hotrow::leaderboard {

namespace {

constexpr const char* kZset = "hotrow:lb:z";
constexpr const char* kMembers = "hotrow:lb:m";
constexpr const char* kSeq = "hotrow:lb:seq";
constexpr const char* kChannel = "hotrow:lb:changed";
constexpr size_t kSeqDigits = 16;  // width of the inverted sequence prefix

// KEYS: zset, members, seq. ARGV: client, score, mode, channel.
// Returns {score, rank, changed}.
const db::redis::Script kPostScript{R"lua(
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then
  local oldscore = redis.call('ZSCORE', KEYS[1], old)
  local o, n = tonumber(oldscore), tonumber(ARGV[2])
  if o == n or (ARGV[3] == 'best' and o > n) then
    return {oldscore, redis.call('ZREVRANK', KEYS[1], old) + 1, 0}
  end
  redis.call('ZREM', KEYS[1], old)
end
local seq = redis.call('INCR', KEYS[3])
local member = string.format('%016d', 9007199254740991 - seq) .. ARGV[1]
redis.call('ZADD', KEYS[1], ARGV[2], member)
redis.call('HSET', KEYS[2], ARGV[1], member)
redis.call('PUBLISH', ARGV[4], ARGV[1])
return {ARGV[2], redis.call('ZREVRANK', KEYS[1], member) + 1, 1}
)lua"};

// KEYS: zset, members. ARGV: client, channel. Returns 1 if removed.
const db::redis::Script kRemoveScript{R"lua(
local old = redis.call('HGET', KEYS[2], ARGV[1])
if not old then return 0 end
redis.call('ZREM', KEYS[1], old)
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
)lua"};

// KEYS: zset. ARGV: offset, limit. Returns {total, member, score, ...}.
const db::redis::Script kTopScript{R"lua(
local total = redis.call('ZCARD', KEYS[1])
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {total}
if offset < total then
  local page = redis.call('ZREVRANGE', KEYS[1], offset, offset + limit - 1, 'WITHSCORES')
  for i = 1, #page do out[#out + 1] = page[i] end
end
return out
)lua"};

// KEYS: zset, members. ARGV: client, around (-1: none).
// Returns nil, or {rank, score, first_rank, member, score, ...}.
const db::redis::Script kPlayerScript{R"lua(
local member = redis.call('HGET', KEYS[2], ARGV[1])
if not member then return nil end
local rank = redis.call('ZREVRANK', KEYS[1], member)
local score = redis.call('ZSCORE', KEYS[1], member)
local out = {rank + 1, score}
local k = tonumber(ARGV[2])
if k >= 0 then
  local from = math.max(0, rank - k)
  out[3] = from + 1
  local page = redis.call('ZREVRANGE', KEYS[1], from, rank + k, 'WITHSCORES')
  for i = 1, #page do out[#out + 1] = page[i] end
end
return out
)lua"};

// Redis replies with scores as text ("666", "9007199254740991"); scores
// are integers below 2^53, which a double holds exactly.
int64_t ParseScore(const db::redis::Reply& r) { return static_cast<int64_t>(std::strtod(r.str.c_str(), nullptr)); }

int64_t ReplyInt(const db::redis::Reply& r) {
  return r.type == db::redis::Reply::Type::kInteger ? r.integer : std::strtoll(r.str.c_str(), nullptr, 10);
}

std::string ClientOf(const std::string& member) {
  return member.size() > kSeqDigits ? member.substr(kSeqDigits) : member;
}

// Entries from a flat [member, score, member, score, ...] list starting at
// elements[first], ranked from first_rank.
std::vector<Entry> Entries(const std::vector<db::redis::Reply>& elements, size_t first, int64_t first_rank) {
  std::vector<Entry> out;
  for (size_t i = first; i + 1 < elements.size(); i += 2)
    out.push_back(
        {first_rank + static_cast<int64_t>((i - first) / 2), ClientOf(elements[i].str), ParseScore(elements[i + 1])});
  return out;
}

}  // namespace

Result<std::unique_ptr<RedisLeaderboardStore>> RedisLeaderboardStore::Open(const std::string& url,
                                                                           db::redis::Options options) {
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
  // The key layout above is the one every release so far wrote; the
  // leaderboard's next layout adds its steps here.
  if (Status s = db::redis::Migrate(*store->client_, {}); !s.ok()) return s;
  auto* raw = store.get();
  auto subscriber = db::redis::Subscriber::Start(
      url, kChannel, [raw](const std::string&) { raw->Invalidate(); }, [raw] { raw->Invalidate(); });
  if (!subscriber.ok()) return subscriber.status();
  store->subscriber_ = std::move(subscriber).value();
  return store;
}

RedisLeaderboardStore::~RedisLeaderboardStore() { Stop(); }

void RedisLeaderboardStore::Stop() {
  subscriber_.reset();
  if (client_) client_->Stop();
}

void RedisLeaderboardStore::PostScore(std::string client_id, int64_t score, ScoreMode mode,
                                      std::function<void(Result<StoredScore>)> done) {
  client_->Eval(kPostScript,
                {"3", kZset, kMembers, kSeq, client_id, std::to_string(score),
                 mode == ScoreMode::kBest ? "best" : "replace", kChannel},
                [this, done = std::move(done)](Result<db::redis::Reply> r) {
                  if (!r.ok()) return done(r.status());
                  const auto& e = r->elements;
                  if (e.size() != 3) return done(Status::Internal("unexpected reply from the score script"));
                  bool changed = ReplyInt(e[2]) == 1;
                  if (changed) Invalidate();  // before answering: our next read must see it
                  done(StoredScore{.score = ParseScore(e[0]), .changed = changed, .rank = ReplyInt(e[1])});
                });
}

void RedisLeaderboardStore::Remove(std::string client_id, std::function<void(Status)> done) {
  client_->Eval(kRemoveScript, {"2", kZset, kMembers, client_id, kChannel},
                [this, client_id, done = std::move(done)](Result<db::redis::Reply> r) {
                  if (!r.ok()) return done(r.status());
                  if (r->integer != 1) return done(NoSuchPlayer(client_id));
                  Invalidate();
                  done(Status::Ok());
                });
}

namespace {
Page SliceOf(const std::shared_ptr<const RedisLeaderboardStore::CachedView>& c, int64_t offset, int64_t limit) {
  return Page::Slice(std::shared_ptr<const std::vector<Entry>>(c, &c->top), offset, limit, c->total);
}
}  // namespace

void RedisLeaderboardStore::Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) {
  if (offset + limit > kPageLimitMax) {
    client_->Eval(kTopScript, {"1", kZset, std::to_string(offset), std::to_string(limit)},
                  [offset, done = std::move(done)](Result<db::redis::Reply> r) {
                    if (!r.ok()) return done(r.status());
                    done(Page::Own(Entries(r->elements, 1, offset + 1), ReplyInt(r->elements.at(0))));
                  });
    return;
  }
  uint64_t version = version_.load(std::memory_order_acquire);
  std::unique_lock lock(cache_mutex_);
  if (cache_ && cache_->version >= version &&
      std::chrono::steady_clock::now() - cache_->fetched < std::chrono::milliseconds(kCacheAgeMaxMs)) {
    auto cached = cache_;
    lock.unlock();
    return done(SliceOf(cached, offset, limit));
  }
  waiters_.push_back({version, offset, limit, std::move(done)});
  if (fetching_) return;  // the fetch in flight (or the one after it) answers
  fetching_ = true;
  lock.unlock();
  FetchTop(version);
}

// Single flight: one fetch of the top 100 at a time. A fetch started at
// version v answers every reader that arrived at version <= v; readers
// that arrived after a newer change get the next fetch.
void RedisLeaderboardStore::FetchTop(uint64_t version) {
  auto started = std::chrono::steady_clock::now();
  client_->Eval(kTopScript, {"1", kZset, "0", std::to_string(kPageLimitMax)},
                [this, version, started](Result<db::redis::Reply> r) {
                  Result<std::shared_ptr<const Cached>> result = Status::Internal("unset");
                  if (r.ok() && !r->elements.empty()) {
                    auto c = std::make_shared<Cached>();
                    c->version = version;
                    c->fetched = started;  // conservative: the data is at least this fresh
                    c->total = ReplyInt(r->elements[0]);
                    c->top = Entries(r->elements, 1, 1);
                    result = std::shared_ptr<const Cached>(std::move(c));
                  } else {
                    result = r.ok() ? Status::Internal("unexpected reply from the top script") : r.status();
                  }
                  std::vector<Waiter> answered;
                  uint64_t next_version = 0;
                  {
                    std::lock_guard lock(cache_mutex_);
                    if (result.ok()) cache_ = *result;
                    std::vector<Waiter> later;
                    for (auto& w : waiters_) {
                      if (w.version <= version) {
                        answered.push_back(std::move(w));
                      } else {
                        next_version = std::max(next_version, w.version);
                        later.push_back(std::move(w));
                      }
                    }
                    waiters_.swap(later);
                    fetching_ = !waiters_.empty();
                  }
                  for (auto& w : answered) {
                    if (result.ok())
                      w.done(SliceOf(*result, w.offset, w.limit));
                    else
                      w.done(result.status());
                  }
                  if (next_version) FetchTop(next_version);
                });
}

void RedisLeaderboardStore::Player(std::string client_id, std::optional<int64_t> around,
                                   std::function<void(Result<PlayerView>)> done) {
  client_->Eval(kPlayerScript, {"2", kZset, kMembers, client_id, std::to_string(around.value_or(-1))},
                [client_id, around, done = std::move(done)](Result<db::redis::Reply> r) {
                  if (!r.ok()) return done(r.status());
                  if (r->is_nil()) return done(NoSuchPlayer(client_id));
                  const auto& e = r->elements;
                  PlayerView view{{ReplyInt(e.at(0)), client_id, ParseScore(e.at(1))}, std::nullopt};
                  if (around) view.around = Entries(e, 3, ReplyInt(e.at(2)));
                  done(std::move(view));
                });
}

Result<int64_t> RedisLeaderboardStore::Count() {
  auto r = client_->CommandSync({"ZCARD", kZset});
  if (!r.ok()) return r.status();
  return r->integer;
}

Status RedisLeaderboardStore::Clear() {
  auto r = client_->CommandSync({"DEL", kZset, kMembers, kSeq});
  Invalidate();
  return r.status();
}

}  // namespace hotrow::leaderboard
