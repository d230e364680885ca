// The date-plan store: where plans and likes are kept for good.
//
// The service owns the read model (Catalog) and calls the store only to load
// it at start-up and to make writes durable. Every write is asynchronous:
// `done` runs exactly once, on a store thread, after the change is durable
// (committed) or has failed, and before anything else is told about it.
// Implementations: SqliteDatePlanStore (group commit on one writer thread);
// the PostgreSQL store (a connection pool) runs the same contract suite.
#pragma once

#include <cstdint>
#include <functional>

#include "base/inline_function.h"
#include "base/status.h"
#include "dateplan/plan.h"

namespace hotrow::dateplan {

struct LikeOutcome {
  int64_t like;            // this like's count: distinct for every like
  int64_t committed_like;  // the plan's count after the commit that holds it
};

class DatePlanStore {
 public:
  virtual ~DatePlanStore() = default;

  // Calls sink once per stored plan, in id order.
  virtual Status LoadAll(const std::function<void(Plan&&)>& sink) = 0;

  // Stores a new plan with 0 likes; done gets it with its new id.
  virtual void Insert(PlanFields fields, std::string edit_token_hash, std::function<void(Result<Plan>)> done) = 0;
  // Replaces title, content and category; likes stay. not_found if absent.
  virtual void Update(int64_t id, PlanFields fields, std::function<void(Result<Plan>)> done) = 0;
  // not_found if absent.
  virtual void Delete(int64_t id, std::function<void(Status)> done) = 0;
  // Adds one like. Under any concurrency every like gets a distinct count
  // and the stored count equals the number of likes that succeeded.
  virtual void Like(int64_t id, StoreCallback<Result<LikeOutcome>> done) = 0;
};

}  // namespace hotrow::dateplan
