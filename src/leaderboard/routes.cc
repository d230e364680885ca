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

void PostScore(LeaderboardStore& store, const Request& req, Responder responder) {
  if (!req.HasHeader("ClientId"))
    return responder.Send(Error(Status::InvalidField("ClientId", "the ClientId header is required")));
  std::string client_id(req.Header("ClientId"));
  if (Status s = ValidateClientId(client_id); !s.ok()) return responder.Send(Error(s));
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto mode = ParseMode(*query);
  if (!mode.ok()) return responder.Send(Error(mode.status()));
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"score"}); !s.ok()) return responder.Send(Error(s));
  auto score = body->Integer("score", -kScoreAbsMax, kScoreAbsMax);
  if (!score.ok()) return responder.Send(Error(score.status()));
  store.PostScore(std::move(client_id), *score, *mode, [responder](Result<Posted> r) mutable {
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

void Top(LeaderboardStore& store, Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto limit = query->Int("limit", kPageLimitDefault, 1, kPageLimitMax);
  if (!limit.ok()) return responder.Send(Error(limit.status()));
  auto offset = query->Int("offset", 0, 0, INT64_MAX - kPageLimitMax);
  if (!offset.ok()) return responder.Send(Error(offset.status()));
  store.Top(*offset, *limit, [responder, body = http::TakeSpareBody(req)](Result<Page> r) mutable {
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

void Player(LeaderboardStore& store, const Request& req, Responder responder) {
  const std::string& client_id = req.params.at(0);
  if (Status s = ValidateClientId(client_id); !s.ok())
    return responder.Send(Error(Status::InvalidField("clientId", s.message())));
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  std::optional<int64_t> around;
  if (query->Get("around")) {
    auto k = query->Int("around", 0, 0, kAroundMax);
    if (!k.ok()) return responder.Send(Error(k.status()));
    around = *k;
  }
  store.Player(client_id, around, [responder](Result<PlayerView> r) mutable {
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

void Remove(LeaderboardStore& store, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  const std::string& client_id = req.params.at(0);
  if (Status s = ValidateClientId(client_id); !s.ok())
    return responder.Send(Error(Status::InvalidField("clientId", s.message())));
  store.Remove(client_id, [responder](Status s) mutable {
    if (!s.ok()) return responder.Send(Error(s));
    Response res;
    res.status = 204;
    responder.Send(std::move(res));
  });
}

}  // namespace

void AddRoutes(http::Router& router, LeaderboardStore& store, const AdminAuth& admin) {
  using http::BodyPolicy;
  using http::Method;
  router.Add(
      Method::kPost, "/api/v1/score", [&store](Request& req, Responder res) { PostScore(store, req, std::move(res)); },
      BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/leaderboard",
             [&store](Request& req, Responder res) { Top(store, req, std::move(res)); });
  router.Add(Method::kGet, "/api/v1/leaderboard/{clientId}",
             [&store](Request& req, Responder res) { Player(store, req, std::move(res)); });
  router.Add(Method::kDelete, "/api/v1/leaderboard/{clientId}",
             [&store, &admin](Request& req, Responder res) { Remove(store, admin, req, std::move(res)); });
}

}  // namespace hotrow::leaderboard
