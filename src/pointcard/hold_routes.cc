// A card's holds and lots over HTTP:
//   POST /api/v1/cards/{cardId}/holds, GET (a page)        store key, admin or anonymous
//   POST /api/v1/cards/{cardId}/holds/{holdId}/capture, /void
//   GET  /api/v1/cards/{cardId}/lots (a page)
#include <cstdint>

#include "pointcard/route_helpers.h"

namespace hotrow::pointcard::routing {

using http::JsonWriter;
using http::Responder;

namespace {

void WriteHold(JsonWriter& w, const Hold& h) {
  w.StartObject();
  w.Field("holdId", h.hold_id);
  w.Field("cardId", h.card_id);
  w.Field("storeId", h.store_id);
  w.Field("amount", h.amount);
  w.Field("status", h.status);
  w.Field("createdAt", FormatTime(h.created_us));
  w.Field("expiresAt", FormatTime(h.expires_us));
  w.Key("endedAt");
  if (h.ended_us)
    w.String(FormatTime(*h.ended_us));
  else
    w.Null();
  w.Field("actor", h.actor);
  if (h.capture_id) {
    w.Field("captureTransactionId", *h.capture_id);
    w.Field("capturedAmount", h.captured_amount.value_or(0));
  }
}

// A hold in its own body (a capture's with its row as "transaction"), and
// Idempotent-Replayed for a replay.
auto HoldAnswer(Responder responder, int status) {
  return [responder, status](Result<HoldOutcome> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    res.status = status;
    JsonWriter w(res.body);
    WriteHold(w, r->hold);
    if (r->row) {
      w.Key("transaction");
      WriteRow(w, *r->row);
    }
    w.EndObject();
    if (r->replayed) res.AddHeader("Idempotent-Replayed", "true");
    responder.Send(std::move(res));
  };
}

// POST /api/v1/cards/{cardId}/holds: 201 with the hold.
void CreateHold(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  auto caller = gate.StoreCaller(req);
  if (!caller.ok()) return responder.Send(Error(caller.status()));
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"storeId", "amount", "expiresInSeconds"}); !s.ok()) return responder.Send(Error(s));
  auto store = body->Integer("storeId", 1, INT64_MAX);
  if (!store.ok()) return responder.Send(Error(store.status()));
  auto amount = body->SaturatedInteger("amount");
  if (!amount.ok()) return responder.Send(Error(amount.status()));
  auto seconds = body->SaturatedInteger("expiresInSeconds");
  if (!seconds.ok()) return responder.Send(Error(seconds.status()));
  NewHold h{.card_id = *card,
            .store_id = *store,
            .amount = *amount,
            .expires_in_seconds = *seconds,
            .idempotency_key = IdempotencyKey(req),
            .actor = std::move(caller->actor),
            .key = std::move(caller->key)};
  service.CreateHold(std::move(h), HoldAnswer(std::move(responder), 201));
}

// POST /api/v1/cards/{cardId}/holds/{holdId}/capture ({"amount"}
// optional) and .../void (no body): 200 with the hold.
void EndHold(PointCardService& service, const Gate& gate, Request& req, Responder responder, bool capture) {
  auto caller = gate.StoreCaller(req);
  if (!caller.ok()) return responder.Send(Error(caller.status()));
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  auto hold = PathId(req, "holdId", 1);
  if (!hold.ok()) return responder.Send(Error(hold.status()));
  HoldAction a{.card_id = *card, .hold_id = *hold, .capture = capture, .idempotency_key = IdempotencyKey(req)};
  if (!capture) {
    if (Status s = NoFields(req); !s.ok()) return responder.Send(Error(s));
  } else if (!req.body.empty()) {
    auto body = http::JsonObject::Parse(req.body);
    if (!body.ok()) return responder.Send(Error(body.status()));
    if (Status s = body->OnlyFields({"amount"}); !s.ok()) return responder.Send(Error(s));
    if (body->Has("amount")) {
      auto amount = body->SaturatedInteger("amount");
      if (!amount.ok()) return responder.Send(Error(amount.status()));
      a.amount = *amount;
    }
  }
  a.actor = std::move(caller->actor);
  a.key = std::move(caller->key);
  service.EndHold(std::move(a), HoldAnswer(std::move(responder), 200));
}

