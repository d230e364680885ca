// POST /api/v1/echo: the reference's sync.Pool benchmark handler, for a
// like-for-like comparison: {"name":"test","id":"id1","country":
// "testCountry","age":10} comes back as it went, 400 on malformed input.
// All four fields are required and typed (name, id, country strings; age an
// integer), unknown fields are refused, as everywhere in hotrow.
#pragma once

#include "http/router.h"

namespace hotrow::http {

void AddEchoRoute(Router& router);

}  // namespace hotrow::http
