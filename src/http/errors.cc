#include "http/errors.h"

#include "http/json.h"

namespace hotrow::http {

int HttpStatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 200;
    case ErrorCode::kBadRequest: return 400;
    case ErrorCode::kInvalidField: return 400;
    case ErrorCode::kUnauthorized: return 401;
    case ErrorCode::kForbidden: return 403;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kMethodNotAllowed: return 405;
    case ErrorCode::kNotImplemented: return 501;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kInsufficientBalance: return 409;
    case ErrorCode::kGrantInProgress: return 409;
    case ErrorCode::kPeriodAlreadyGranted: return 409;
    case ErrorCode::kIdempotencyMismatch: return 422;
    case ErrorCode::kPayloadTooLarge: return 413;
    case ErrorCode::kUnsupportedMediaType: return 415;
    case ErrorCode::kHeadersTooLarge: return 431;
    case ErrorCode::kOverloaded: return 503;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

Response ErrorResponse(const Status& status) {
  Response r;
  r.status = HttpStatusFor(status.code());
  JsonWriter w(r.body);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("code");
  w.String(ErrorCodeName(status.code()));
  w.Key("message");
  w.String(status.message());
  if (!status.field().empty()) {
    w.Key("field");
    w.String(status.field());
  }
  w.EndObject();
  w.EndObject();
  if (r.status == 503) r.AddHeader("Retry-After", std::to_string(kRetryAfterSeconds));
  if (r.status == 401) r.AddHeader("WWW-Authenticate", "Bearer");
  return r;
}

}  // namespace hotrow::http
