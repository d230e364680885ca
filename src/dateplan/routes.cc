#include "dateplan/routes.h"

#include <random>

#include "base/text.h"
#include "dateplan/plan_json.h"
#include "http/errors.h"
#include "http/json.h"
#include "http/query.h"

namespace hotrow::dateplan {

using http::JsonWriter;
using http::Request;
using http::Responder;
using http::Response;

namespace {

void WritePlan(JsonWriter& w, const Plan& p) {
  w.Field("id", p.id);
  w.Field("title", p.title);
  w.Field("content", p.content);
  w.Field("category", p.category);
  w.Field("like", p.like);
}

void WritePlanBody(Response& r, const Plan& p) {
  r.body.reserve(p.json_head.size() + 24);
  AppendPlanJson(r.body, p);
}

Response PlanResponse(const Plan& p, int status = 200) {
  Response r;
  r.status = status;
  WritePlanBody(r, p);
  return r;
}

std::mt19937_64& ThreadRng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

Result<int64_t> PathId(const Request& req) {
  auto id = ParsePositiveId(req.params.at(0));
  if (!id) return Status::InvalidField("id", "id must be an integer from 1 to 9223372036854775807");
  return *id;
}

Result<PlanFields> ParseFields(std::string_view body) {
  auto obj = http::JsonObject::Parse(body);
  if (!obj.ok()) return obj.status();
  if (Status s = obj->OnlyFields({"title", "content", "category"}); !s.ok()) return s;
  PlanFields f;
  auto title = obj->String("title");
  if (!title.ok()) return title.status();
  auto content = obj->String("content");
  if (!content.ok()) return content.status();
  auto category = obj->String("category");
  if (!category.ok()) return category.status();
  return PlanFields{std::move(title).value(), std::move(content).value(), std::move(category).value()};
}

void Random(DatePlanService& service, Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(http::ErrorResponse(query.status()));
  auto category = query->Get("category");
  Response r = http::NewResponse(req);
  bool found = service.catalog().WithRandom(category, ThreadRng(), [&](const Plan& p) { WritePlanBody(r, p); });
  if (!found)
    return responder.Send(http::ErrorResponse(Status::NotFound(
        category ? "no date plan in category '" + std::string(*category) + "'" : std::string("no date plans yet"))));
  r.AddHeader("Cache-Control", "no-store");
  responder.Send(std::move(r));
}

void Get(DatePlanService& service, Request& req, Responder responder) {
  auto id = PathId(req);
  if (!id.ok()) return responder.Send(http::ErrorResponse(id.status()));
  Response r = http::NewResponse(req);
  if (!service.catalog().With(*id, [&](const Plan& p) { WritePlanBody(r, p); }))
    return responder.Send(http::ErrorResponse(NoSuchPlan(*id)));
  responder.Send(std::move(r));
}

void Create(DatePlanService& service, const Request& req, Responder responder) {
  auto fields = ParseFields(req.body);
  if (!fields.ok()) return responder.Send(http::ErrorResponse(fields.status()));
  service.Create(std::move(fields).value(), [responder](Result<CreatedPlan> r) mutable {
    if (!r.ok()) return responder.Send(http::ErrorResponse(r.status()));
    Response res;
    res.status = 201;
    JsonWriter w(res.body);
    w.StartObject();
    WritePlan(w, r->plan);
    w.Field("editToken", r->edit_token);
    w.EndObject();
    res.AddHeader("Location", "/datePlan/" + std::to_string(r->plan.id));
    responder.Send(std::move(res));
  });
}

void Update(DatePlanService& service, const Request& req, Responder responder) {
  auto id = PathId(req);
  if (!id.ok()) return responder.Send(http::ErrorResponse(id.status()));
  if (Status s = service.Authorize(*id, http::BearerToken(req)); !s.ok()) return responder.Send(http::ErrorResponse(s));
  auto fields = ParseFields(req.body);
  if (!fields.ok()) return responder.Send(http::ErrorResponse(fields.status()));
  service.Update(*id, std::move(fields).value(), [responder](Result<Plan> r) mutable {
    responder.Send(r.ok() ? PlanResponse(*r) : http::ErrorResponse(r.status()));
  });
}

void Delete(DatePlanService& service, const Request& req, Responder responder) {
  auto id = PathId(req);
  if (!id.ok()) return responder.Send(http::ErrorResponse(id.status()));
  if (Status s = service.Authorize(*id, http::BearerToken(req)); !s.ok()) return responder.Send(http::ErrorResponse(s));
  service.Delete(*id, [responder](const Status& s) mutable {
    if (!s.ok()) return responder.Send(http::ErrorResponse(s));
    Response r;
    r.status = 204;
    responder.Send(std::move(r));
  });
}

void Like(DatePlanService& service, Request& req, Responder responder) {
  auto id = PathId(req);
  if (!id.ok()) return responder.Send(http::ErrorResponse(id.status()));
  // The response is built later, on the writer's thread: take the
  // connection's spare body buffer now.
  service.Like(*id, [responder, id = *id, body = http::TakeSpareBody(req)](Result<int64_t> r) mutable {
    if (!r.ok()) return responder.Send(http::ErrorResponse(r.status()));
    Response res = http::ResponseWithBody(std::move(body));
    JsonWriter w(res.body);
    w.StartObject();
    w.Field("id", id);
    w.Field("like", *r);
    w.EndObject();
    responder.Send(std::move(res));
  });
}

void Ranking(DatePlanService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(http::ErrorResponse(query.status()));
  auto limit = query->Int("limit", kRankingLimitDefault);
  if (!limit.ok()) return responder.Send(http::ErrorResponse(limit.status()));
  auto ranking = service.Ranking(*limit);
  if (!ranking.ok()) return responder.Send(http::ErrorResponse(ranking.status()));
  Response r;
  JsonWriter w(r.body);
  w.StartObject();
  w.Key("plans");
  w.StartArray();
  for (const auto& e : *ranking) {
    w.StartObject();
    w.Field("id", e.id);
    w.Field("title", e.title);
    w.Field("category", e.category);
    w.Field("like", e.like);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  responder.Send(std::move(r));
}

void Categories(DatePlanService& service, const Request&, Responder responder) {
  Response r;
  JsonWriter w(r.body);
  w.StartObject();
  w.Key("categories");
  w.StartArray();
  for (const auto& c : service.catalog().Categories()) {
    w.StartObject();
    w.Field("name", c.name);
    w.Field("count", static_cast<int64_t>(c.count));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  responder.Send(std::move(r));
}

}  // namespace

void AddRoutes(http::Router& router, DatePlanService& service) {
  using http::BodyPolicy;
  using http::Method;
  auto bind = [&service](auto fn) {
    return [&service, fn](Request& req, Responder responder) { fn(service, req, std::move(responder)); };
  };
  router.Add(Method::kGet, "/datePlan", bind(Random));
  router.Add(Method::kGet, "/datePlan/", bind(Random));
  router.Add(Method::kPost, "/datePlan", bind(Create), BodyPolicy::kJson);
  router.Add(Method::kPost, "/datePlan/", bind(Create), BodyPolicy::kJson);
  router.Add(Method::kGet, "/datePlan/ranking", bind(Ranking));
  router.Add(Method::kGet, "/datePlan/categories", bind(Categories));
  router.Add(Method::kGet, "/datePlan/{id}", bind(Get));
  router.Add(Method::kPut, "/datePlan/{id}", bind(Update), BodyPolicy::kJson);
  router.Add(Method::kDelete, "/datePlan/{id}", bind(Delete));
  router.Add(Method::kPost, "/datePlan/{id}/like", bind(Like));
}

}  // namespace hotrow::dateplan
