// The date-plan store: where plans and likes are kept for good.
// Persistence only: the service owns the rules and the read model (Catalog).
//
// Lifecycle, the same for every store of every domain (leaderboard/store.h
// lists it): Open (a static factory per backend), LoadAll (every plan, for
// the Catalog), Follow (one change another instance made, parsed next to
// the statements that announce it), Stop.
//
// Every write is asynchronous: `done` runs exactly once, on a store thread,
// after the change is durable (committed) or has failed, and before
// anything else is told about it. Implementations: SqliteDatePlanStore
// (group commit on one writer thread) and PostgresDatePlanStore (a
// connection pool, shared by instances) run the same contract suite.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "base/inline_function.h"
#include "base/status.h"
#include "dateplan/plan.h"

namespace hotrow::dateplan {

struct LikeOutcome {
  int64_t like;            // this like's count: distinct for every like
  int64_t committed_like;  // the plan's count after the commit that holds it
};

// A change another instance made, as the store's change feed reports it.
struct PlanChange {
  enum class Kind { kPut, kErase, kLike };
  Kind kind = Kind::kPut;
  int64_t id = 0;
  std::optional<Plan> plan;  // kPut: the row as it is now
  int64_t like = 0;          // kLike: the count after the commit that holds it
};

class DatePlanStore {
 public:
  virtual ~DatePlanStore() = default;

  // The channel whose notifications Follow parses; nullptr when no other
  // instance can change this store.
  virtual const char* channel() const { return nullptr; }
  // The change one notification of channel() reports (blocking: it may
  // re-read the row); nullopt for one it cannot read (logged and ignored:
  // any database user may NOTIFY, and a newer release may add kinds). An
  // error means it could not be applied: the caller reloads.
  virtual Result<std::optional<PlanChange>> Follow(std::string_view notification) {
    return Status::Internal("this store has no change feed: " + std::string(notification));
  }
  // Answers or fails every request it holds (queued likes commit first);
  // later requests answer unavailable. Idempotent.
  virtual void Stop() {}

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