void CaptureHold(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  EndHold(service, gate, req, std::move(responder), true);
}
void VoidHold(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  EndHold(service, gate, req, std::move(responder), false);
}

// GET /api/v1/cards/{cardId}/holds?limit=&before=: newest first.
void ListHolds(PointCardService& service, const Request& req, Responder responder) {
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  auto page = ReadPage(req);
  if (!page.ok()) return responder.Send(Error(page.status()));
  auto [limit, before] = *page;
  service.ListHolds(*card, limit, before, [responder](Result<HoldPage> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Key("holds");
    w.StartArray();
    for (const auto& h : r->holds) {
      WriteHold(w, h);
      w.EndObject();
    }
    w.EndArray();
    w.Key("next");
    if (r->next_before_id)
      w.String(std::to_string(*r->next_before_id));
    else
      w.Null();
    w.EndObject();
    responder.Send(std::move(res));
  });
}

// GET /api/v1/cards/{cardId}/lots?limit=&after=: the lots with points
// left, in the order payments take them, and the never-expiring rest.
void ListLots(PointCardService& service, const Request& req, Responder responder) {
  auto card = PathId(req, "cardId");
  if (!card.ok()) return responder.Send(Error(card.status()));
  const int64_t card_id = *card;
  auto page = ReadPage(req, kLotListLimitMax, "after");
  if (!page.ok()) return responder.Send(Error(page.status()));
  service.ListLots(card_id, page->limit, page->cursor, [responder, card_id](Result<LotPage> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Field("cardId", card_id);
    auto write_lots = [&w](const char* key, const std::vector<Lot>& lots) {
      w.Key(key);
      w.StartArray();
      for (const Lot& l : lots) {
        w.StartObject();
        w.Key("lotId");
        if (l.lot_id > 0)
          w.Int(l.lot_id);
        else
          w.Null();  // an applied grant's credit, not folded yet
        w.Field("grantId", l.grant_id);
        w.Field("amount", l.amount);
        w.Field("remaining", l.remaining);
        w.Field("reserved", l.reserved);
        w.Field("createdAt", FormatTime(l.created_us));
        w.Field("expiresAt", FormatTime(l.expires_us));
        // Expired: only what open holds reserve is left, kept for them.
        w.Field("status", l.expired ? "expired" : "active");
        w.EndObject();
      }
      w.EndArray();
    };
    write_lots("lots", r->lots);
    write_lots("pending", r->pending);
    w.Key("neverExpiring");
    w.StartObject();
    w.Field("remaining", r->never_expiring);
    w.Field("reserved", r->never_expiring_reserved);
    w.EndObject();
    w.Key("next");
    if (r->next_after_id)
      w.String(std::to_string(*r->next_after_id));
    else
      w.Null();
    w.EndObject();
    responder.Send(std::move(res));
  });
}

}  // namespace

void AddHoldRoutes(http::Router& router, PointCardService& service, std::shared_ptr<const Gate> gate) {
  using http::BodyPolicy;
  using http::Method;
  auto bind = [&service](auto fn) { return Bind(service, fn); };
  auto gated = [&service, &gate](auto fn) { return Gated(service, gate, fn); };
  router.Add(Method::kPost, "/api/v1/cards/{cardId}/holds", gated(CreateHold), BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/cards/{cardId}/holds", bind(ListHolds));
  router.Add(Method::kGet, "/api/v1/cards/{cardId}/lots", bind(ListLots));
  router.Add(Method::kPost, "/api/v1/cards/{cardId}/holds/{holdId}/capture", gated(CaptureHold), BodyPolicy::kJson);
  router.Add(Method::kPost, "/api/v1/cards/{cardId}/holds/{holdId}/void", gated(VoidHold), BodyPolicy::kJson);
}

}  // namespace hotrow::pointcard::routing
