// The date-plan service: business rules over a store and the read model.
//
// Reads come from the Catalog and never wait for a write. Writes go to the
// store; each completion updates the Catalog before the caller's callback
// runs, so the caller can answer the client knowing that every later read
// sees the change. Callbacks run on a store thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/auth.h"
#include "dateplan/catalog.h"
#include "dateplan/store.h"

namespace hotrow::dateplan {

struct CreatedPlan {
  Plan plan;
  std::string edit_token;  // shown to the creator once, never stored in clear
};

class DatePlanService {
 public:
  DatePlanService(DatePlanStore& store, const AdminAuth& admin) : store_(store), admin_(admin) {}

  // Rebuilds the read model from the store.
  Status Load();
  const Catalog& catalog() const { return catalog_; }

  // OK when `bearer` may edit plan `id` (its edit token or the admin
  // token): unauthorized without a token, not_found for an unknown id,
  // forbidden for a wrong token.
  Status Authorize(int64_t id, std::optional<std::string_view> bearer) const;

  void Create(PlanFields fields, std::function<void(Result<CreatedPlan>)> done);
  // The caller has checked Authorize; fields are validated here.
  void Update(int64_t id, PlanFields fields, std::function<void(Result<Plan>)> done);
  void Delete(int64_t id, std::function<void(Status)> done);
  // The like's own count (distinct for every like).
  void Like(int64_t id, Callback<Result<int64_t>> done);

  // Changes made by other instances on a shared store, as its
  // notifications report them (PostgreSQL LISTEN/NOTIFY).
  void FollowPut(Plan plan) { catalog_.Put(std::move(plan)); }
  void FollowErase(int64_t id) { catalog_.Erase(id); }
  void FollowLike(int64_t id, int64_t like) { catalog_.SetLike(id, like); }
  // Rebuilds the read model from the store (after notifications may have
  // been missed: a listener reconnect).
  Status Reload();

 private:
  DatePlanStore& store_;
  const AdminAuth& admin_;
  Catalog catalog_;
};

}  // namespace hotrow::dateplan
