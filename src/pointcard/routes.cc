#include "pointcard/routes.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/text.h"
#include "http/errors.h"
#include "http/json.h"
#include "http/query.h"
#include "ops/metrics.h"
#include "pointcard/route_helpers.h"

namespace hotrow::pointcard {

namespace routing {

void WriteRow(http::JsonWriter& w, const HistoryRow& r) {
  char time[kTimeTextMax];
  w.StartObject();
  w.Field("paymentTime", std::string_view(time, FormatTimeTo(r.payment_time_us, time)));
  w.Field("cardId", r.card_id);
  w.Field("storeId", r.store_id);
  w.Field("amount", r.amount);
  w.Field("balance", r.balance);
  w.Field("transactionId", r.transaction_id);
  w.Field("kind", r.kind);
  w.Field("actor", r.actor);
  if (r.reference) w.Field("reference", *r.reference);
  if (r.reason) w.Field("reason", *r.reason);
  if (r.refund_of) w.Field("refundOf", *r.refund_of);
  w.EndObject();
}

}  // namespace routing

using http::JsonWriter;
using http::Request;
using http::Responder;
using http::Response;

namespace {

using routing::Error;
using routing::Gate;
using routing::IdempotencyKey;
using routing::NoFields;
using routing::OptionalText;
using routing::PathId;
using routing::ReadPage;
using routing::ReadRowTexts;
using routing::WriteRow;

Status InsufficientBalance(const PaymentOutcome& o) {
  // Names `available` (balance - held): what a payment may take.
  return {ErrorCode::kInsufficientBalance, "card " + std::to_string(o.row.card_id) + " has " +
                                               std::to_string(o.row.balance) + " point(s) available; a payment of " +
                                               std::to_string(-o.row.amount) + " does not fit"};
}

// GET /metrics: payments by outcome, grants by duration and phase.
struct CardMetrics {
  metrics::Counter *paid, *refused, *replayed, *failed;
  metrics::Histogram *grant_seconds, *query_seconds, *update_seconds, *commit_seconds;
  metrics::Counter* grants_failed;
  CardMetrics() {
    auto& r = metrics::Registry::Default();
    auto payments = [&](const char* outcome) {
      return &r.GetCounter("hotrow_pointcard_payments_total",
                           "Payments answered, by outcome: paid, refused (insufficient balance), replayed (an "
                           "Idempotency-Key retry), failed (any error).",
                           {{"outcome", outcome}});
    };
    paid = payments("paid");
    refused = payments("refused");
    replayed = payments("replayed");
    failed = payments("failed");
    grant_seconds =
        &r.GetHistogram("hotrow_pointcard_grant_duration_seconds",
                        "Time of a point grant, from its request to its answer.", {}, metrics::LatencyBuckets(), 1e9);
    auto phase = [&](const char* p) {
      return &r.GetHistogram("hotrow_pointcard_grant_phase_seconds", kGrantPhaseHelp, {{"phase", p}},
                             metrics::LatencyBuckets(), 1e9);
    };
    query_seconds = phase("query");
    update_seconds = phase("update");
    commit_seconds = phase("commit");
    grants_failed = &r.GetCounter("hotrow_pointcard_grants_failed_total", "Point grants that answered an error.");
  }
};

CardMetrics& Metrics() {
  static CardMetrics m;
  return m;
}

void Pay(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  auto caller = gate.StoreCaller(req);
  if (!caller.ok()) return responder.Send(Error(caller.status()));
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"storeId", "amount", "reference", "reason"}); !s.ok())
    return responder.Send(Error(s));
  auto store = body->Integer("storeId", 1, INT64_MAX);
  if (!store.ok()) return responder.Send(Error(store.status()));
  auto amount = body->SaturatedInteger("amount");
  if (!amount.ok()) return responder.Send(Error(amount.status()));
  Payment p{*card, *store, *amount, IdempotencyKey(req)};
  if (Status s = ReadRowTexts(*body, &p.reference, &p.reason); !s.ok()) return responder.Send(Error(s));
  p.actor = std::move(caller->actor);
  p.key = std::move(caller->key);
  service.Pay(std::move(p), [responder, body = http::TakeSpareBody(req)](Result<PaymentOutcome> r) mutable {
    CardMetrics& m = Metrics();
    if (!r.ok()) {
      m.failed->Add();
      return responder.Send(Error(r.status()));
    }
    (r->replayed ? m.replayed : r->refused ? m.refused : m.paid)->Add();
    if (r->refused) {
      Response refused = Error(InsufficientBalance(*r));
      if (r->replayed) refused.AddHeader("Idempotent-Replayed", "true");
      return responder.Send(std::move(refused));
    }
    Response res = http::ResponseWithBody(std::move(body), 201);
    res.body.reserve(256);
    JsonWriter w(res.body);
    WriteRow(w, r->row);
    if (r->replayed) res.AddHeader("Idempotent-Replayed", "true");
    responder.Send(std::move(res));
  });
}

