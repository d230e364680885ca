// Reads from Redis replicas, with their lag measured and read-your-writes
// kept (serve --redis-replica, docs/leaderboard.md).
//
// Lag is measured, not guessed. Every kHeartbeatMs the instance runs a
// script on the master that SETs kHeartbeatKey to the master's TIME (in
// microseconds) and answers it; the instance keeps the newest answer and
// when it arrived, so "the master's now" is that value plus the time
// elapsed since, on this instance's steady clock (no clock of another
// machine is compared with ours). At the same period it GETs kHeartbeatKey
// from each replica; the replica's lag is the master's now minus the value
// it holds. A replica serves reads only while its last poll is recent
// (kPollFreshMs) and showed a lag <= max_lag_ms: a replica that stops
// replicating, stalls or goes away stops getting reads within that bound,
// and one that catches up gets them again.
//
// Read-your-writes. After a write of this instance is answered (Wrote, run
// before its caller is answered), it sends a heartbeat at once: it runs
// after the write on the master (one connection, in order), and its value
// is the write's fence. Until that heartbeat has answered, and then until
// a replica has been polled holding a heartbeat at least as new as the
// fence (heartbeat values only grow, and replication applies the master's
// writes in order), reads go to the master; the fence's answer polls the
// replicas at once, so that is a few round trips, not a period. A read
// after a 200 always sees the write, whichever server answers it. Writes
// that come faster than that keep this instance's reads on the master.
//
// Split (the reference post's strategy 4, for the benchmark only): a fixed
// share of reads goes to the replicas, whatever their lag, and
// read-your-writes is lost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/periodic_task.h"
#include "base/status.h"
#include "db/redis.h"
#include "ops/metrics.h"

namespace hotrow::db::redis {

inline constexpr const char* kHeartbeatKey = "hotrow:hb";
inline constexpr int64_t kHeartbeatMs = 50;
// A replica's lag is trusted this long after it was polled.
inline constexpr int64_t kPollFreshMs = 4 * kHeartbeatMs;

struct ReplicaOptions {
  std::vector<std::string> urls;  // redis://host:port of each replica
  int64_t max_lag_ms = 100;
  // Benchmark only: reads to the replicas out of every split_of (0: the
  // lag routing above).
  int64_t split = 0, split_of = 0;
  Options client = {};
};

class ReplicaSet {
 public:
  // Parses every URL (a bad one fails here) and starts the heartbeat. A
  // replica that cannot be reached is tried again every period and gets no
  // reads until it answers.
  static Result<std::unique_ptr<ReplicaSet>> Start(Client& master, ReplicaOptions options);
  ~ReplicaSet();
  // Stops the heartbeat and the replicas' clients (before the master's).
  void Stop();

  // Where to send a read: a replica that is caught up, else the master.
  Client& ForRead();
  // A write of this instance was answered by the master (or failed: it may
  // have run).
  void Wrote();

  // Per replica, for tests and logs: its last measured lag in ms (nullopt:
  // not usable now), and the reads sent to it.
  struct ReplicaState {
    std::string url;
    std::optional<int64_t> lag_ms;
    uint64_t reads = 0;
  };
  std::vector<ReplicaState> States();

 private:
  struct Replica {
    std::string url, label;  // label: host:port, no password
    std::unique_ptr<Client> client;
    // Under mutex_: the last poll's heartbeat value and lag, and when it
    // was read (steady, us); lag -1: unknown.
    int64_t hb_us = 0, lag_us = -1, polled_steady_us = 0;
    metrics::Counter* reads = nullptr;
    metrics::Registration lag_metric;
  };
  ReplicaSet(Client& master, ReplicaOptions options) : master_(master), options_(std::move(options)) {}
  void Tick();
  void SendHeartbeat(bool on_demand);
  void Poll(Replica& r);
  bool Usable(const Replica& r, int64_t now_steady_us) const;  // under mutex_
  int64_t MasterNowUs(int64_t now_steady_us) const;            // under mutex_; 0: unknown

  Client& master_;
  ReplicaOptions options_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::mutex mutex_;
  // The master's TIME at the newest heartbeat, and when it arrived.
  int64_t master_us_ = 0, master_steady_us_ = 0;
  // Heartbeats sent; the fence (above): the first heartbeat sent after the
  // newest write, the one whose value fence_us_ holds (fence_set_for_ !=
  // fence_seq_: it has not answered yet).
  uint64_t sent_seq_ = 0, fence_seq_ = 0, fence_set_for_ = 0;
  int64_t fence_us_ = 0;
  bool demand_in_flight_ = false;  // a heartbeat sent for a fence (Wrote)
  std::atomic<uint64_t> next_{0};  // round robin, and the split's counter
  metrics::Counter* master_reads_ = nullptr;
  std::unique_ptr<PeriodicTask> task_, connect_task_;
};

}  // namespace hotrow::db::redis
