// The one place where error codes become HTTP statuses and the one JSON error
// shape: {"error":{"code":"invalid_field","message":"...","field":"title"}}.
#pragma once

#include "base/status.h"
#include "http/message.h"

namespace hotrow::http {

// The HTTP status for a code (kInvalidField -> 400, kOverloaded -> 503, ...).
int HttpStatusFor(ErrorCode code);

// A complete error response for a non-OK status, with the headers its status
// calls for (Retry-After on 503, WWW-Authenticate on 401). A 500, or a
// status with a detail(), is logged with a fresh request id that the body
// carries as "requestId"; a 500's message is always "internal error".
Response ErrorResponse(const Status& status);

// Seconds a client should wait after a 503 before retrying.
inline constexpr int kRetryAfterSeconds = 1;

}  // namespace hotrow::http