// POST /api/v1/cards/{cardId}/transactions/{transactionId}/refund: 201
// with the refund row (a replay: the row it made, Idempotent-Replayed).
void Refund(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  auto caller = gate.StoreCaller(req);
  if (!caller.ok()) return responder.Send(Error(caller.status()));
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  auto transaction = PathId(req, "transactionId", 1);
  if (!transaction.ok()) return responder.Send(Error(transaction.status()));
  auto key = IdempotencyKey(req);
  if (!key)
    return responder.Send(Error(Status::InvalidField(
        "Idempotency-Key", "a refund needs an Idempotency-Key header, so that a retry cannot refund twice")));
  RefundRequest r{.card_id = *card, .transaction_id = *transaction, .idempotency_key = std::move(*key)};
  if (!req.body.empty()) {
    auto body = http::JsonObject::Parse(req.body);
    if (!body.ok()) return responder.Send(Error(body.status()));
    if (Status s = body->OnlyFields({"amount", "reference", "reason"}); !s.ok()) return responder.Send(Error(s));
    if (body->Has("amount")) {
      auto amount = body->SaturatedInteger("amount");
      if (!amount.ok()) return responder.Send(Error(amount.status()));
      r.amount = *amount;
    }
    if (Status s = ReadRowTexts(*body, &r.reference, &r.reason); !s.ok()) return responder.Send(Error(s));
  }
  r.actor = std::move(caller->actor);
  r.key = std::move(caller->key);
  service.Refund(std::move(r), [responder](Result<PaymentOutcome> out) mutable {
    if (!out.ok()) return responder.Send(Error(out.status()));
    Response res;
    res.status = 201;
    JsonWriter w(res.body);
    WriteRow(w, out->row);
    if (out->replayed) res.AddHeader("Idempotent-Replayed", "true");
    responder.Send(std::move(res));
  });
}

void WriteCard(JsonWriter& w, const Card& c) {
  char time[kTimeTextMax];
  w.StartObject();
  w.Field("cardId", c.card_id);
  w.Field("regionId", c.region_id);
  if (c.external_ref) w.Field("externalRef", *c.external_ref);
  w.Field("status", c.status);
  w.Field("balance", c.balance);
  w.Field("held", c.held);
  w.Field("available", c.balance - c.held);
  w.Field("lastUpdate", std::string_view(time, FormatTimeTo(c.last_update_us, time)));
  w.Field("pendingPoints", c.pending_points);
  if (c.closed_at_us) w.Field("closedAt", FormatTime(*c.closed_at_us));
  w.EndObject();
}

// A card in its own body, with `status`, and Idempotent-Replayed for a
// replay.
auto CardAnswer(Responder responder, int status) {
  return [responder, status](Result<Card> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    res.status = status;
    JsonWriter w(res.body);
    WriteCard(w, *r);
    if (r->replayed) res.AddHeader("Idempotent-Replayed", "true");
    responder.Send(std::move(res));
  };
}

// GET /api/v1/cards/{id}?asOf=<RFC 3339>: the balance at a time.
void BalanceAt(PointCardService& service, int64_t card_id, std::string_view as_of, Responder responder) {
  auto t = ParseTime(as_of);
  if (!t)
    return responder.Send(
        Error(Status::InvalidField("asOf", "asOf must be an RFC 3339 time such as 2026-01-01T00:00:00Z")));
  service.BalanceAt(card_id, *t, [responder](Result<BalanceAsOf> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Field("cardId", r->card_id);
    w.Field("asOf", FormatTime(r->as_of_us));
    w.Field("balance", r->balance);
    w.EndObject();
    responder.Send(std::move(res));
  });
}

