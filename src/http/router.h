// Maps (method, path) to a handler.
//
// Patterns are '/'-separated segments; "{name}" matches one non-empty
// segment, which reaches the handler percent-decoded in Request::params.
// When several patterns match a path the one with the most literal segments
// wins, so "/datePlan/ranking" takes precedence over "/datePlan/{id}". The
// winning pattern alone decides: a method it does not have is 405 with Allow,
// never a fall-through to a less specific pattern.
//
// Methods the router answers itself (RFC 9110 §9): HEAD on a route with GET
// runs the GET handler (the connection drops the body, keeps the headers);
// OPTIONS is 204 with Allow; a method hotrow does not know at all (TRACE,
// "get") is 501 not_implemented, an absent known one 405 with Allow.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"

namespace hotrow::http {

using Handler = std::function<void(Request&, Responder)>;

// Whether a route reads a body, which decides the Content-Type check.
enum class BodyPolicy {
  kNone,  // any body and Content-Type are ignored
  kJson,  // Content-Type must be application/json when present, else 415
};

class Router {
 public:
  void Add(Method method, std::string_view pattern, Handler handler, BodyPolicy body = BodyPolicy::kNone);

  // Routes the request, answering 404 / 405 / 415 itself.
  void Dispatch(Request& request, Responder responder) const;

  // Every (method, pattern) added, in order: for the OpenAPI check.
  std::vector<std::pair<Method, std::string>> Routes() const;

 private:
  struct MethodHandler {
    Method method;
    Handler handler;
    BodyPolicy body;
  };
  struct Route {
    std::vector<std::string> segments;  // "{...}" marks a parameter
    int literal_count = 0;
    std::vector<MethodHandler> methods;
    std::string allow;            // "GET, HEAD, PUT, OPTIONS": the methods, for Allow
    RouteStats* stats = nullptr;  // its counters in GET /metrics
  };
  static std::string AllowOf(const std::vector<MethodHandler>& methods);
  const MethodHandler* Find(const Route& route, Method method) const;
  static constexpr size_t kPathSegmentsMax = 16;
  static constexpr size_t kParamsMax = 4;
  struct ParamViews {
    std::array<std::string_view, kParamsMax> views;
    size_t count = 0;
  };
  const Route* Match(std::string_view path, ParamViews* params) const;

  std::vector<Route> routes_;
};

// True when a Content-Type value names JSON ("application/json", optionally
// with "; charset=utf-8"), case-insensitively.
bool IsJsonContentType(std::string_view content_type);

}  // namespace hotrow::http
