// Reads from Redis replicas, with their lag measured and read-your-writes
// kept (serve --redis-replica, docs/design.md#redis-replicas).
//
// The heartbeat. Every kHeartbeatMs (or max_lag_ms / 2, at least 10 ms,
// when that is shorter) the instance runs a script on the master that sets
// kHeartbeatKey to "<value> <epoch>": the value is the master's TIME in
// microseconds, or the last value + 1 when the clock has not moved past it
// (values only grow, one per heartbeat, whichever instance writes it); the
// epoch is the master's run_id and a random token, chosen by the first
// heartbeat of a server start on a master without one of its own (so a
// restored copy of the data, a promoted replica, a master that lost the
// key or another deployment's master is another epoch: values of different
// epochs are never compared).
//
// Lag is measured on this instance's steady clock, never by comparing the
// master's clock with ours: the instance remembers, for each of its own
// heartbeats of the current epoch, its value and when it was sent. After
// each heartbeat answers, it GETs kHeartbeatKey from every replica; a
// replica holding value V of our epoch has applied every heartbeat with a
// value <= V, so it is at least as fresh as the master was when the newest
// of ours among them was sent. Its lag at any moment is now minus that
// send time: it grows while a replica stops replicating, stalls or stops
// answering, and a replica serves reads only while it is <= max_lag_ms.
//
// Read-your-writes. After a write of this instance is answered (Wrote, run
// before its caller is answered), it sends a heartbeat at once: that
// heartbeat runs after the write on the master (one connection, in order),
// and its value is the write's fence. Until it has answered, and then until
// a replica has been polled holding a value of the same epoch at least as
// high, reads go to the master; the fence's answer polls the replicas at
// once, so that is a few round trips, not a period. A read after a 200
// always sees the write, whichever server answers it. Writes that come
// faster than that keep this instance's reads on the master.
//
// Every read a replica answers is checked (Read): the heartbeat is read
// before and after it on the same connection, and the answer counts only
// when both are of our epoch and the first is at least the fence. So a
// replica that moved to another master, or fell behind, since its last
// poll answers nothing that is used.
//
// Faults: a read a replica fails with a transient error, or one that
// fails that check, is sent again to the master, once (reads change
// nothing), and that replica gets no reads until it is polled again;
// replicas' commands time out after kReplicaTimeoutMs.
//
// Lifetime: the heartbeat's answers run on the master client's thread and
// touch this object. Stop it before the master client is stopped, and
// destroy it after (RedisLeaderboardStore::Stop does both).
//
// Split (the reference post's strategy 4, for the benchmark only): a fixed
// share of reads goes to the replicas, whatever their lag, and
// read-your-writes is lost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
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
inline constexpr int kReplicaTimeoutMs = 1000;

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
  // Parses every URL (a bad or repeated one fails here) and starts the
  // heartbeat. A replica that cannot be reached is tried again every second
  // and gets no reads until it answers.
  static Result<std::unique_ptr<ReplicaSet>> Start(Client& master, ReplicaOptions options);
  ~ReplicaSet();
  // Stops the heartbeat and the replicas' clients; every later read goes to
  // the master.
  void Stop();

  // Where to send a read: a replica that is caught up, else the master.
  Client& ForRead();
  // A write of this instance was answered by the master (or failed: it may
  // have run).
  void Wrote();
  // Runs a read-only script where ForRead says, and makes sure a replica's
  // answer is of our master's history and as new as the fence (above);
  // otherwise, or when a replica fails with a transient error, the read
  // runs again on the master, once, and that replica gets no reads until a
  // poll answers. `script` must outlive the call.
  void Read(const Script& script, std::vector<std::string> args, Client::Callback done);

  // Per replica, for tests and logs: its lag in ms now (nullopt: not
  // usable now), and the reads sent to it.
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
    // Under mutex_: the last poll's value (of epoch_; 0: none usable), and
    // the send time (steady, us) of our newest heartbeat it holds.
    int64_t value = 0, fresh_as_of_us = 0;
    metrics::Counter* reads = nullptr;
    metrics::Registration lag_metric;
  };
  struct Sent {
    int64_t value, sent_us;  // a heartbeat of ours: its value, and when it was sent
  };
  ReplicaSet(Client& master, ReplicaOptions options);
  void Tick();
  void SendHeartbeat(bool on_demand);
  void OnHeartbeat(uint64_t seq, bool on_demand, int64_t sent_us, Result<Reply> r);
  void Poll(Replica& r);
  std::optional<int64_t> LagUs(const Replica& r, int64_t now_us) const;  // under mutex_
  bool Usable(const Replica& r, int64_t now_us) const;                   // under mutex_
  // Whether a replica's heartbeat before and after a read shows it current:
  // of our epoch both times, at least `fence` before.
  bool Current(const Reply& before, const Reply& after, int64_t fence);
  // ForRead, and the fence the choice was made with.
  Client& Route(int64_t* fence);

  Client& master_;
  ReplicaOptions options_;
  const std::string token_;  // with a heartbeat's number: the epoch it proposes for a master without one
  std::mutex mutex_;         // before replicas_: their metric callbacks lock it until they go
  std::vector<std::unique_ptr<Replica>> replicas_;
  // Under mutex_ from here on.
  bool stopped_ = false;
  std::string epoch_;      // the master's heartbeat epoch, as our last heartbeat saw it
  std::deque<Sent> sent_;  // our heartbeats of epoch_ that answered, values ascending
  // Heartbeats sent; the fence (above): the first heartbeat sent after the
  // newest write, the one whose value fence_value_ holds (fence_set_for_ !=
  // fence_seq_: it has not answered yet).
  uint64_t sent_seq_ = 0, fence_seq_ = 0, fence_set_for_ = 0;
  int64_t fence_value_ = 0;
  bool demand_in_flight_ = false;  // a heartbeat sent for a fence (Wrote)
  int64_t last_error_log_us_ = 0;
  std::atomic<uint64_t> next_{0};     // round robin, and the split's counter
  int64_t period_ms_ = kHeartbeatMs;  // max_lag_ms / 2, in [10, kHeartbeatMs]
  metrics::Counter* master_reads_ = nullptr;
  std::unique_ptr<PeriodicTask> task_, connect_task_;
};

}  // namespace hotrow::db::redis
