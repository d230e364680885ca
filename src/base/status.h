// Status and Result: errors are values.
//
// Every operation that can fail at run time for a reason a client or operator
// must hear about (bad input, not found, conflict, overload, a broken backend)
// returns a Status or a Result<T>. The codes are protocol-neutral; exactly one
// function (http/errors.cc) maps them to HTTP statuses and the JSON error
// shape. Exceptions never cross a thread or an Asio completion handler.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hotrow {

// The fixed list of error codes a client can see. docs/api.md documents each
// one; add a code there when you add it here.
enum class ErrorCode {
  kOk = 0,
  kBadRequest,             // the request as a whole cannot be understood
  kInvalidField,           // one field (body, path or query) is wrong
  kUnauthorized,           // credentials required and missing
  kForbidden,              // credentials present but not sufficient
  kBadSignature,           // a signed request whose signature is missing or wrong (401)
  kNotFound,               // no such resource or route
  kMethodNotAllowed,       // route exists, method does not
  kNotImplemented,         // a method or transfer coding the server does not implement (501)
  kConflict,               // the resource's state forbids the change
  kAlreadyExists,          // a resource with that id exists already (409)
  kInsufficientBalance,    // a payment larger than the card's balance (409)
  kCardClosed,             // a payment or charge on a closed card (409)
  kNotRefundable,          // a refund of a row that is not a payment (409)
  kRefundExceedsOriginal,  // refunds past what the payment took (409)
  kHoldExpired,            // a capture or void of a hold at or after its expiry (409)
  kHoldNotOpen,            // a capture or void of a hold captured or voided already (409)
  kGrantInProgress,        // a point grant is already running (409)
  kPeriodAlreadyGranted,   // a grant's period overlaps an earlier grant's (409)
  kIdempotencyMismatch,    // an Idempotency-Key reused with a different request (422)
  kRateLimited,            // more requests than a configured rate allows (429)
  kPayloadTooLarge,        // body over the limit
  kUnsupportedMediaType,   // body that is not application/json
  kHeadersTooLarge,        // header block over the limit
  kOverloaded,             // a bounded queue or pool is full; retry later
  kUnavailable,            // shutting down, or a backend is unreachable
  kInternal,               // a bug or an unexpected backend failure
};

// The wire name of a code ("invalid_field").
std::string_view ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, std::string field = {})
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The one field at fault, or empty.
  const std::string& field() const { return field_; }

  // What an operator needs and a client must not see (a backend's message,
  // the statement it was running): logged with the request id when the
  // error is answered, never put in a response body.
  const std::string& detail() const { return detail_; }
  Status&& WithDetail(std::string detail) && {
    detail_ = std::move(detail);
    return std::move(*this);
  }
  // The SQLSTATE of a PostgreSQL error ("40001"), or empty: a field, so
  // that callers never parse it back out of text.
  std::string_view sqlstate() const { return std::string_view(sqlstate_, sqlstate_[0] ? 5 : 0); }
  Status&& WithSqlState(std::string_view state) && {
    for (size_t i = 0; i < 5; ++i) sqlstate_[i] = i < state.size() ? state[i] : '\0';
    return std::move(*this);
  }

  // Convenience constructors, one per code that is built often.
  static Status BadRequest(std::string m) { return {ErrorCode::kBadRequest, std::move(m)}; }
  static Status InvalidField(std::string field, std::string m) {
    return {ErrorCode::kInvalidField, std::move(m), std::move(field)};
  }
  // invalid_field: "<field> must be an integer from <min> to <max>", built
  // from the bounds the check enforces.
  static Status OutOfRange(const std::string& field, int64_t min, int64_t max) {
    return InvalidField(field,
                        field + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  static Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
  static Status Conflict(std::string m) { return {ErrorCode::kConflict, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {ErrorCode::kAlreadyExists, std::move(m)}; }
  static Status Unauthorized(std::string m) { return {ErrorCode::kUnauthorized, std::move(m)}; }
  static Status Forbidden(std::string m) { return {ErrorCode::kForbidden, std::move(m)}; }
  static Status Overloaded(std::string m) { return {ErrorCode::kOverloaded, std::move(m)}; }
  static Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::string field_;
  std::string detail_;
  char sqlstate_[6] = {};
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "a Result built from a Status must carry an error");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hotrow
