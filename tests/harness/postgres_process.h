// A throwaway PostgreSQL cluster for tests: initdb in a temporary directory,
// a free port on loopback, trust authentication, the binaries from Debian's
// postgresql package (/usr/lib/postgresql/15/bin, or $HOTROW_PG_BIN).
// PostgreSQL refuses to run as root, and CI runs as root: then the cluster
// runs as the `postgres` user. The server dies with the test process
// (PR_SET_PDEATHSIG), so a crashed test leaves no server behind.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "db/postgres.h"
#include "harness/server_process.h"

namespace hotrow::testing {

class PostgresProcess {
 public:
  // nullptr (and a test failure) when the cluster cannot start.
  static std::unique_ptr<PostgresProcess> Start();
  // One cluster per test binary, started on first use.
  static PostgresProcess* Shared();
  ~PostgresProcess();

  uint16_t port() const { return port_; }
  // postgresql://hotrow@127.0.0.1:PORT/NAME
  std::string Url(const std::string& database) const;
  // A fresh, empty database; returns its URL.
  std::string CreateDatabase();
  // Runs SQL in `database` with psql; returns its exit status.
  int Psql(const std::string& database, const std::string& sql, std::string* output = nullptr) const;
  // The server's log (its stderr).
  std::string LogPath() const { return dir_.File("postgres.log"); }

  void Kill();
  bool Restart();

 private:
  PostgresProcess() = default;
  bool Launch();
  TempDir dir_;
  std::string data_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  int databases_ = 0;
};

// A fresh database on the shared cluster (throws when there is none).
std::string FreshDatabase();
// A pool of 4 connections on `url` (throws when it cannot connect).
std::unique_ptr<db::pg::Pool> OpenPool(const std::string& url);

}  // namespace hotrow::testing
