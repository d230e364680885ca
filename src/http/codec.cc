#include "http/codec.h"

#include <charconv>
#include <ctime>

namespace hotrow::http {

namespace bhttp = boost::beast::http;

namespace {

Method ToMethod(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get: return Method::kGet;
    case bhttp::verb::head: return Method::kHead;
    case bhttp::verb::post: return Method::kPost;
    case bhttp::verb::put: return Method::kPut;
    case bhttp::verb::patch: return Method::kPatch;
    case bhttp::verb::delete_: return Method::kDelete;
    case bhttp::verb::options: return Method::kOptions;
    default: return Method::kOther;
  }
}

// The Date header, formatted once per second per thread.
std::string_view HttpDate() {
  thread_local std::time_t cached_second = 0;
  thread_local char buffer[40];
  std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    cached_second = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buffer, sizeof buffer, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }
  return buffer;
}

}  // namespace

Request& Codec::BuildRequest() {
  auto& msg = parser_->get();
  request_.method = ToMethod(msg.method());
  std::string_view target(msg.target().data(), msg.target().size());
  request_.target = target;
  size_t q = target.find('?');
  request_.path = target.substr(0, q);
  request_.query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  request_.body = std::string_view(msg.body().data(), msg.body().size());
  request_.headers.clear();
  for (const auto& field : msg)
    request_.headers.emplace_back(std::string_view(field.name_string().data(), field.name_string().size()),
                                  std::string_view(field.value().data(), field.value().size()));
  request_.spare_body = &spare_;
  keep_alive_ = msg.keep_alive();
  http10_keep_alive_ = keep_alive_ && msg.version() < 11;
  return request_;
}

void Codec::AppendHead(std::string& out, const Response& r, bool close, bool keep_alive_header) {
  char number[24];
  auto append_number = [&](uint64_t v) {
    auto [end, ec] = std::to_chars(number, number + sizeof number, v);
    out.append(number, static_cast<size_t>(end - number));
  };
  out.append("HTTP/1.1 ");
  append_number(static_cast<uint64_t>(r.status));
  out.push_back(' ');
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
  out.append(reason.data(), reason.size());
  out.append("\r\nServer: hotrow\r\nDate: ");
  out.append(HttpDate());
  out.append("\r\n");
  bool bodiless = r.status == 204 || r.status == 304 || r.status < 200;
  if (!bodiless) {
    out.append("Content-Type: ");
    out.append(r.content_type);
    out.append("\r\nContent-Length: ");
    append_number(r.body.size());
    out.append("\r\n");
  }
  for (const auto& [name, value] : r.headers) {
    out.append(name);
    out.append(": ");
    out.append(value);
    out.append("\r\n");
  }
  if (close) out.append("Connection: close\r\n");
  else if (keep_alive_header) out.append("Connection: keep-alive\r\n");
  out.append("\r\n");
}

}  // namespace hotrow::http
