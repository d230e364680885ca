#include "leaderboard/redis_store.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "ops/log.h"

namespace hotrow::leaderboard {

namespace {

constexpr const char* kBoards = "hotrow:lb:boards";
constexpr const char* kSeq = "hotrow:lb:seq";
constexpr const char* kPurged = "hotrow:lb:purged";  // board -> the season up to which its keys are deleted
constexpr const char* kChannel = "hotrow:lb:changed";
constexpr size_t kSeqDigits = 16;  // width of the sequence prefix

std::string KeyOf(std::string_view board_id, int64_t season, const char* what) {
  return "hotrow:lb:b:" + std::string(board_id) + ":" + std::to_string(season) + ":" + what;
}

// The scripts share these helpers: exact decimal text of a score (Lua's
// numbers are doubles, exact below 2^53; tostring would print 14 digits),
// and the direction of a board.
constexpr std::string_view kLuaHelpers = R"lua(
local function num(x) return string.format('%.17g', x) end
local function rank_of(z, member, desc)
  if desc then return redis.call('ZREVRANK', z, member) end
  return redis.call('ZRANK', z, member)
end
local function better_than(z, score, desc)
  if desc then return redis.call('ZCOUNT', z, '(' .. num(score), '+inf') end
  return redis.call('ZCOUNT', z, '-inf', '(' .. num(score))
end
-- A profile as kept in a season's :p hash: "<name bytes, -1: none> <name><metadata>".
local function profile_parts(p)
  if not p then return nil, nil end
  local len, rest = string.match(p, '^(%-?%d+) (.*)$')
  len = tonumber(len)
  local name, meta = nil, rest
  if len >= 0 then name, meta = string.sub(rest, 1, len), string.sub(rest, len + 1) end
  if meta == '' then meta = nil end
  return name, meta
end
local function profile_text(name, meta)
  return (name and #name or -1) .. ' ' .. (name or '') .. (meta or '')
end
-- The profile of a zset member (16 digits, then the client id), or false.
local function profile_of(p, member)
  return redis.call('HGET', p, string.sub(member, 17)) or false
end
)lua";

std::string WithHelpers(std::string_view body) { return std::string(kLuaHelpers) + std::string(body); }

// Step 1 of the key layout (v0.7.0), contract: `default`, and v0.1.0's keys
// renamed to its season 1. Safe to run again over a half-done run: each
// RENAME happens only while its old key exists.
constexpr std::string_view kBoardsStep = R"lua(
if redis.call('HEXISTS', 'hotrow:lb:boards', 'default') == 0 then
  local t = redis.call('TIME')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('HSET', 'hotrow:lb:boards', 'default', 'desc replace none UTC unique none 12 ' .. now .. ' 0 1 ' .. now .. ' 0')
end
if redis.call('EXISTS', 'hotrow:lb:z') == 1 then redis.call('RENAME', 'hotrow:lb:z', 'hotrow:lb:b:default:1:z') end
if redis.call('EXISTS', 'hotrow:lb:m') == 1 then redis.call('RENAME', 'hotrow:lb:m', 'hotrow:lb:b:default:1:m') end
redis.call('SADD', 'hotrow:lb:b:default:written', '1')
)lua";

// KEYS: boards, zset, members, seq. ARGV: board, client, score,
// operator ('' for the board's own), channel, season, its start, its next
// ('' for none). Decides with the board's settings as stored (the hash's
// "<order> <operator> <reset> <zone> <ranking> <auth> <keep> <created>
// <every> <epoch season> <epoch> <pre-epoch start>") in the season given,
// when TIME is inside it and the instance computed it with the board's
// schedule (ARGV[9], ScheduleFingerprint). KEYS[5] is the post's
// Idempotency-Key's key (used when ARGV[14] is not ''), KEYS[7] its
// signature's (ARGV[15]), ARGV[10] the post's fingerprint: a kept
// answer ("<created> <score> <member> <season> <fingerprint>", expiring
// after kIdempotencyKeptUs) of this board incarnation is returned as
// {'replay', score, the rank that entry has now, season, created, order,
// ranking}, with another fingerprint as {'mismatch'}, before the schedule
// and the season are looked at. KEYS[6] is the season's profiles hash;
// ARGV[12] and ARGV[13] the display name and metadata, each '=' .. value
// when given ('' when not: the stored one stays). Returns {'ok', score,
// rank, changed, created, order, ranking, profile changed}, {'noboard'},
// {'range', the stored score}, {'season', TIME in microseconds} or
// {'stale'}.
const db::redis::Script kPostScript{WithHelpers(R"lua(
local settings = redis.call('HGET', KEYS[1], ARGV[1])
if not settings then return {'noboard'} end
local f = {}
for w in string.gmatch(settings, '%S+') do f[#f + 1] = w end
local order, op, ranking, created = f[1], f[2], f[5], f[8]
local epoch = f[11]
if epoch == '0' then epoch = created end
local stored_keys = {}
if ARGV[14] ~= '' then stored_keys[#stored_keys + 1] = KEYS[5] end
if ARGV[15] ~= '' then stored_keys[#stored_keys + 1] = KEYS[7] end
for _, stored_key in ipairs(stored_keys) do
  local kept = redis.call('GET', stored_key)
  if kept then
    local kc, ks, km, kn, kf = string.match(kept, '^(%S+) (%S+) (%S+) (%S+) (.*)$')
    if kc == created then
      if kf ~= ARGV[10] then return {'mismatch'} end
      -- The rank the kept entry has now (as a Board's RankOf), read only:
      -- when it is no longer there, the entries before where it would be
      -- (equal scores: the members after it on a desc board, before it on
      -- an asc one).
      local z = 'hotrow:lb:b:' .. ARGV[1] .. ':' .. kn .. ':z'
      local desc = order == 'desc'
      local rank = better_than(z, tonumber(ks), desc) + 1
      if ranking ~= 'shared' then
        if redis.call('ZSCORE', z, km) then
          rank = rank_of(z, km, desc) + 1
        else
          for _, m in ipairs(redis.call('ZRANGEBYSCORE', z, ks, ks)) do
            if (desc and m > km) or (not desc and m < km) then rank = rank + 1 end
          end
        end
      end
      -- The player's entry now, when it is another and counts before the
      -- kept one, is not another player (Board::RankOfPast).
      local cur = redis.call('HGET', 'hotrow:lb:b:' .. ARGV[1] .. ':' .. kn .. ':m', ARGV[2])
      if cur and cur ~= km then
        local cs, s = tonumber(redis.call('ZSCORE', z, cur)), tonumber(ks)
        local better = (desc and cs > s) or (not desc and cs < s)
        local tie_before = cs == s and ((desc and cur > km) or (not desc and cur < km))
        if better or (ranking ~= 'shared' and tie_before) then rank = rank - 1 end
      end
      return {'replay', ks, rank, tonumber(kn), created, order, ranking}
    end
  end
end
local nname, nmeta, pchanged = nil, nil, false
local function answer(score, member, rank, changed)
  for _, stored_key in ipairs(stored_keys) do
    redis.call('SET', stored_key, created .. ' ' .. score .. ' ' .. member .. ' ' .. ARGV[6] .. ' ' .. ARGV[10], 'PX',
               ARGV[11])
  end
  if pchanged then
    redis.call('HSET', KEYS[6], ARGV[2], profile_text(nname, nmeta))
    if changed == 0 then redis.call('PUBLISH', ARGV[5], ARGV[1]) end  -- (a changed score published already)
  end
  return {'ok', score, rank, changed, created, order, ranking, pchanged and 1 or 0}
end
if ARGV[9] ~= f[3] .. ' ' .. f[4] .. ' ' .. f[9] .. ' ' .. f[10] .. ' ' .. epoch then return {'stale'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now < tonumber(ARGV[7]) or (ARGV[8] ~= '' and now >= tonumber(ARGV[8])) then return {'season', num(now)} end
local prefix = 'hotrow:lb:b:' .. ARGV[1] .. ':'
if ARGV[4] ~= '' then op = ARGV[4] end
local pname, pmeta = profile_parts(redis.call('HGET', KEYS[6], ARGV[2]))
nname, nmeta = pname, pmeta
if ARGV[12] ~= '' then nname = string.sub(ARGV[12], 2) end
if ARGV[13] ~= '' then nmeta = string.sub(ARGV[13], 2) end
pchanged = nname ~= pname or nmeta ~= pmeta
local desc = order == 'desc'
local old = redis.call('HGET', KEYS[3], ARGV[2])
local n = tonumber(ARGV[3])
local v = n
if old then
  local o = tonumber(redis.call('ZSCORE', KEYS[2], old))
  if op == 'best' then
    if (desc and o >= n) or (not desc and o <= n) then v = o end
  elseif op == 'increment' then
    v = o + n
    if v < -9007199254740991 or v > 9007199254740991 then return {'range', num(o)} end
  end
  if v == o then
    local rank = rank_of(KEYS[2], old, desc) + 1
    if ranking == 'shared' then rank = better_than(KEYS[2], o, desc) + 1 end
    return answer(num(o), old, rank, 0)
  end
  redis.call('ZREM', KEYS[2], old)
end
local seq = redis.call('INCR', KEYS[4])
local digits = seq
if desc then digits = 9007199254740991 - seq end
local member = string.format('%016d', digits) .. ARGV[2]
redis.call('ZADD', KEYS[2], num(v), member)
redis.call('HSET', KEYS[3], ARGV[2], member)
redis.call('SADD', prefix .. 'written', ARGV[6])
redis.call('PUBLISH', ARGV[5], ARGV[1])
local rank = rank_of(KEYS[2], member, desc) + 1
if ranking == 'shared' then rank = better_than(KEYS[2], v, desc) + 1 end
return answer(num(v), member, rank, 1)
)lua")};

// KEYS: boards, purged. ARGV: board, created_us, through season. Deletes
// the board's seasons through that one (their keys by UNLINK, whose memory
// Redis frees off its main thread) and their recorded starts, once, if the
// board is still that incarnation. Returns 1, or 0 when there was nothing
// to do.
const db::redis::Script kPurgeScript{R"lua(
local settings = redis.call('HGET', KEYS[1], ARGV[1])
if not settings then return 0 end
local n, created = 0, nil
for w in string.gmatch(settings, '%S+') do
  n = n + 1
  if n == 8 then created = w end
end
local through = tonumber(ARGV[3])
if created ~= ARGV[2] or through <= (tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0) then return 0 end
local prefix = 'hotrow:lb:b:' .. ARGV[1] .. ':'
for _, s in ipairs(redis.call('SMEMBERS', prefix .. 'written')) do
  if tonumber(s) <= through then
    redis.call('UNLINK', prefix .. s .. ':z', prefix .. s .. ':m', prefix .. s .. ':p')
    redis.call('SREM', prefix .. 'written', s)
  end
end
for _, s in ipairs(redis.call('HKEYS', prefix .. 'seasons')) do
  if tonumber(s) <= through then redis.call('HDEL', prefix .. 'seasons', s) end
end
redis.call('HSET', KEYS[2], ARGV[1], through)
return 1
)lua"};

// KEYS: boards, zset, members, profiles. ARGV: board, client, channel.
// Returns the board's creation time (as text), 0 for no such player, -1
// for no board.
const db::redis::Script kRemoveScript{R"lua(
local settings = redis.call('HGET', KEYS[1], ARGV[1])
if not settings then return -1 end
local old = redis.call('HGET', KEYS[3], ARGV[2])
if not old then return 0 end
redis.call('ZREM', KEYS[2], old)
redis.call('HDEL', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
local n = 0
for w in string.gmatch(settings, '%S+') do
  n = n + 1
  if n == 8 then return w end
end
return -1
)lua"};

// KEYS: boards, purged. ARGV: board, settings, channel, mode (create |
// update | delete), created_us (update or delete: the board's, which must
// match), then for an update the settings it was made from (which must
// still be the board's) and the (season, start) pairs of its history.
// Returns 1, 0 (create: taken; update or delete: no such board) or 2
// (update: the board changed meanwhile). A
// delete takes every season's keys with it (the `written` set).
const db::redis::Script kBoardScript{R"lua(
local current = redis.call('HGET', KEYS[1], ARGV[1])
local function created(s)
  local n = 0
  for w in string.gmatch(s, '%S+') do
    n = n + 1
    if n == 8 then return w end
  end
end
local prefix = 'hotrow:lb:b:' .. ARGV[1] .. ':'
if ARGV[4] == 'create' then
  if current then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
elseif not current or created(current) ~= ARGV[5] then
  return 0
elseif ARGV[4] == 'update' then
  if current ~= ARGV[6] then return 2 end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  for i = 7, #ARGV - 1, 2 do redis.call('HSETNX', prefix .. 'seasons', ARGV[i], ARGV[i + 1]) end
else
  for _, s in ipairs(redis.call('SMEMBERS', prefix .. 'written')) do
    redis.call('DEL', prefix .. s .. ':z', prefix .. s .. ':m', prefix .. s .. ':p')
  end
  redis.call('DEL', prefix .. 'written', prefix .. 'seasons')
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('PUBLISH', ARGV[3], 'board ' .. ARGV[1])
return 1
)lua"};

// KEYS: zset, profiles. ARGV: offset, limit, order, ranking. Returns
// {total, first_rank, member, score, profile or nil, ...}; first_rank is
// the first entry's (shared ranks: 1 + the number of strictly better
// scores).
const db::redis::Script kTopScript{WithHelpers(R"lua(
local total = redis.call('ZCARD', KEYS[1])
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local desc = ARGV[3] == 'desc'
local out = {total, offset + 1}
if offset < total then
  local page
  if desc then page = redis.call('ZREVRANGE', KEYS[1], offset, offset + limit - 1, 'WITHSCORES')
  else page = redis.call('ZRANGE', KEYS[1], offset, offset + limit - 1, 'WITHSCORES') end
  if ARGV[4] == 'shared' and #page > 0 then out[2] = better_than(KEYS[1], tonumber(page[2]), desc) + 1 end
  for i = 1, #page, 2 do
    out[#out + 1] = page[i]
    out[#out + 1] = page[i + 1]
    out[#out + 1] = profile_of(KEYS[2], page[i])
  end
end
return out
)lua")};

// KEYS: zset, members, profiles. ARGV: client, around (-1: none), order,
// ranking. Returns nil, or {rank, score, profile or nil, first_position +
// 1, first_rank, member, score, profile or nil, ...}.
const db::redis::Script kPlayerScript{WithHelpers(R"lua(
local member = redis.call('HGET', KEYS[2], ARGV[1])
if not member then return nil end
local desc = ARGV[3] == 'desc'
local position = rank_of(KEYS[1], member, desc)
local score = redis.call('ZSCORE', KEYS[1], member)
local rank = position + 1
if ARGV[4] == 'shared' then rank = better_than(KEYS[1], tonumber(score), desc) + 1 end
local out = {rank, score, profile_of(KEYS[3], member)}
local k = tonumber(ARGV[2])
if k >= 0 then
  local from = math.max(0, position - k)
  local page
  if desc then page = redis.call('ZREVRANGE', KEYS[1], from, position + k, 'WITHSCORES')
  else page = redis.call('ZRANGE', KEYS[1], from, position + k, 'WITHSCORES') end
  out[4] = from + 1
  out[5] = from + 1
  if ARGV[4] == 'shared' then out[5] = better_than(KEYS[1], tonumber(page[2]), desc) + 1 end
  for i = 1, #page, 2 do
    out[#out + 1] = page[i]
    out[#out + 1] = page[i + 1]
    out[#out + 1] = profile_of(KEYS[3], page[i])
  end
end
return out
)lua")};

// KEYS: zset, members, profiles. ARGV: order, ranking, then the client
// ids. Returns {client, position, rank, score, profile or nil, ...} for
// those with a score.
const db::redis::Script kRanksScript{WithHelpers(R"lua(
local desc = ARGV[1] == 'desc'
local out = {}
for i = 3, #ARGV do
  local member = redis.call('HGET', KEYS[2], ARGV[i])
  if member then
    local position = rank_of(KEYS[1], member, desc)
    local score = redis.call('ZSCORE', KEYS[1], member)
    local rank = position + 1
    if ARGV[2] == 'shared' then rank = better_than(KEYS[1], tonumber(score), desc) + 1 end
    out[#out + 1] = ARGV[i]
    out[#out + 1] = position
    out[#out + 1] = rank
    out[#out + 1] = score
    out[#out + 1] = profile_of(KEYS[3], member)
  end
end
return out
)lua")};

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
  return store;
}

RedisLeaderboardStore::~RedisLeaderboardStore() { Stop(); }

void RedisLeaderboardStore::Stop() {
  subscriber_.reset();
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
  client_->Eval(kBoardScript, std::move(args), [id = board.id, done = std::move(done)](Result<db::redis::Reply> r) {
    if (!r.ok()) return done(r.status());
    done(r->integer == 1 ? Status::Ok() : r->integer == 2 ? BoardChangedMeanwhile(id) : NoSuchBoard(id));
  });
}

void RedisLeaderboardStore::DeleteBoard(BoardInfo board, std::function<void(Status)> done) {
  client_->Eval(kBoardScript,
                {"2", kBoards, kPurged, board.id, "", kChannel, "delete", std::to_string(board.created_us)},
                [this, board_id = board.id, done = std::move(done)](Result<db::redis::Reply> r) {
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
        if (!r.ok()) return done(r.status());
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
        // Before answering: our next read must see it.
        if (changed || ReplyInt(e[7]) == 1) Invalidate(board_id);
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
                [done = std::move(done)](Result<db::redis::Reply> r) { done(r.status()); });
}

void RedisLeaderboardStore::Remove(std::string board_id, int64_t season, std::string client_id,
                                   std::function<void(Result<int64_t>)> done) {
  client_->Eval(kRemoveScript,
                {"4", kBoards, KeyOf(board_id, season, "z"), KeyOf(board_id, season, "m"), KeyOf(board_id, season, "p"),
                 board_id, client_id, kChannel},
                [this, board_id, client_id, done = std::move(done)](Result<db::redis::Reply> r) {
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

void RedisLeaderboardStore::Top(const BoardInfo& board, int64_t season, int64_t offset, int64_t limit,
                                Callback<Result<Page>> done) {
  const Ranking ranking = board.settings.ranking;
  if (offset + limit > kPageLimitMax) {
    client_->Eval(kTopScript,
                  {"2", KeyOf(board.id, season, "z"), KeyOf(board.id, season, "p"), std::to_string(offset),
                   std::to_string(limit), Name(board.settings.order), Name(ranking)},
                  [offset, ranking, done = std::move(done)](Result<db::redis::Reply> r) {
                    if (!r.ok()) return done(r.status());
                    const auto& e = r->elements;
                    done(Page::Own(Entries(e, 2, offset + 1, ReplyInt(e.at(1)), ranking), ReplyInt(e.at(0))));
                  });
    return;
  }
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
      std::chrono::steady_clock::now() - cache.cached->fetched < std::chrono::milliseconds(kCacheAgeMaxMs)) {
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
  client_->Eval(kTopScript,
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
  client_->Eval(kRanksScript, std::move(args), [done = std::move(done)](Result<db::redis::Reply> r) {
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

Result<int64_t> RedisLeaderboardStore::Count(const std::string& board_id) {
  auto r = client_->CommandSync({"ZCARD", KeyOf(board_id, kFirstSeason, "z")});
  if (!r.ok()) return r.status();
  return r->integer;
}

Status RedisLeaderboardStore::Clear() {
  auto boards = client_->CommandSync({"HKEYS", kBoards});
  if (!boards.ok()) return boards.status();
  for (const auto& id : boards->elements) {
    std::string prefix = "hotrow:lb:b:" + id.str + ":";
    auto seasons = client_->CommandSync({"SMEMBERS", prefix + "written"});
    if (!seasons.ok()) return seasons.status();
    for (const auto& s : seasons->elements) {
      auto r = client_->CommandSync({"DEL", prefix + s.str + ":z", prefix + s.str + ":m", prefix + s.str + ":p"});
      if (!r.ok()) return r.status();
    }
    auto r = client_->CommandSync({"DEL", prefix + "written", prefix + "seasons"});
    if (!r.ok()) return r.status();
    if (id.str != kDefaultBoard) {
      auto h = client_->CommandSync({"HDEL", kBoards, id.str});
      if (!h.ok()) return h.status();
    }
  }
  auto r = client_->CommandSync({"DEL", kSeq, kPurged});
  InvalidateAll();
  return r.status();
}

}  // namespace hotrow::leaderboard
