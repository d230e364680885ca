#include "base/status.h"

namespace hotrow {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kBadRequest:
      return "bad_request";
    case ErrorCode::kInvalidField:
      return "invalid_field";
    case ErrorCode::kUnauthorized:
      return "unauthorized";
    case ErrorCode::kForbidden:
      return "forbidden";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kMethodNotAllowed:
      return "method_not_allowed";
    case ErrorCode::kNotImplemented:
      return "not_implemented";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kInsufficientBalance:
      return "insufficient_balance";
    case ErrorCode::kCardClosed:
      return "card_closed";
    case ErrorCode::kNotRefundable:
      return "not_refundable";
    case ErrorCode::kRefundExceedsOriginal:
      return "refund_exceeds_original";
    case ErrorCode::kHoldExpired:
      return "hold_expired";
    case ErrorCode::kHoldNotOpen:
      return "hold_not_open";
    case ErrorCode::kGrantInProgress:
      return "grant_in_progress";
    case ErrorCode::kPeriodAlreadyGranted:
      return "period_already_granted";
    case ErrorCode::kIdempotencyMismatch:
      return "idempotency_mismatch";
    case ErrorCode::kBadSignature:
      return "bad_signature";
    case ErrorCode::kRateLimited:
      return "rate_limited";
    case ErrorCode::kPayloadTooLarge:
      return "payload_too_large";
    case ErrorCode::kUnsupportedMediaType:
      return "unsupported_media_type";
    case ErrorCode::kHeadersTooLarge:
      return "headers_too_large";
    case ErrorCode::kOverloaded:
      return "overloaded";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(ErrorCodeName(code_));
  s += ": ";
  s += message_;
  if (!field_.empty()) {
    s += " (field ";
    s += field_;
    s += ")";
  }
  if (!detail_.empty()) {
    s += " [";
    s += detail_;
    s += "]";
  }
  return s;
}

}  // namespace hotrow
