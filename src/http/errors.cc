#include "http/errors.h"

#include "http/json.h"
#include "ops/log.h"

namespace hotrow::http {

int HttpStatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return 200;
    case ErrorCode::kBadRequest:
      return 400;
    case ErrorCode::kInvalidField:
      return 400;
    case ErrorCode::kUnauthorized:
      return 401;
    case ErrorCode::kForbidden:
      return 403;
    case ErrorCode::kBadSignature:
      return 401;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kMethodNotAllowed:
      return 405;
    case ErrorCode::kNotImplemented:
      return 501;
    case ErrorCode::kConflict:
      return 409;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kInsufficientBalance:
      return 409;
    case ErrorCode::kCardClosed:
      return 409;
    case ErrorCode::kNotRefundable:
      return 409;
    case ErrorCode::kRefundExceedsOriginal:
      return 409;
    case ErrorCode::kHoldExpired:
      return 409;
    case ErrorCode::kHoldNotOpen:
      return 409;
    case ErrorCode::kGrantInProgress:
      return 409;
    case ErrorCode::kPeriodAlreadyGranted:
      return 409;
    case ErrorCode::kIdempotencyMismatch:
      return 422;
    case ErrorCode::kRateLimited:
      return 429;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kUnsupportedMediaType:
      return 415;
    case ErrorCode::kHeadersTooLarge:
      return 431;
    case ErrorCode::kOverloaded:
      return 503;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

Response ErrorResponse(const Status& status) {
  Response r;
  r.status = HttpStatusFor(status.code());
  // A failure of the server's own (500), or one with details only the log
  // may see, is logged under the request's id, which the connection adds to
  // the body (Codec::Serialize), so an operator can find it. A plain 503 (a
  // full queue) is not logged: under overload that would be a line per
  // request.
  r.error = true;
  if (r.status == 500 || !status.detail().empty()) {
    r.log_detail = std::make_unique<std::string>(status.ToString());
    r.log_as_error = r.status == 500;
  }
  JsonWriter w(r.body);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("code");
  w.String(ErrorCodeName(status.code()));
  w.Key("message");
  // A 500's own message may quote a statement or a backend's words: the
  // client gets the kind of failure and the id, the log gets the rest.
  w.String(status.code() == ErrorCode::kInternal ? std::string_view("internal error") : status.message());
  if (!status.field().empty()) {
    w.Key("field");
    w.String(status.field());
  }
  w.EndObject();
  w.EndObject();
  if (r.status == 503) r.AddHeader("Retry-After", std::to_string(kRetryAfterSeconds));
  // The scheme the request lacked: a signed post's, or the Bearer token's.
  if (r.status == 401)
    r.AddHeader("WWW-Authenticate", status.code() == ErrorCode::kBadSignature ? "HMAC-SHA256" : "Bearer");
  return r;
}

}  // namespace hotrow::http
