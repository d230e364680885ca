// hotrow grant: asks a running server for a point grant (POST /api/v1/grants).
#include <cstdio>

#include "cmd/commands.h"
#include "http/client.h"
#include "http/json.h"
#include "ops/log.h"

namespace hotrow::cmd {

CLI::App* AddGrant(CLI::App& app, GrantFlags& f) {
  CLI::App* c = app.add_subcommand("grant", "Run a point grant on a running server");
  c->add_option("--url", f.url, "The server")->envname("HOTROW_URL")->capture_default_str();
  c->add_option("--from", f.from, "Start of the period (RFC 3339, inclusive)")->required();
  c->add_option("--to", f.to, "End of the period (RFC 3339, exclusive, not in the future)")->required();
  c->add_option("--rate-percent", f.rate_percent, "Bonus: floor(charges in the period x rate / 100)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  c->add_option("--admin-token", f.admin_token, "The server's admin token")->envname("HOTROW_ADMIN_TOKEN");
  c->add_option("--idempotency-key", f.idempotency_key, "Makes a retry safe: the same key runs the grant once");
  c->add_flag("--allow-overlap", f.allow_overlap,
              "Grant even when the period overlaps an earlier grant's (else 409 period_already_granted)");
  return c;
}

int RunGrant(const GrantFlags& f) {
  std::string host;
  uint16_t port = 0;
  if (!http::ParseHttpUrl(f.url, &host, &port)) {
    log::Error("--url must look like http://host:port, not '{}'", f.url);
    return 2;
  }
  std::string body;
  http::JsonWriter w(body);
  w.StartObject();
  w.Field("from", f.from);
  w.Field("to", f.to);
  w.Field("ratePercent", f.rate_percent);
  if (f.allow_overlap) {
    w.Key("allowOverlap");
    w.Bool(true);
  }
  w.EndObject();
  http::Headers headers;
  if (!f.admin_token.empty()) headers.emplace_back("Authorization", "Bearer " + f.admin_token);
  if (!f.idempotency_key.empty()) headers.emplace_back("Idempotency-Key", f.idempotency_key);
  try {
    http::HttpClient client(host, port, std::chrono::minutes(10));
    auto r = client.Post("/api/v1/grants", body, headers);
    std::printf("%s\n", r.body.c_str());
    if (r.status != 201) {
      log::Error("the server answered {}", r.status);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    log::Error("cannot reach {}: {}", f.url, e.what());
    return 1;
  }
}

}  // namespace hotrow::cmd
