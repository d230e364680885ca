// hotrow backup: a consistent copy of an embedded database while it serves.
// hotrow probe: the container's HEALTHCHECK (the image has no curl).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "cmd/commands.h"
#include "db/sqlite.h"
#include "db/store_url.h"
#include "http/client.h"
#include "ops/log.h"
#include "pointcard/sqlite_file.h"

namespace hotrow::cmd {

CLI::App* AddBackup(CLI::App& app, BackupFlags& f) {
  CLI::App* c = app.add_subcommand(
      "backup",
      "Copy an embedded (SQLite) database to a new file, consistently, while a server uses it (VACUUM INTO); "
      "for PostgreSQL use pg_dump (docs/deploy.md)");
  c->add_option("--db", f.db, "Store URL: sqlite:PATH")->envname("HOTROW_DB")->capture_default_str();
  c->add_option("--out", f.out, "The backup file to write; it must not exist")->required();
  return c;
}

int RunBackup(const BackupFlags& f) {
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  if (url->kind != db::StoreUrl::Kind::kSqlite) {
    log::Error("hotrow backup copies SQLite databases; for PostgreSQL use pg_dump (docs/deploy.md)");
    return 2;
  }
  std::error_code ec;
  if (f.out.empty() || f.out.rfind("file:", 0) == 0) {
    log::Error("--out must be a file name (not empty, not a file: URI)");
    return 2;
  }
  // The point card's file goes beside the copy with the same suffix, so
  // OUT is restored as it is (docs/deploy.md#backups).
  std::vector<std::pair<std::string, std::string>> copies = {{url->sqlite_path, f.out}};
  std::string card_file = pointcard::PointCardPath(url->sqlite_path);
  if (std::filesystem::exists(card_file, ec)) copies.emplace_back(card_file, pointcard::PointCardPath(f.out));
  for (const auto& [from, to] : copies) {
    // symlink_status: a dangling link is there too, and is not followed.
    if (std::filesystem::exists(std::filesystem::symlink_status(to, ec))) {
      log::Error("{} exists; hotrow backup writes new files only", to);
      return 2;
    }
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    const auto& [from, to] = copies[i];
    // A read transaction sees one snapshot (WAL): the copy is consistent
    // while the server keeps writing, and the server does not wait for it.
    // The two files are two snapshots: no transaction spans both (the
    // point card shares nothing with the other domains).
    auto conn = db::sqlite::Connection::Open(from, db::sqlite::OpenMode::kReadOnly);
    Status s = conn.ok() ? Status::Ok() : conn.status();
    if (s.ok()) {
      auto q = (*conn)->Prepare("VACUUM INTO ?1");
      s = q.ok() ? q->Bind(1, to).Run() : q.status();
    }
    if (!s.ok()) {
      log::Error("backup of {} failed: {}", from, s.ToString());
      for (size_t j = 0; j <= i; ++j) std::filesystem::remove(copies[j].second, ec);
      return 1;
    }
    auto bytes = std::filesystem::file_size(to, ec);
    std::printf("backed up %s to %s (%llu bytes)\n", from.c_str(), to.c_str(),
                static_cast<unsigned long long>(ec ? 0 : bytes));
  }
  return 0;
}

CLI::App* AddProbe(CLI::App& app, ProbeFlags& f) {
  CLI::App* c = app.add_subcommand("probe", "GET a URL; exit 0 on a 2xx answer, 1 otherwise (a container HEALTHCHECK)");
  c->add_option("url", f.url, "http://host:port/path, such as http://127.0.0.1:8080/readyz")->required();
  c->add_option("--timeout-ms", f.timeout_ms, "Give up after this")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  return c;
}

int RunProbe(const ProbeFlags& f) {
  std::string host;
  uint16_t port = 0;
  if (!http::ParseHttpUrl(f.url, &host, &port)) {
    std::fprintf(stderr, "probe: %s is not http://host[:port]/path\n", f.url.c_str());
    return 2;
  }
  size_t path = f.url.find('/', 7);
  std::string target = path == std::string::npos ? "/" : f.url.substr(path);
  // The whole probe, connect included, within --timeout-ms: the client's
  // socket timeouts alone do not bound a peer that trickles bytes. Past the
  // deadline the process leaves, whatever the request thread is doing.
  auto result = std::make_shared<std::promise<int>>();
  std::future<int> done = result->get_future();
  std::thread([=] {
    try {
      http::HttpClient client(host, port, std::chrono::milliseconds(f.timeout_ms));
      auto r = client.Get(target);
      std::printf("%d %s\n", r.status, r.body.substr(0, 300).c_str());
      result->set_value(r.status >= 200 && r.status < 300 ? 0 : 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "probe: %s: %s\n", f.url.c_str(), e.what());
      result->set_value(1);
    }
  }).detach();
  if (done.wait_for(std::chrono::milliseconds(f.timeout_ms)) != std::future_status::ready) {
    std::fprintf(stderr, "probe: %s: no answer within %d ms\n", f.url.c_str(), f.timeout_ms);
    std::fflush(nullptr);
    std::_Exit(1);
  }
  int code = done.get();
  std::fflush(nullptr);
  std::_Exit(code);  // the request thread is detached: leave without destructors
}

}  // namespace hotrow::cmd
