#include "http/router.h"

#include <array>
#include <cassert>

#include "http/errors.h"
#include "http/query.h"
#include "http/route_stats.h"

namespace hotrow::http {

namespace {

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  if (path.empty() || path[0] != '/') return parts;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

bool IsParam(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool IsJsonContentType(std::string_view content_type) {
  size_t semi = content_type.find(';');
  if (!EqualsIgnoreCase(Trim(content_type.substr(0, semi)), "application/json")) return false;
  while (semi != std::string_view::npos) {
    content_type.remove_prefix(semi + 1);
    semi = content_type.find(';');
    std::string_view param = Trim(content_type.substr(0, semi));
    size_t eq = param.find('=');
    if (eq == std::string_view::npos) continue;
    if (EqualsIgnoreCase(Trim(param.substr(0, eq)), "charset")) {
      std::string_view value = Trim(param.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      if (!EqualsIgnoreCase(value, "utf-8")) return false;
    }
  }
  return true;
}

void Router::Add(Method method, std::string_view pattern, Handler handler, BodyPolicy body) {
  std::vector<std::string> segments;
  for (auto s : SplitPath(pattern)) segments.emplace_back(s);
  for (auto& r : routes_) {
    if (r.segments == segments) {
      for (auto& m : r.methods) assert(m.method != method && "route registered twice");
      r.methods.push_back({method, std::move(handler), body});
      r.allow = AllowOf(r.methods);
      return;
    }
  }
  Route r;
  r.stats = &RouteStatsFor(pattern);
  r.segments = std::move(segments);
  for (auto& s : r.segments) r.literal_count += IsParam(s) ? 0 : 1;
  r.methods.push_back({method, std::move(handler), body});
  r.allow = AllowOf(r.methods);
  routes_.push_back(std::move(r));
}

std::string Router::AllowOf(const std::vector<MethodHandler>& methods) {
  bool has_head = false, has_options = false;
  for (const auto& m : methods) {
    has_head = has_head || m.method == Method::kHead;
    has_options = has_options || m.method == Method::kOptions;
  }
  std::string allow;
  for (const auto& m : methods) {
    if (!allow.empty()) allow += ", ";
    allow += MethodName(m.method);
    if (m.method == Method::kGet && !has_head) allow += ", HEAD";
  }
  if (!has_options) allow += ", OPTIONS";
  return allow;
}

const Router::MethodHandler* Router::Find(const Route& route, Method method) const {
  for (const auto& m : route.methods)
    if (m.method == method) return &m;
  if (method == Method::kHead) return Find(route, Method::kGet);
  return nullptr;
}

// Walks the path's segments without allocating: a path has at most
// kPathSegmentsMax segments worth matching (routes are short).
const Router::Route* Router::Match(std::string_view path, ParamViews* params) const {
  std::array<std::string_view, kPathSegmentsMax> parts;
  size_t count = 0;
  if (path.empty() || path[0] != '/') return nullptr;
  path.remove_prefix(1);
  while (true) {
    if (count == parts.size()) return nullptr;
    size_t slash = path.find('/');
    parts[count++] = path.substr(0, slash);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  const Route* best = nullptr;
  for (const auto& r : routes_) {
    if (r.segments.size() != count) continue;
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i)
      ok = IsParam(r.segments[i]) ? !parts[i].empty() : r.segments[i] == parts[i];
    if (ok && (!best || r.literal_count > best->literal_count)) best = &r;
  }
  if (best) {
    params->count = 0;
    for (size_t i = 0; i < count; ++i)
      if (IsParam(best->segments[i]) && params->count < params->views.size()) params->views[params->count++] = parts[i];
  }
  return best;
}

std::vector<std::pair<Method, std::string>> Router::Routes() const {
  std::vector<std::pair<Method, std::string>> out;
  for (const auto& r : routes_) {
    std::string pattern;
    for (const auto& s : r.segments) pattern += "/" + s;
    for (const auto& m : r.methods) out.emplace_back(m.method, pattern);
  }
  return out;
}

void Router::Dispatch(Request& request, Responder responder) const {
  if (request.method == Method::kOther) {
    responder.Send(ErrorResponse(
        {ErrorCode::kNotImplemented, "method " + std::string(request.method_name) + " is not implemented"}));
    return;
  }
  ParamViews raw_params;
  const Route* route = Match(request.path, &raw_params);
  if (!route) {
    responder.Send(ErrorResponse(Status::NotFound("no resource at " + std::string(request.path))));
    return;
  }
  request.route = route->stats;
  const MethodHandler* mh = Find(*route, request.method);
  if (!mh && request.method == Method::kOptions) {
    Response r;
    r.status = 204;
    r.AddHeader("Allow", route->allow);
    responder.Send(std::move(r));
    return;
  }
  if (!mh) {
    Response r = ErrorResponse({ErrorCode::kMethodNotAllowed, std::string(MethodName(request.method)) +
                                                                  " is not allowed here; allowed: " + route->allow});
    r.AddHeader("Allow", route->allow);
    responder.Send(std::move(r));
    return;
  }
  if (mh->body == BodyPolicy::kJson) {
    std::string_view ct = request.Header("Content-Type");
    if (request.HasHeader("Content-Type") && !IsJsonContentType(ct)) {
      responder.Send(ErrorResponse(
          {ErrorCode::kUnsupportedMediaType, "Content-Type must be application/json, not '" + std::string(ct) + "'"}));
      return;
    }
  }
  // Reuse the strings' capacity from the connection's previous request.
  request.params.resize(raw_params.count);
  for (size_t i = 0; i < raw_params.count; ++i) {
    if (!PercentDecode(raw_params.views[i], request.params[i], false)) {
      responder.Send(ErrorResponse(Status::BadRequest("malformed percent-escape in the path")));
      return;
    }
  }
  mh->handler(request, std::move(responder));
}

}  // namespace hotrow::http
