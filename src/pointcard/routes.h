// HTTP routes of the point card:
//   POST /api/v1/cards/{cardId}/transactions   point use; Idempotency-Key optional
//   GET  /api/v1/cards/{cardId}
//   GET  /api/v1/cards/{cardId}/transactions   ?limit=20&before=<cursor>
//   GET  /api/v1/regions
//   GET  /api/v1/regions/{regionId}/stores
//   POST /api/v1/grants                        admin; Idempotency-Key optional
#pragma once

#include "base/auth.h"
#include "http/router.h"
#include "pointcard/service.h"

namespace hotrow::pointcard {

void AddRoutes(http::Router& router, PointCardService& service, const AdminAuth& admin);

}  // namespace hotrow::pointcard
