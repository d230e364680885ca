#include "db/redis_replicas.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "base/crypto.h"
#include "db/store_url.h"
#include "ops/log.h"

namespace hotrow::db::redis {

namespace {

// Sets the heartbeat to "<value> <epoch>" and answers it (header). The
// epoch starts with the master's run_id, new at each start of the server:
// a copy of the data on another server (a restored backup, a promoted
// replica), or a master restarted, starts an epoch of its own at its first
// heartbeat, and so does a key it cannot read (lost, or text of another
// kind), with ARGV[1] after the run_id. (Microseconds since 1970 are below
// 2^53: exact in Lua's numbers.)
const Script kHeartbeatScript(R"(
local info = redis.pcall('INFO', 'server')
local run = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or 'unknown'
local cur = redis.call('GET', KEYS[1])
local last, epoch = 0, nil
if cur then
  local sp = string.find(cur, ' ', 1, true)
  local v = sp and tonumber(string.sub(cur, 1, sp - 1))
  local e = sp and string.sub(cur, sp + 1)
  if v and e and string.sub(e, 1, #run + 1) == run .. ':' then last, epoch = v, e end
end
if not epoch then epoch = run .. ':' .. ARGV[1] end
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
if us <= last then us = last + 1 end
local value = string.format('%d', us) .. ' ' .. epoch
redis.call('SET', KEYS[1], value)
return value
)");

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "<value> <epoch>"; nullopt for anything else.
std::optional<std::pair<int64_t, std::string>> ParseHeartbeat(const Reply& r) {
  if (r.type != Reply::Type::kString) return std::nullopt;
  size_t sp = r.str.find(' ');
  if (sp == std::string::npos || sp + 1 >= r.str.size()) return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(r.str.c_str(), &end, 10);
  if (end != r.str.c_str() + sp || v <= 0) return std::nullopt;
  return std::pair<int64_t, std::string>{v, r.str.substr(sp + 1)};
}

}  // namespace

ReplicaSet::ReplicaSet(Client& master, ReplicaOptions options)
    : master_(master), options_(std::move(options)), token_(RandomToken(8)) {}

Result<std::unique_ptr<ReplicaSet>> ReplicaSet::Start(Client& master, ReplicaOptions options) {
  std::unique_ptr<ReplicaSet> set(new ReplicaSet(master, std::move(options)));
  auto& registry = metrics::Registry::Default();
  const char* help = "Leaderboard reads sent to each Redis server (master or replica)";
  set->master_reads_ = &registry.GetCounter("hotrow_redis_reads_total", help, {{"server", "master"}});
  set->options_.client.timeout_ms = kReplicaTimeoutMs;
  set->period_ms_ = std::clamp<int64_t>(set->options_.max_lag_ms / 2, 10, kHeartbeatMs);
  std::set<std::string> labels;
  for (const std::string& url : set->options_.urls) {
    auto parsed = ParseUrl(url);
    if (!parsed.ok())
      return Status::InvalidField("redis-replica",
                                  "--redis-replica must look like redis://host:port, not '" + RedactUrl(url) + "'");
    auto r = std::make_unique<Replica>();
    r->url = url;
    r->label = parsed->host + ":" + std::to_string(parsed->port);
    if (!labels.insert(r->label).second)
      return Status::InvalidField("redis-replica", "--redis-replica names " + r->label + " twice");
    r->reads = &registry.GetCounter("hotrow_redis_reads_total", help, {{"server", r->label}});
    Replica* raw = r.get();
    ReplicaSet* self = set.get();
    r->lag_metric = registry.AddCallback(
        "hotrow_redis_replica_lag_seconds",
        "Each Redis replica's lag behind the master (hotrow:hb, on this instance's clock); -1 while unknown", "gauge",
        {{"replica", r->label}}, [self, raw] {
          std::lock_guard lock(self->mutex_);
          auto lag = self->LagUs(*raw, SteadyMicros());
          return lag ? static_cast<double>(*lag) / 1e6 : -1.0;
        });
    auto client = Client::Connect(url, set->options_.client);
    if (client.ok())
      r->client = std::move(*client);
    else
      log::Warn("Redis replica {}: {}; it gets no reads until it answers", r->label, client.status().message());
    set->replicas_.push_back(std::move(r));
  }
  set->task_ = std::make_unique<PeriodicTask>(std::chrono::milliseconds(0), std::chrono::milliseconds(set->period_ms_),
                                              [raw = set.get()] { raw->Tick(); });
  // A replica that was down at start: a connect may block, so not on the
  // heartbeat's thread.
  set->connect_task_ = std::make_unique<PeriodicTask>(std::chrono::milliseconds(1000), std::chrono::milliseconds(1000),
                                                      [raw = set.get()] {
                                                        for (auto& r : raw->replicas_) {
                                                          {
                                                            std::lock_guard lock(raw->mutex_);
                                                            if (r->client || raw->stopped_) continue;
                                                          }
                                                          auto client = Client::Connect(r->url, raw->options_.client);
                                                          if (!client.ok()) continue;
                                                          log::Info("Redis replica {}: connected", r->label);
                                                          std::lock_guard lock(raw->mutex_);
                                                          r->client = std::move(*client);
                                                        }
                                                      });
  return set;
}

ReplicaSet::~ReplicaSet() {
  Stop();
  // The metric callbacks lock mutex_: gone before anything else is.
  for (auto& r : replicas_) r->lag_metric = {};
}

void ReplicaSet::Stop() {
  if (connect_task_) connect_task_->Stop();
  if (task_) task_->Stop();
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  for (auto& r : replicas_) {
    Client* c = nullptr;
    {
      std::lock_guard lock(mutex_);
      c = r->client.get();
    }
    if (c) c->Stop();  // runs the polls still queued, which lock mutex_
  }
}

void ReplicaSet::Tick() { SendHeartbeat(/*on_demand=*/false); }

void ReplicaSet::SendHeartbeat(bool on_demand) {
  uint64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    seq = ++sent_seq_;
  }
  int64_t sent_us = SteadyMicros();
  // The epoch it would start is new each time: a master that lost the key
  // never repeats one whose values a lagging replica may still hold.
  master_.Eval(
      kHeartbeatScript, {"1", kHeartbeatKey, token_ + "." + std::to_string(seq)},
      [this, seq, on_demand, sent_us](Result<Reply> r) { OnHeartbeat(seq, on_demand, sent_us, std::move(r)); });
}

void ReplicaSet::OnHeartbeat(uint64_t seq, bool on_demand, int64_t sent_us, Result<Reply> r) {
  auto beat = r.ok() ? ParseHeartbeat(*r) : std::nullopt;
  bool again = false;
  {
    std::lock_guard lock(mutex_);
    if (on_demand) demand_in_flight_ = false;
    if (!beat) {
      int64_t now = SteadyMicros();
      if (now - last_error_log_us_ > 10'000'000) {
        last_error_log_us_ = now;
        log::Warn("Redis heartbeat ({}) failed: {}; leaderboard reads stay on the master", kHeartbeatKey,
                  r.ok() ? "an answer that is not \"<value> <epoch>\": " + r->str : r.status().message());
      }
    } else {
      auto& [value, epoch] = *beat;
      if (epoch != epoch_ || (!sent_.empty() && value <= sent_.back().value)) {
        // Another epoch (the key was lost, or the master is another):
        // nothing known so far compares with it. A fence set before it
        // needs a heartbeat of the new one.
        epoch_ = epoch;
        sent_.clear();
        for (auto& rep : replicas_) rep->value = rep->fresh_as_of_us = 0;
        // (This heartbeat was sent after the write such a fence was for:
        // that fence answered before it.)
        if (fence_set_for_ == fence_seq_ && fence_seq_ != 0) fence_seq_ = seq;
      }
      sent_.push_back({value, sent_us});
      // Kept while a replica holding it could still count as caught up.
      while (sent_.size() > 1 && sent_.front().sent_us < sent_us - (options_.max_lag_ms + 1000) * 1000)
        sent_.pop_front();
      if (fence_seq_ != 0 && fence_set_for_ != fence_seq_ && seq >= fence_seq_) {
        fence_value_ = value;
        fence_set_for_ = fence_seq_;
      }
    }
    // A write answered while this one was on its way needs a later one.
    if (on_demand && beat && fence_set_for_ != fence_seq_) again = demand_in_flight_ = true;
  }
  if (again) SendHeartbeat(/*on_demand=*/true);
  // Right after our own heartbeat, so that a caught-up replica shows a lag
  // of about a round trip.
  if (beat && options_.split_of == 0)
    for (auto& rep : replicas_) Poll(*rep);
}

void ReplicaSet::Poll(Replica& r) {
  Client* c = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    c = r.client.get();
  }
  if (!c) return;
  c->Command({"GET", kHeartbeatKey}, [this, &r](Result<Reply> reply) {
    auto beat = reply.ok() ? ParseHeartbeat(*reply) : std::nullopt;
    std::lock_guard lock(mutex_);
    if (!beat || beat->second != epoch_) {
      r.value = r.fresh_as_of_us = 0;  // unknown, or another master's history
      return;
    }
    r.value = beat->first;
    // The newest heartbeat of ours it holds.
    auto it =
        std::upper_bound(sent_.begin(), sent_.end(), r.value, [](int64_t v, const Sent& s) { return v < s.value; });
    r.fresh_as_of_us = it == sent_.begin() ? 0 : std::prev(it)->sent_us;
  });
}