void GetCard(PointCardService& service, Request& req, Responder responder) {
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  if (!req.query.empty()) {
    auto query = http::Query::Parse(req.query);
    if (!query.ok()) return responder.Send(Error(query.status()));
    if (auto as_of = query->Get("asOf")) return BalanceAt(service, *card, *as_of, std::move(responder));
  }
  service.GetCard(*card, [responder, body = http::TakeSpareBody(req)](Result<Card> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res = http::ResponseWithBody(std::move(body), 200);
    JsonWriter w(res.body);
    WriteCard(w, *r);
    responder.Send(std::move(res));
  });
}

// POST /api/v1/cards (admin, or any store's key): a new card.
void CreateCard(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  auto caller = gate.AdminOrStoreKey(req);
  if (!caller.ok()) return responder.Send(Error(caller.status()));
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"regionId", "externalRef"}); !s.ok()) return responder.Send(Error(s));
  auto region = body->Integer("regionId", 1, INT64_MAX);
  if (!region.ok()) return responder.Send(Error(region.status()));
  auto ref = OptionalText(*body, "externalRef");
  if (!ref.ok()) return responder.Send(Error(ref.status()));
  NewCard card{.region_id = *region,
               .external_ref = std::move(ref).value(),
               .idempotency_key = IdempotencyKey(req),
               .key = std::move(caller->key)};
  service.CreateCard(std::move(card), CardAnswer(std::move(responder), 201));
}

// GET /api/v1/cards?externalRef=: the card with that reference, in a list
// of at most one.
void FindCard(PointCardService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto ref = query->Get("externalRef");
  if (!ref)
    return responder.Send(Error(Status::InvalidField(
        "externalRef", "give externalRef=<the retailer's id>; GET /api/v1/cards/{cardId} reads a card by its id")));
  service.FindCard(std::string(*ref), [responder](Result<std::optional<Card>> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Key("cards");
    w.StartArray();
    if (*r) WriteCard(w, **r);
    w.EndArray();
    w.EndObject();
    responder.Send(std::move(res));
  });
}

// POST /api/v1/cards/{cardId}/close (admin): no body, or {}.
void CloseCard(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  if (Status s = NoFields(req); !s.ok()) return responder.Send(Error(s));
  service.CloseCard(CardClose{.card_id = *card, .idempotency_key = IdempotencyKey(req)},
                    CardAnswer(std::move(responder), 200));
}

void History(PointCardService& service, const Request& req, Responder responder) {
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  auto page = ReadPage(req);
  if (!page.ok()) return responder.Send(Error(page.status()));
  auto [limit, before] = *page;
  service.History(*card, limit, before, [responder](Result<HistoryPage> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Key("transactions");
    w.StartArray();
    for (const auto& row : r->rows) WriteRow(w, row);
    w.EndArray();
    w.Key("next");
    if (r->next_before_us)
      w.String(std::to_string(*r->next_before_us));
    else
      w.Null();
    w.EndObject();
    responder.Send(std::move(res));
  });
}

Result<int64_t> TimeField(const http::JsonObject& body, const char* name) {
  auto text = body.String(name);
  if (!text.ok()) return text.status();
  auto t = ParseTime(*text);
  if (!t)
    return Status::InvalidField(name, std::string(name) + " must be an RFC 3339 time such as 2026-01-01T00:00:00Z");
  return *t;
}

void Grant(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  req.long_running = true;  // seconds on a million cards: exempt from --handler-timeout-ms
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"from", "to", "ratePercent", "allowOverlap", "expiresInDays", "expiresAt"}); !s.ok())
    return responder.Send(Error(s));
  auto from = TimeField(*body, "from");
  if (!from.ok()) return responder.Send(Error(from.status()));
  auto to = TimeField(*body, "to");
  if (!to.ok()) return responder.Send(Error(to.status()));
  auto rate = body->SaturatedInteger("ratePercent");
  if (!rate.ok()) return responder.Send(Error(rate.status()));
  auto allow_overlap = body->OptionalBool("allowOverlap", false);
  if (!allow_overlap.ok()) return responder.Send(Error(allow_overlap.status()));
  GrantRequest g{*from, *to, *rate, IdempotencyKey(req), *allow_overlap};
  if (body->Has("expiresInDays")) {
    auto days = body->SaturatedInteger("expiresInDays");
    if (!days.ok()) return responder.Send(Error(days.status()));
    g.expires_in_days = *days;
  }
  if (body->Has("expiresAt")) {
    auto at = TimeField(*body, "expiresAt");
    if (!at.ok()) return responder.Send(Error(at.status()));
    g.expires_at_us = *at;
  }
  auto started = std::chrono::steady_clock::now();
  service.Grant(std::move(g), [responder, started](Result<GrantOutcome> r) mutable {
    CardMetrics& m = Metrics();
    if (!r.ok()) {
      m.grants_failed->Add();
      return responder.Send(Error(r.status()));
    }
    if (!r->replayed) {
      m.grant_seconds->ObserveDuration(std::chrono::steady_clock::now() - started);
      auto ns = [](double ms) { return static_cast<uint64_t>(std::max(0.0, ms) * 1e6); };
      m.query_seconds->Observe(ns(r->query_ms));
      m.update_seconds->Observe(ns(r->update_ms));
      m.commit_seconds->Observe(ns(r->commit_ms));
    }
    Response res;
    res.status = 201;
    JsonWriter w(res.body);
    auto ms = [](double v) { return std::round(v * 10) / 10; };
    w.StartObject();
    w.Field("grantId", r->grant_id);
    w.Field("cards", r->cards);
    w.Field("points", r->points);
    w.Key("queryMs");
    w.Double(ms(r->query_ms));
    w.Key("updateMs");
    w.Double(ms(r->update_ms));
    w.Key("commitMs");
    w.Double(ms(r->commit_ms));
    w.EndObject();
    if (r->replayed) res.AddHeader("Idempotent-Replayed", "true");
    responder.Send(std::move(res));
  });
}

