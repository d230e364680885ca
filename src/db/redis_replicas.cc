#include "db/redis_replicas.h"

#include <cstdlib>

#include "db/store_url.h"
#include "ops/log.h"

namespace hotrow::db::redis {

namespace {

// SETs the heartbeat to the master's TIME in microseconds and answers it.
// Values only grow, one per heartbeat (a later one that reads the same
// microsecond, or a clock stepped back, takes the last one + 1): a replica
// holding a value at least a fence's holds that heartbeat or a later one.
// (Microseconds since 1970 are below 2^53: exact in Lua's numbers.)
const Script kHeartbeatScript(R"(
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if us <= last then us = last + 1 end
us = string.format('%d', us)
redis.call('SET', KEYS[1], us)
return us
)");

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t ValueOf(const Reply& r) {
  return r.type == Reply::Type::kInteger ? r.integer : std::strtoll(r.str.c_str(), nullptr, 10);
}

}  // namespace

Result<std::unique_ptr<ReplicaSet>> ReplicaSet::Start(Client& master, ReplicaOptions options) {
  std::unique_ptr<ReplicaSet> set(new ReplicaSet(master, std::move(options)));
  auto& registry = metrics::Registry::Default();
  set->master_reads_ =
      &registry.GetCounter("hotrow_redis_reads_total",
                           "Leaderboard reads sent to each Redis server (master or replica)", {{"server", "master"}});
  for (const std::string& url : set->options_.urls) {
    auto parsed = ParseUrl(url);
    if (!parsed.ok())
      return Status::InvalidField("redis-replica",
                                  "--redis-replica must look like redis://host:port, not '" + RedactUrl(url) + "'");
    auto r = std::make_unique<Replica>();
    r->url = url;
    r->label = parsed->host + ":" + std::to_string(parsed->port);
    r->reads =
        &registry.GetCounter("hotrow_redis_reads_total",
                             "Leaderboard reads sent to each Redis server (master or replica)", {{"server", r->label}});
    Replica* raw = r.get();
    ReplicaSet* self = set.get();
    r->lag_metric = registry.AddCallback(
        "hotrow_redis_replica_lag_seconds",
        "Each Redis replica's lag behind the master at its last poll (hotrow:hb); -1 while unknown", "gauge",
        {{"replica", r->label}}, [self, raw] {
          std::lock_guard lock(self->mutex_);
          return raw->lag_us < 0 ? -1.0 : static_cast<double>(raw->lag_us) / 1e6;
        });
    auto client = Client::Connect(url, set->options_.client);
    if (client.ok())
      r->client = std::move(*client);
    else
      log::Warn("Redis replica {}: {}; it gets no reads until it answers", r->label, client.status().message());
    set->replicas_.push_back(std::move(r));
  }
  set->task_ = std::make_unique<PeriodicTask>(std::chrono::milliseconds(0), std::chrono::milliseconds(kHeartbeatMs),
                                              [raw = set.get()] { raw->Tick(); });
  // A replica that was down at start: a connect may block, so not on the
  // heartbeat's thread.
  set->connect_task_ = std::make_unique<PeriodicTask>(std::chrono::milliseconds(1000), std::chrono::milliseconds(1000),
                                                      [raw = set.get()] {
                                                        for (auto& r : raw->replicas_) {
                                                          {
                                                            std::lock_guard lock(raw->mutex_);
                                                            if (r->client) continue;
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

ReplicaSet::~ReplicaSet() { Stop(); }

void ReplicaSet::Stop() {
  if (connect_task_) connect_task_->Stop();
  if (task_) task_->Stop();
  for (auto& r : replicas_) {
    Client* c = nullptr;
    {
      std::lock_guard lock(mutex_);
      c = r->client.get();
    }
    if (c) c->Stop();  // runs the polls still queued, which lock mutex_
  }
}

void ReplicaSet::Tick() {
  SendHeartbeat(/*on_demand=*/false);
  if (options_.split_of > 0) return;  // the split reads whatever the lag
  for (auto& r : replicas_) Poll(*r);
}

void ReplicaSet::SendHeartbeat(bool on_demand) {
  uint64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    seq = ++sent_seq_;
  }
  master_.Eval(kHeartbeatScript, {"1", kHeartbeatKey}, [this, seq, on_demand](Result<Reply> r) {
    bool fenced = false, again = false;
    {
      std::lock_guard lock(mutex_);
      if (on_demand) demand_in_flight_ = false;
      if (r.ok()) {
        int64_t value = ValueOf(*r);
        master_us_ = value;
        master_steady_us_ = SteadyMicros();
        if (fence_seq_ != 0 && fence_set_for_ != fence_seq_ && seq >= fence_seq_) {
          fence_us_ = value;
          fence_set_for_ = fence_seq_;
          fenced = true;
        }
      }
      // A write answered while this one was on its way needs a later one.
      if (on_demand && r.ok() && fence_set_for_ != fence_seq_) again = demand_in_flight_ = true;
    }
    if (again) SendHeartbeat(/*on_demand=*/true);
    // Learn at once whether a replica has the fence, instead of at the
    // next tick.
    if (fenced)
      for (auto& rep : replicas_) Poll(*rep);
  });
}

void ReplicaSet::Poll(Replica& r) {
  Client* c = nullptr;
  {
    std::lock_guard lock(mutex_);
    c = r.client.get();
  }
  if (!c) return;
  c->Command({"GET", kHeartbeatKey}, [this, &r](Result<Reply> reply) {
    int64_t now = SteadyMicros();
    std::lock_guard lock(mutex_);
    int64_t master_now = MasterNowUs(now);
    if (!reply.ok() || reply->is_nil() || master_now == 0) {
      r.lag_us = -1;
      return;
    }
    // Polls may answer out of order (a tick's and a fence's): keep the newest.
    r.hb_us = std::max(r.hb_us, ValueOf(*reply));
    r.lag_us = std::max<int64_t>(0, master_now - r.hb_us);
    r.polled_steady_us = now;
  });
}

int64_t ReplicaSet::MasterNowUs(int64_t now_steady_us) const {
  return master_us_ == 0 ? 0 : master_us_ + (now_steady_us - master_steady_us_);
}

bool ReplicaSet::Usable(const Replica& r, int64_t now_steady_us) const {
  return r.client && r.client->connected() && r.lag_us >= 0 && r.lag_us <= options_.max_lag_ms * 1000 &&
         now_steady_us - r.polled_steady_us <= kPollFreshMs * 1000 && r.hb_us >= fence_us_;
}

Client& ReplicaSet::ForRead() {
  uint64_t n = next_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lock(mutex_);
  if (options_.split_of > 0) {
    if (static_cast<int64_t>(n % static_cast<uint64_t>(options_.split_of)) < options_.split) {
      for (size_t i = 0; i < replicas_.size(); ++i) {
        Replica& r = *replicas_[(n / static_cast<uint64_t>(options_.split_of) + i) % replicas_.size()];
        if (r.client && r.client->connected()) {
          r.reads->Add();
          return *r.client;
        }
      }
    }
    master_reads_->Add();
    return master_;
  }
  // A write of ours whose fence is not known yet: only the master has it
  // for sure.
  if (fence_seq_ == 0 || fence_set_for_ == fence_seq_) {
    int64_t now = SteadyMicros();
    for (size_t i = 0; i < replicas_.size(); ++i) {
      Replica& r = *replicas_[(n + i) % replicas_.size()];
      if (Usable(r, now)) {
        r.reads->Add();
        return *r.client;
      }
    }
  }
  master_reads_->Add();
  return master_;
}

void ReplicaSet::Wrote() {
  if (options_.split_of > 0) return;  // the split does not keep read-your-writes
  {
    std::lock_guard lock(mutex_);
    // Any heartbeat sent from now on runs after the write on the master.
    fence_seq_ = sent_seq_ + 1;
    // One on demand at a time: its answer sends the next if needed.
    if (demand_in_flight_) return;
    demand_in_flight_ = true;
  }
  SendHeartbeat(/*on_demand=*/true);
}

std::vector<ReplicaSet::ReplicaState> ReplicaSet::States() {
  std::lock_guard lock(mutex_);
  std::vector<ReplicaState> out;
  int64_t now = SteadyMicros();
  for (const auto& r : replicas_)
    out.push_back(
        {r->label, Usable(*r, now) ? std::optional<int64_t>(r->lag_us / 1000) : std::nullopt, r->reads->value()});
  return out;
}

}  // namespace hotrow::db::redis
