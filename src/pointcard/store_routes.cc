// The point card's master data and store keys over HTTP:
//   GET  /api/v1/regions, /api/v1/regions/{regionId}/stores, /api/v1/stores/{storeId}
//   POST /api/v1/stores                                          admin
//   POST, GET /api/v1/stores/{storeId}/keys, DELETE .../{keyId}  admin
#include <cstdint>

#include "pointcard/route_helpers.h"

namespace hotrow::pointcard::routing {

using http::JsonWriter;
using http::Responder;

namespace {

void Regions(PointCardService& service, const Request&, Responder responder) {
  Response res;
  JsonWriter w(res.body);
  w.StartObject();
  w.Key("regions");
  w.StartArray();
  for (const auto& r : service.regions()) {
    w.StartObject();
    w.Field("regionId", r.region_id);
    w.Field("name", r.name);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  responder.Send(std::move(res));
}

void WriteStore(JsonWriter& w, const StoreInfo& s) {
  w.StartObject();
  w.Field("storeId", s.store_id);
  w.Field("zipcode", s.zipcode);
  w.Field("address", s.address);
  w.Field("name", s.name);
  w.Field("regionId", s.region_id);
  w.Key("latitude");
  w.Double(s.latitude);
  w.Key("longitude");
  w.Double(s.longitude);
  w.EndObject();
}

void Stores(PointCardService& service, const Request& req, Responder responder) {
  auto region = PathId(req, "regionId");
  if (!region.ok()) return responder.Send(Error(region.status()));
  service.ListStores(*region, [responder](Result<std::vector<StoreInfo>> stores) mutable {
    if (!stores.ok()) return responder.Send(Error(stores.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Key("stores");
    w.StartArray();
    for (const auto& s : *stores) WriteStore(w, s);
    w.EndArray();
    w.EndObject();
    responder.Send(std::move(res));
  });
}

void GetStore(PointCardService& service, const Request& req, Responder responder) {
  auto id = PathId(req, "storeId");
  if (!id.ok()) return responder.Send(Error(id.status()));
  service.FindStore(*id, [responder](Result<StoreInfo> store) mutable {
    if (!store.ok()) return responder.Send(Error(store.status()));
    Response res;
    JsonWriter w(res.body);
    WriteStore(w, *store);
    responder.Send(std::move(res));
  });
}

// POST /api/v1/stores (admin): a new store.
void CreateStore(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"name", "regionId", "zipcode", "address", "latitude", "longitude"}); !s.ok())
    return responder.Send(Error(s));
  auto name = body->String("name");
  if (!name.ok()) return responder.Send(Error(name.status()));
  auto region = body->Integer("regionId", 1, INT64_MAX);
  if (!region.ok()) return responder.Send(Error(region.status()));
  auto zipcode = body->String("zipcode");
  if (!zipcode.ok()) return responder.Send(Error(zipcode.status()));
  auto address = body->String("address");
  if (!address.ok()) return responder.Send(Error(address.status()));
  auto latitude = body->Number("latitude");
  if (!latitude.ok()) return responder.Send(Error(latitude.status()));
  auto longitude = body->Number("longitude");
  if (!longitude.ok()) return responder.Send(Error(longitude.status()));
  NewStore store{.region_id = *region,
                 .name = std::move(name).value(),
                 .zipcode = std::move(zipcode).value(),
                 .address = std::move(address).value(),
                 .latitude = *latitude,
                 .longitude = *longitude,
                 .idempotency_key = IdempotencyKey(req)};
  service.CreateStore(std::move(store), [responder](Result<std::pair<StoreInfo, bool>> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    res.status = 201;
    JsonWriter w(res.body);
    WriteStore(w, r->first);
    if (r->second) res.AddHeader("Idempotent-Replayed", "true");
    responder.Send(std::move(res));
  });
}

void WriteKey(JsonWriter& w, const StoreKey& k) {
  w.Field("keyId", k.key_id);
  w.Field("storeId", k.store_id);
  w.Field("createdAt", FormatTime(k.created_us));
  w.Key("lastUsedAt");
  if (k.last_used_us)
    w.String(FormatTime(*k.last_used_us));
  else
    w.Null();
  if (k.revoked_us) w.Field("revokedAt", FormatTime(*k.revoked_us));
}

// POST /api/v1/stores/{storeId}/keys (admin): no body, or {}. The key is
// in this answer only (Cache-Control: no-store). Not idempotent: the
// server cannot show a secret twice, so a retry makes a second key (revoke
// the one that went unused).
void CreateStoreKey(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  auto store = PathId(req, "storeId");
  if (!store.ok()) return responder.Send(Error(store.status()));
  if (Status s = NoFields(req); !s.ok()) return responder.Send(Error(s));
  if (req.HasHeader("Idempotency-Key"))
    return responder.Send(
        Error(Status::InvalidField("Idempotency-Key",
                                   "a store key is shown once and cannot be replayed: leave out Idempotency-Key, and "
                                   "revoke a key whose answer was lost")));
  service.CreateStoreKey(*store, [responder](Result<std::pair<StoreKey, std::string>> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    res.status = 201;
    JsonWriter w(res.body);
    w.StartObject();
    WriteKey(w, r->first);
    w.Field("key", r->second);
    w.EndObject();
    res.AddHeader("Cache-Control", "no-store");
    responder.Send(std::move(res));
  });
}

// GET /api/v1/stores/{storeId}/keys (admin): metadata only, never a secret.
void ListStoreKeys(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  auto store = PathId(req, "storeId");
  if (!store.ok()) return responder.Send(Error(store.status()));
  service.ListStoreKeys(*store, [responder](Result<std::vector<StoreKey>> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    JsonWriter w(res.body);
    w.StartObject();
    w.Key("keys");
    w.StartArray();
    for (const auto& k : *r) {
      w.StartObject();
      WriteKey(w, k);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    res.AddHeader("Cache-Control", "no-store");
    responder.Send(std::move(res));
  });
}

// DELETE /api/v1/stores/{storeId}/keys/{keyId} (admin): 204, again for a
// key revoked before; 404 when the store has no such key.
void RevokeStoreKey(PointCardService& service, const Gate& gate, Request& req, Responder responder) {
  if (Status s = gate.Admin(req); !s.ok()) return responder.Send(Error(s));
  auto store = PathId(req, "storeId");
  if (!store.ok()) return responder.Send(Error(store.status()));
  const std::string& key_id = req.params.at(1);
  if (!IsCredentialId(key_id))
    return responder.Send(Error(Status::NotFound("store " + std::to_string(*store) + " has no such key")));
  service.RevokeStoreKey(*store, key_id, [responder](Result<StoreKey> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res;
    res.status = 204;
    responder.Send(std::move(res));
  });
}

}  // namespace

void AddStoreRoutes(http::Router& router, PointCardService& service, std::shared_ptr<const Gate> gate) {
  using http::BodyPolicy;
  using http::Method;
  auto bind = [&service](auto fn) { return Bind(service, fn); };
  auto gated = [&service, &gate](auto fn) { return Gated(service, gate, fn); };
  router.Add(Method::kGet, "/api/v1/regions", bind(Regions));
  router.Add(Method::kGet, "/api/v1/regions/{regionId}/stores", bind(Stores));
  router.Add(Method::kGet, "/api/v1/stores/{storeId}", bind(GetStore));
  router.Add(Method::kPost, "/api/v1/stores", gated(CreateStore), BodyPolicy::kJson);
  router.Add(Method::kPost, "/api/v1/stores/{storeId}/keys", gated(CreateStoreKey), BodyPolicy::kJson);
  router.Add(Method::kGet, "/api/v1/stores/{storeId}/keys", gated(ListStoreKeys));
  router.Add(Method::kDelete, "/api/v1/stores/{storeId}/keys/{keyId}", gated(RevokeStoreKey));
}

}  // namespace hotrow::pointcard::routing
