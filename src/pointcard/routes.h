// HTTP routes of the point card:
//   POST /api/v1/cards/{cardId}/transactions   point use; Idempotency-Key optional
//   GET  /api/v1/cards/{cardId}
//   GET  /api/v1/cards/{cardId}/transactions   ?limit=20&before=<cursor>
//   GET  /api/v1/regions
//   GET  /api/v1/regions/{regionId}/stores
//   POST /api/v1/grants                        admin; Idempotency-Key optional
//   POST, GET /api/v1/stores/{storeId}/keys, DELETE .../keys/{keyId}   admin
// (and cards, stores: docs/api.md).
#pragma once

#include "base/auth.h"
#include "http/router.h"
#include "pointcard/service.h"

namespace hotrow::pointcard {

struct RouteOptions {
  // Point uses need a store key or the admin token (401 without).
  bool require_store_keys = false;
};

void AddRoutes(http::Router& router, PointCardService& service, const AdminAuth& admin, RouteOptions options = {});

}  // namespace hotrow::pointcard
