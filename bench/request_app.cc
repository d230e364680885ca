#include "request_app.h"

#include <filesystem>
#include <random>

#include "base/auth.h"
#include "dateplan/routes.h"
#include "dateplan/seed.h"
#include "dateplan/service.h"
#include "dateplan/sqlite_store.h"
#include "db/sqlite_database.h"
#include "http/echo.h"
#include "http/router.h"
#include "leaderboard/routes.h"
#include "leaderboard/service.h"
#include "leaderboard/sqlite_store.h"
#include "pointcard/routes.h"
#include "pointcard/seed.h"
#include "pointcard/service.h"
#include "pointcard/sqlite_file.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::bench {

struct RequestApp::Impl {
  std::string dir;
  AdminAuth admin{"bench"};
  std::unique_ptr<db::sqlite::Database> db;
  std::unique_ptr<db::sqlite::Database> card_db;  // under db's lock: destroyed first
  std::unique_ptr<dateplan::SqliteDatePlanStore> plan_store;
  std::unique_ptr<leaderboard::SqliteLeaderboardStore> board_store;
  std::unique_ptr<pointcard::SqlitePointCardStore> card_store;
  std::unique_ptr<dateplan::DatePlanService> plans;
  std::unique_ptr<pointcard::PointCardService> cards;
  std::unique_ptr<leaderboard::LeaderboardService> board;
  http::Router router;
  std::unique_ptr<http::InProcessConnection> connection;
};

RequestApp::RequestApp(AppOptions o) : impl_(std::make_unique<Impl>()) {
  auto& i = *impl_;
  char tmpl[] = "/tmp/hotrow-bench-app-XXXXXX";
  i.dir = mkdtemp(tmpl);
  auto db = db::sqlite::Database::Open(i.dir + "/app.db");
  if (!db.ok()) throw std::runtime_error(db.status().ToString());
  i.db = std::move(db).value();
  auto& conn = i.db->writer().connection();
  if (Status s = dateplan::SeedPlans(conn, o.plans, 42, nullptr); !s.ok()) throw std::runtime_error(s.ToString());
  if (Status s = leaderboard::SeedLeaderboard(conn, o.players, 42, nullptr); !s.ok())
    throw std::runtime_error(s.ToString());
  pointcard::SeedOptions seed;
  seed.cards = o.cards;
  seed.stores = 50;
  seed.history = o.cards * 2;
  // The point card in its own file, as the server keeps it.
  auto card_db = pointcard::OpenPointCardDatabase(*i.db);
  if (!card_db.ok()) throw std::runtime_error(card_db.status().ToString());
  i.card_db = std::move(card_db).value();
  if (Status s = pointcard::SeedPointCard(i.card_db->writer().connection(), seed, nullptr); !s.ok())
    throw std::runtime_error(s.ToString());
  i.plan_store = std::move(dateplan::SqliteDatePlanStore::Open(*i.db)).value();
  i.board_store = std::move(leaderboard::SqliteLeaderboardStore::Open(*i.db)).value();
  i.card_store = std::move(pointcard::SqlitePointCardStore::Open(*i.card_db)).value();
  i.db->writer().Start();
  i.card_db->writer().Start();
  i.plans = std::make_unique<dateplan::DatePlanService>(*i.plan_store, i.admin);
  i.cards = std::make_unique<pointcard::PointCardService>(*i.card_store);
  i.board = std::make_unique<leaderboard::LeaderboardService>(*i.board_store);
  if (!i.plans->Load().ok() || !i.board->Load().ok() || !i.cards->Load().ok())
    throw std::runtime_error("cannot load the read models");
  dateplan::AddRoutes(i.router, *i.plans);
  leaderboard::AddRoutes(i.router, *i.board, i.admin);
  pointcard::AddRoutes(i.router, *i.cards, i.admin);
  http::AddEchoRoute(i.router);
  i.connection = std::make_unique<http::InProcessConnection>(
      [r = &i.router](http::Request& req, http::Responder res) { r->Dispatch(req, std::move(res)); });
}

RequestApp::~RequestApp() {
  std::string dir = impl_->dir;
  impl_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

int RequestApp::Exchange(std::string_view raw, std::string* out) { return impl_->connection->Exchange(raw, out); }

http::Handler RequestApp::handler() {
  return [r = &impl_->router](http::Request& req, http::Responder res) { r->Dispatch(req, std::move(res)); };
}

std::string GetRequest(std::string_view target) {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n";
}

std::string PostRequest(std::string_view target, std::string_view body) {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

}  // namespace hotrow::bench
