#include "leaderboard/routes.h"

#include "http/errors.h"
#include "http/json.h"
#include "http/query.h"

namespace hotrow::leaderboard {

using http::JsonWriter;
using http::Request;
using http::Responder;
using http::Response;

namespace {

void WriteEntry(JsonWriter& w, const Entry& e) {
  w.StartObject();
  w.Field("rank", e.rank);
  w.Field("clientId", e.client_id);
  w.Field("score", e.score);
  w.EndObject();
}

void WriteEntries(JsonWriter& w, std::span<const Entry> entries) {
  w.StartArray();
  for (const auto& e : entries) WriteEntry(w, e);
  w.EndArray();
}

Response Error(const Status& s) { return http::ErrorResponse(s); }

Result<ScoreMode> ParseMode(const http::Query& q) {
  auto mode = q.Get("mode");
  if (!mode || *mode == "replace") return ScoreMode::kReplace;
  if (*mode == "best") return ScoreMode::kBest;
  return Status::InvalidField("mode", "mode must be 'replace' or 'best'");
}

void PostScore(LeaderboardService& service, const Request& req, Responder responder) {
  if (!req.HasHeader("ClientId"))
    return responder.Send(Error(Status::InvalidField("ClientId", "the ClientId header is required")));
  std::string client_id(req.Header("ClientId"));
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto mode = ParseMode(*query);
  if (!mode.ok()) return responder.Send(Error(mode.status()));
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"score"}); !s.ok()) return responder.Send(Error(s));
  auto score = body->SaturatedInteger("score");
  if (!score.ok()) return responder.Send(Error(score.status()));
  service.PostScore(client_id, *score, *mode, [responder](Result<Posted> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Field("clientId", r->entry.client_id);
    w.Field("score", r->entry.score);
    w.Field("rank", r->entry.rank);
    w.EndObject();
    responder.Send(std::move(res));
  });
}

void Top(LeaderboardService& service, Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto limit = query->Int("limit", kPageLimitDefault);
  if (!limit.ok()) return responder.Send(Error(limit.status()));
  auto offset = query->Int("offset", 0);
  if (!offset.ok()) return responder.Send(Error(offset.status()));
  service.Top(*offset, *limit, [responder, body = http::TakeSpareBody(req)](Result<Page> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res = http::ResponseWithBody(std::move(body));
    res.body.reserve(64 + r->entries.size() * 56);
    JsonWriter w(res.body);
    w.StartObject();
    w.Key("entries");
    WriteEntries(w, r->entries);
    w.Field("total", r->total);
    w.EndObject();
    responder.Send(std::move(res));
  });
}

void Player(LeaderboardService& service, const Request& req, Responder responder) {
  const std::string& client_id = req.params.at(0);
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  std::optional<int64_t> around;
  if (query->Get("around")) {
    auto k = query->Int("around", 0);
    if (!k.ok()) return responder.Send(Error(k.status()));
    around = *k;
  }
  service.Player(client_id, around, [responder](Result<PlayerView> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Field("rank", r->entry.rank);
    w.Field("clientId", r->entry.client_id);
    w.Field("score", r->entry.score);
    if (r->around) {
      w.Key("around");
      WriteEntries(w, *r->around);
    }
    w.EndObject();
    responder.Send(std::move(res));
  });
}

void Remove(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  service.Remove(req.params.at(0), [responder](const Status& s) mutable {
    if (!s.ok()) return responder.Send(Error(s));
    Response res;
    res.status = 204;
    responder.Send(std::move(res));
  });
}

}  // namespace

void AddRoutes(http::Router& router, LeaderboardService& service, const AdminAuth& admin) {
  using http::BodyPolicy;
  using http::Method;
  router.Add(
      Method::kPost, "/api/v1/score",
      [&service](Request& req, Responder res) { PostScore(service, req, std::move(res)); }, BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/leaderboard",
             [&service](Request& req, Responder res) { Top(service, req, std::move(res)); });
  router.Add(Method::kGet, "/api/v1/leaderboard/{clientId}",
             [&service](Request& req, Responder res) { Player(service, req, std::move(res)); });
  router.Add(Method::kDelete, "/api/v1/leaderboard/{clientId}",
             [&service, &admin](Request& req, Responder res) { Remove(service, admin, req, std::move(res)); });
}

}  // namespace hotrow::leaderboard