std::optional<int64_t> ReplicaSet::LagUs(const Replica& r, int64_t now_us) const {
  if (!r.client || !r.client->connected() || r.fresh_as_of_us == 0) return std::nullopt;
  return std::max<int64_t>(0, now_us - r.fresh_as_of_us);
}

bool ReplicaSet::Usable(const Replica& r, int64_t now_us) const {
  auto lag = LagUs(r, now_us);
  return lag && *lag <= options_.max_lag_ms * 1000 && r.value >= fence_value_;
}

Client& ReplicaSet::ForRead() {
  int64_t fence = 0;
  return Route(&fence);
}

Client& ReplicaSet::Route(int64_t* fence) {
  uint64_t n = next_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  *fence = fence_value_;
  if (!stopped_ && options_.split_of > 0 && !replicas_.empty()) {
    if (static_cast<int64_t>(n % static_cast<uint64_t>(options_.split_of)) < options_.split) {
      for (size_t i = 0; i < replicas_.size(); ++i) {
        Replica& r = *replicas_[(n / static_cast<uint64_t>(options_.split_of) + i) % replicas_.size()];
        if (r.client && r.client->connected()) {
          r.reads->Add();
          return *r.client;
        }
      }
    }
  } else if (!stopped_ && (fence_seq_ == 0 || fence_set_for_ == fence_seq_)) {
    // (A write of ours whose fence is not known yet: only the master has
    // it for sure.)
    int64_t now = SteadyMicros();
    for (size_t i = 0; i < replicas_.size(); ++i) {
      Replica& r = *replicas_[(n + i) % replicas_.size()];
      if (Usable(r, now)) {
        r.reads->Add();
        // Also at least what it held when its lag was measured: one that
        // went back since (moved to an older copy of our master, restarted
        // from an older file) is not read.
        *fence = std::max(*fence, r.value);
        return *r.client;
      }
    }
  }
  master_reads_->Add();
  return master_;
}

