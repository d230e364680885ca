// The date-plan store on PostgreSQL, shared by any number of hotrow
// instances.
//
// Likes keep the embedded store's shape: they queue per instance, and one
// batch at a time runs on the pool -- for every plan in the batch one
//   UPDATE datePlans SET "like" = "like" + k WHERE id = $1 RETURNING "like"
// pipelined in one round trip and one implicit transaction (one commit for
// the batch). An atomic increment needs nothing stronger than READ
// COMMITTED, and it keeps counts exact across instances: each batch's k
// requests get the consecutive counts N-k+1..N of its own increment.
//
// Every change NOTIFYs hotrow_plans in the same transaction ("put <id>",
// "del <id>", "like <id> <count>"), so other instances' read models follow
// it as soon as it commits; Follow parses them (postgres_store.cc). A "put"
// re-reads the row, so a late message cannot bring back stale data.
#pragma once

#include <mutex>
#include <thread>

#include "base/batch_queue.h"
#include "dateplan/store.h"
#include "db/postgres.h"

namespace hotrow::dateplan {

inline constexpr const char* kPlanChannel = "hotrow_plans";

class PostgresDatePlanStore final : public DatePlanStore {
 public:
  // Creates the schema if needed.
  static Result<std::unique_ptr<PostgresDatePlanStore>> Open(db::pg::Pool& pool, size_t like_queue_max = 11024);
  ~PostgresDatePlanStore() override;

  Status LoadAll(const std::function<void(Plan&&)>& sink) override;
  void Insert(PlanFields fields, std::string edit_token_hash, std::function<void(Result<Plan>)> done) override;
  void Update(int64_t id, PlanFields fields, std::function<void(Result<Plan>)> done) override;
  void Delete(int64_t id, std::function<void(Status)> done) override;
  void Like(int64_t id, StoreCallback<Result<LikeOutcome>> done) override;

  const char* channel() const override { return kPlanChannel; }
  Result<std::optional<PlanChange>> Follow(std::string_view notification) override;
  // Commits every queued like, then refuses new ones (shutdown).
  void Stop() override;

 private:
  // One plan as stored now, or nullopt; blocking.
  Result<std::optional<Plan>> Fetch(int64_t id);
  PostgresDatePlanStore(db::pg::Pool& pool, size_t like_queue_max)
      : pool_(pool), likes_(like_queue_max, "the like queue is full; retry later") {}
  void LikeLoop();

  struct PendingLike {
    int64_t id = 0;
    StoreCallback<Result<LikeOutcome>> done;
  };
  db::pg::Pool& pool_;
  BatchQueue<PendingLike> likes_;
  std::mutex stop_mutex_;
  std::thread liker_;
};

Status CreatePostgresDatePlanSchema(db::pg::Connection& conn);

// Plans 1..count from the generator (seed.h), into an empty table (COPY).
Status SeedPostgresPlans(db::pg::Connection& conn, int64_t count, uint64_t seed);

}  // namespace hotrow::dateplan
