// What the point card's route files share (routes.cc: cards, payments,
// refunds, grants; hold_routes.cc: holds and lots; store_routes.cc:
// regions, stores, store keys): the error answer, path, page and body
// helpers, and the Gate that decides who asks.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/auth.h"
#include "http/errors.h"
#include "http/json.h"
#include "http/query.h"
#include "http/router.h"
#include "pointcard/routes.h"
#include "pointcard/service.h"

namespace hotrow::pointcard::routing {

using http::Request;
using http::Response;

inline Response Error(const Status& s) { return http::ErrorResponse(s); }

// An optional string field: absent is nullopt; present, it must be a string.
inline Result<std::optional<std::string>> OptionalText(const http::JsonObject& body, std::string_view name) {
  if (!body.Has(name)) return std::optional<std::string>();
  auto text = body.String(name);
  if (!text.ok()) return text.status();
  return std::optional<std::string>(std::move(text).value());
}

// A row's optional "reference" and "reason" (a payment's, a refund's).
inline Status ReadRowTexts(const http::JsonObject& body, std::optional<std::string>* reference,
                           std::optional<std::string>* reason) {
  auto r = OptionalText(body, "reference");
  if (!r.ok()) return r.status();
  auto why = OptionalText(body, "reason");
  if (!why.ok()) return why.status();
  *reference = std::move(r).value();
  *reason = std::move(why).value();
  return Status::Ok();
}

// Who asks for a write: the admin token, a store key (its use checked in
// the write's transaction), or nobody.
struct Caller {
  std::string actor{kActorAnonymous};  // the row's ACTOR
  std::optional<KeyUse> key{};
};

// Credentials: the admin token and store keys (--require-store-keys). The
// HTTP layer throttles clients whose credentials fail (http/server.h,
// --auth-failures-max): every 401 and 403 here counts, a store key's
// refusal in its transaction too.
class Gate {
 public:
  Gate(const AdminAuth& admin, RouteOptions options) : admin_(admin), options_(options) {}

  // The admin token (401, 403 otherwise).
  Status Admin(const Request& req) const { return admin_.Check(http::BearerToken(req)); }

  // A point use's caller. Without credentials: anonymous, or 401 under
  // --require-store-keys. A credential that is given must be the admin
  // token or have a store key's shape (a wrong one is not recorded as an
  // anonymous request); a store key itself is checked by the store.
  Result<Caller> StoreCaller(const Request& req) const {
    if (!req.HasHeader("Authorization")) {
      if (options_.require_store_keys)
        return Status(ErrorCode::kUnauthorized,
                      "this server takes point uses with a store key only: 'Authorization: Bearer <keyId>.<secret>'",
                      "Authorization");
      return Caller{};
    }
    return Credential(req, options_.require_store_keys ? "" : "; leave it out for an anonymous request");
  }

  // The admin token or any store's key (POST /api/v1/cards).
  Result<Caller> AdminOrStoreKey(const Request& req) const {
    if (!req.HasHeader("Authorization"))
      return Status(ErrorCode::kUnauthorized, "this action needs 'Authorization: Bearer <admin token>' or a store key",
                    "Authorization");
    return Credential(req, "");
  }

 private:
  Result<Caller> Credential(const Request& req, std::string_view hint) const {
    auto bearer = http::BearerToken(req);
    if (bearer && admin_.Matches(bearer)) return Caller{.actor = std::string(kActorAdmin)};
    if (bearer) {
      if (auto key = PointCardService::ParseStoreKey(*bearer)) return Caller{KeyActor(key->key_id), std::move(key)};
    }
    return Status(
        ErrorCode::kUnauthorized,
        "Authorization must be 'Bearer <keyId>.<secret>' (a store key) or 'Bearer <admin token>'" + std::string(hint),
        "Authorization");
  }

  const AdminAuth& admin_;
  const RouteOptions options_;
};

// The path's `at`th parameter (0: the first) as an id.
inline Result<int64_t> PathId(const Request& req, const char* field, size_t at = 0) {
  auto id = ParsePositiveId(req.params.at(at));
  if (!id) return Status::InvalidField(field, std::string(field) + " must be an integer from 1 to 9223372036854775807");
  return *id;
}

// A body that is empty or {} (routes whose request is their path).
inline Status NoFields(const Request& req) {
  if (req.body.empty()) return Status::Ok();
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return body.status();
  return body->OnlyFields({});
}

inline std::optional<std::string> IdempotencyKey(const Request& req) {
  if (!req.HasHeader("Idempotency-Key")) return std::nullopt;
  return std::string(req.Header("Idempotency-Key"));
}

// A page's ?limit= (default_limit by default) and its cursor, a previous
// page's next: ?before= of a card's history or holds, ?after= of its lots.
struct Page {
  int64_t limit = kHistoryLimitDefault;
  std::optional<int64_t> cursor{};
};
inline Result<Page> ReadPage(const Request& req, int64_t default_limit = kHistoryLimitDefault,
                             const char* cursor = "before") {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return query.status();
  auto limit = query->Int("limit", default_limit);
  if (!limit.ok()) return limit.status();
  Page page{.limit = *limit};
  if (auto text = query->Get(cursor)) {
    auto v = ParsePositiveId(*text);
    if (!v) return Status::InvalidField(cursor, std::string(cursor) + " must be a cursor from a previous page");
    page.cursor = *v;
  }
  return page;
}

// A history row as the API shows it (routes.cc).
void WriteRow(http::JsonWriter& w, const HistoryRow& r);

// A handler of the service's, and one that needs the gate too, as the
// router calls them (the Add*Routes below register them).
template <typename Fn>
auto Bind(PointCardService& service, Fn fn) {
  return [&service, fn](Request& req, http::Responder res) { fn(service, req, std::move(res)); };
}
template <typename Fn>
auto Gated(PointCardService& service, std::shared_ptr<const Gate> gate, Fn fn) {
  return [&service, gate = std::move(gate), fn](Request& req, http::Responder res) {
    fn(service, *gate, req, std::move(res));
  };
}

// hold_routes.cc: a card's holds (make, capture, void, list) and lots.
void AddHoldRoutes(http::Router& router, PointCardService& service, std::shared_ptr<const Gate> gate);

// store_routes.cc: GET regions and stores, POST stores, store keys.
void AddStoreRoutes(http::Router& router, PointCardService& service, std::shared_ptr<const Gate> gate);

}  // namespace hotrow::pointcard::routing
