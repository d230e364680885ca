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
#include "base/domain.h"
#include "dateplan/catalog.h"
#include "dateplan/store.h"

namespace hotrow::dateplan {

struct CreatedPlan {
  Plan plan;
  std::string edit_token;  // shown to the creator once, never stored in clear
};

class DatePlanService final : public DomainService {
 public:
  DatePlanService(DatePlanStore& store, const AdminAuth& admin) : store_(store), admin_(admin) {}

  // DomainService: the Catalog from the store, and the store's change feed.
  std::string_view name() const override { return "date plans"; }
  Status Load() override;
  size_t entries() const override { return catalog_.size(); }
  const char* channel() const override { return store_.channel(); }
  Status Follow(std::string_view notification) override;
  void Stop() override { store_.Stop(); }
  // The read model, for the routes to render from without copying (the hot
  // GET paths); every write goes through the methods below.
  const Catalog& catalog() const { return catalog_; }
  // The most liked plans, limit 1-kRankingLimitMax.
  Result<std::vector<RankEntry>> Ranking(int64_t limit) const;

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

 private:
  DatePlanStore& store_;
  const AdminAuth& admin_;
  Catalog catalog_;
};

}  // namespace hotrow::dateplan
