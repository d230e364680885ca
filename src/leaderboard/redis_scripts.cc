// The Lua scripts of the Redis leaderboard store (redis_store.cc): each
// change is one script, atomic in Redis; what each takes (KEYS, ARGV) and
// answers is written above it.
#include "leaderboard/redis_scripts.h"

#include <string>

namespace hotrow::leaderboard::lua {

namespace {

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
-- Appends positions [from, to] of zset z in rank order to out as member,
-- score, profile (of hash p); on a shared board sets out[rank_at] to the
-- first one's rank.
local function append_page(out, z, p, from, to, desc, shared, rank_at)
  local page
  if desc then page = redis.call('ZREVRANGE', z, from, to, 'WITHSCORES')
  else page = redis.call('ZRANGE', z, from, to, 'WITHSCORES') end
  if shared and #page > 0 then out[rank_at] = better_than(z, tonumber(page[2]), desc) + 1 end
  for i = 1, #page, 2 do
    out[#out + 1] = page[i]
    out[#out + 1] = page[i + 1]
    out[#out + 1] = profile_of(p, page[i])
  end
end
)lua";

std::string WithHelpers(std::string_view body) { return std::string(kLuaHelpers) + std::string(body); }

}  // namespace

// Step 1 of the key layout (v0.7.0), contract: `default`, and v0.1.0's keys
// renamed to its season 1. Safe to run again over a half-done run: each
// RENAME happens only while its old key exists.
const std::string_view kBoardsStep = R"lua(
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
  append_page(out, KEYS[1], KEYS[2], offset, offset + limit - 1, desc, ARGV[4] == 'shared', 2)
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
  out[4] = from + 1
  out[5] = from + 1
  append_page(out, KEYS[1], KEYS[3], from, position + k, desc, ARGV[4] == 'shared', 5)
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

// Deletes every player of one board, of every season, and nothing else
// (seed --replace), at once: a post that runs beside it lands before it
// (deleted) or after it (kept, and in `written`). ARGV: board id, channel.
const db::redis::Script kClearScript{R"lua(
local prefix = 'hotrow:lb:b:' .. ARGV[1] .. ':'
for _, s in ipairs(redis.call('SMEMBERS', prefix .. 'written')) do
  redis.call('DEL', prefix .. s .. ':z', prefix .. s .. ':m', prefix .. s .. ':p')
end
redis.call('DEL', prefix .. 'written')
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
)lua"};

}  // namespace hotrow::leaderboard::lua
