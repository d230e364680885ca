#include "dateplan/service.h"

#include <chrono>

#include "base/crypto.h"
#include "ops/log.h"

namespace hotrow::dateplan {

Status DatePlanService::Load() {
  auto start = std::chrono::steady_clock::now();
  std::vector<Plan> plans;
  Status s = store_.LoadAll([&plans](Plan&& p) { plans.push_back(std::move(p)); });
  if (!s.ok()) return s;
  catalog_.ReplaceAll(std::move(plans));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("date plans: loaded {} plan(s) into memory in {} ms", catalog_.size(), ms);
  return Status::Ok();
}

Status DatePlanService::Follow(std::string_view notification) {
  auto read = store_.Follow(notification);
  if (!read.ok()) return read.status();
  if (!*read) return Status::Ok();
  std::optional<PlanChange>& change = *read;
  switch (change->kind) {
    case PlanChange::Kind::kPut:
      catalog_.Put(std::move(*change->plan));
      break;
    case PlanChange::Kind::kErase:
      catalog_.Erase(change->id);
      break;
    case PlanChange::Kind::kLike:
      catalog_.SetLike(change->id, change->like);
      break;
  }
  return Status::Ok();
}

Result<std::vector<RankEntry>> DatePlanService::Ranking(int64_t limit) const {
  if (limit < 1 || limit > kRankingLimitMax) return Status::OutOfRange("limit", 1, kRankingLimitMax);
  return catalog_.Ranking(static_cast<size_t>(limit));
}

Status DatePlanService::Authorize(int64_t id, std::optional<std::string_view> bearer) const {
  if (!bearer) return Status::Unauthorized("editing a plan needs 'Authorization: Bearer <editToken>'");
  std::string token_hash;
  if (!catalog_.With(id, [&](const Plan& p) { token_hash = p.edit_token_hash; })) return NoSuchPlan(id);
  if (admin_.Matches(bearer)) return Status::Ok();
  if (!token_hash.empty() && ConstantTimeEquals(Sha256(*bearer), token_hash)) return Status::Ok();
  return Status::Forbidden("this token may not edit plan " + std::to_string(id));
}

void DatePlanService::Create(PlanFields fields, std::function<void(Result<CreatedPlan>)> done) {
  if (Status s = ValidatePlanFields(fields); !s.ok()) return done(s);
  std::string token = RandomToken(kEditTokenBytes);
  std::string hash = Sha256(token);
  store_.Insert(std::move(fields), std::move(hash),
                [this, token = std::move(token), done = std::move(done)](Result<Plan> r) {
                  if (!r.ok()) return done(r.status());
                  catalog_.Put(*r);
                  done(CreatedPlan{std::move(r).value(), token});
                });
}

void DatePlanService::Update(int64_t id, PlanFields fields, std::function<void(Result<Plan>)> done) {
  if (Status s = ValidatePlanFields(fields); !s.ok()) return done(s);
  store_.Update(id, std::move(fields), [this, done = std::move(done)](Result<Plan> r) {
    if (r.ok()) catalog_.Put(*r);
    done(std::move(r));
  });
}

void DatePlanService::Delete(int64_t id, std::function<void(Status)> done) {
  store_.Delete(id, [this, id, done = std::move(done)](Status s) {
    if (s.ok() || s.code() == ErrorCode::kNotFound) catalog_.Erase(id);
    done(std::move(s));
  });
}

void DatePlanService::Like(int64_t id, Callback<Result<int64_t>> done) {
  if (!catalog_.With(id, [](const Plan&) {})) return done(NoSuchPlan(id));
  store_.Like(id, [this, id, done = std::move(done)](Result<LikeOutcome> r) {
    if (!r.ok()) return done(r.status());
    catalog_.SetLike(id, r->committed_like);
    done(r->like);
  });
}

}  // namespace hotrow::dateplan