void ReplicaSet::Read(const Script& script, std::vector<std::string> args, Client::Callback done) {
  // The fence the choice was made with: a write of ours answered after it
  // does not concern this read.
  int64_t fence = 0;
  Client& c = Route(&fence);
  if (&c == &master_ || options_.split_of > 0) return c.Eval(script, std::move(args), std::move(done));
  // The heartbeat before and after the read, on the same connection: the
  // read counts only if the replica held our epoch at least up to the fence
  // before it, and still held our epoch after it (it did not move to
  // another master in between). Anything else, or a transient failure, is
  // read again on the master, once (reads change nothing).
  // The three answers come on the replica's thread, in order, except a
  // script the replica did not know (NOSCRIPT): resent as EVAL after the
  // rest of the pipeline, its answer comes after the second heartbeat and
  // is not bracketed by it, so it does not count. (A refusal at the queue
  // may answer on this thread: the state is under its own mutex.)
  struct Pending {
    std::mutex mutex;
    int remaining = 3;
    bool after_seen = false, bracketed = false;
    uint64_t generations[3] = {0, 1, 2};  // the connection each answer came on
    std::vector<std::string> args;
    Client::Callback done;
    std::optional<Reply> before, after;
    Result<Reply> result = Status::Internal("no answer");
  };
  auto p = std::make_shared<Pending>();
  p->args = args;
  p->done = std::move(done);
  auto finish = [this, p, &c, &script, fence] {
    // All three on one connection (a reconnect between them could have put
    // the read on another server), in order, and the replica current.
    bool current = p->bracketed && p->generations[0] == p->generations[1] && p->generations[1] == p->generations[2] &&
                   p->before && p->after && Current(*p->before, *p->after, fence);
    if (current && (p->result.ok() || p->result.status().code() != ErrorCode::kUnavailable))
      return p->done(std::move(p->result));
    {
      std::lock_guard lock(mutex_);
      for (auto& r : replicas_)
        if (r->client.get() == &c) r->value = r->fresh_as_of_us = 0;  // no reads until a poll answers
    }
    master_reads_->Add();
    master_.Eval(script, std::move(p->args), std::move(p->done));
  };
  c.Command({"GET", kHeartbeatKey}, [p, finish, &c](Result<Reply> r) {
    std::unique_lock lock(p->mutex);
    p->generations[0] = c.generation();
    if (r.ok()) p->before = std::move(*r);
    if (--p->remaining > 0) return;
    lock.unlock();
    finish();
  });
  c.Eval(script, std::move(args), [p, finish, &c](Result<Reply> r) {
    std::unique_lock lock(p->mutex);
    p->generations[1] = c.generation();
    p->result = std::move(r);
    p->bracketed = !p->after_seen;
    if (--p->remaining > 0) return;
    lock.unlock();
    finish();
  });
  c.Command({"GET", kHeartbeatKey}, [p, finish, &c](Result<Reply> r) {
    std::unique_lock lock(p->mutex);
    p->generations[2] = c.generation();
    p->after_seen = true;
    if (r.ok()) p->after = std::move(*r);
    if (--p->remaining > 0) return;
    lock.unlock();
    finish();
  });
}