void GetGrant(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  auto id = PathId(req, "grantId");
  if (!id.ok()) return responder.Send(Error(id.status()));
  service.GetGrant(*id, [responder](Result<GrantInfo> r) mutable {
    if (!r.ok()) {
      // A grant still staging is 404 now and 200 a moment later.
      Response err = Error(r.status());
      err.AddHeader("Cache-Control", "no-store");
      return responder.Send(std::move(err));
    }
    Response res;
    res.status = 200;
    JsonWriter w(res.body);
    auto ms = [&w](const char* key, double v) {
      w.Key(key);
      w.Double(std::round(v * 10) / 10);
    };
    w.StartObject();
    w.Field("grantId", r->outcome.grant_id);
    w.Field("state", r->folded() ? "folded" : "applied");
    w.Field("from", FormatTime(r->from_us));
    w.Field("to", FormatTime(r->to_us));
    w.Field("ratePercent", r->rate_percent);
    w.Field("cards", r->outcome.cards);
    w.Field("points", r->outcome.points);
    ms("queryMs", r->outcome.query_ms);
    ms("updateMs", r->outcome.update_ms);
    ms("commitMs", r->outcome.commit_ms);
    w.Field("appliedAt", FormatTime(r->applied_at_us));
    if (r->folded()) {
      ms("foldMs", r->fold_ms);
      w.Field("foldedAt", FormatTime(*r->folded_at_us));
    } else {
      w.Key("foldMs");
      w.Null();
      w.Key("foldedAt");
      w.Null();
    }
    w.Key("expiresAt");
    if (r->expires_us)
      w.String(FormatTime(*r->expires_us));
    else
      w.Null();
    w.EndObject();
    res.AddHeader("Cache-Control", "no-store");
    responder.Send(std::move(res));
  });
}

}  // namespace

void AddRoutes(http::Router& router, PointCardService& service, const AdminAuth& admin, RouteOptions options) {
  using http::BodyPolicy;
  using http::Method;
  auto gate = std::make_shared<const Gate>(admin, options);  // shared by the handlers
  auto bind = [&service](auto fn) { return routing::Bind(service, fn); };
  auto gated = [&service, &gate](auto fn) { return routing::Gated(service, gate, fn); };
  router.Add(Method::kPost, "/api/v1/cards/{cardId}/transactions", gated(Pay), BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/cards/{cardId}/transactions", bind(History));
  router.Add(Method::kPost, "/api/v1/cards/{cardId}/transactions/{transactionId}/refund", gated(Refund),
             BodyPolicy::kJson);
  routing::AddHoldRoutes(router, service, gate);
  router.Add(Method::kGet, "/api/v1/cards/{cardId}", bind(GetCard));
  router.Add(Method::kPost, "/api/v1/cards", gated(CreateCard), BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/cards", bind(FindCard));
  router.Add(Method::kPost, "/api/v1/cards/{cardId}/close", gated(CloseCard), BodyPolicy::kJson);
  routing::AddStoreRoutes(router, service, gate);
  router.Add(Method::kPost, "/api/v1/grants", gated(Grant), BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/grants/{grantId}", gated(GetGrant));
}

}  // namespace hotrow::pointcard