bool ReplicaSet::Current(const Reply& before, const Reply& after, int64_t fence) {
  auto b = ParseHeartbeat(before), a = ParseHeartbeat(after);
  std::lock_guard lock(mutex_);
  return b && a && b->second == epoch_ && a->second == epoch_ && b->first >= fence && a->first >= b->first;
}

void ReplicaSet::Wrote() {
  if (options_.split_of > 0) return;  // the split does not keep read-your-writes
  {
    std::lock_guard lock(mutex_);
    // Any heartbeat sent from now on runs after the write on the master.
    fence_seq_ = sent_seq_ + 1;
    // One on demand at a time: its answer sends the next if needed.
    if (demand_in_flight_ || stopped_) return;
    demand_in_flight_ = true;
  }
  SendHeartbeat(/*on_demand=*/true);
}

std::vector<ReplicaSet::ReplicaState> ReplicaSet::States() {
  std::lock_guard lock(mutex_);
  std::vector<ReplicaState> out;
  int64_t now = SteadyMicros();
  for (const auto& r : replicas_) {
    auto lag = LagUs(*r, now);
    out.push_back({r->label, Usable(*r, now) ? std::optional<int64_t>(*lag / 1000) : std::nullopt, r->reads->value()});
  }
  return out;
}

}  // namespace hotrow::db::redis
