// Test harness: start `hotrow serve` on a free port, wait for /healthz, stop
// it by PID. Later suites (leaderboard, point card, PostgreSQL) reuse it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hotrow::testing {

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The hotrow binary under test (the build's, or $HOTROW_BIN).
std::string HotrowBinary();

// Runs `hotrow args...` to completion; returns its exit status and output.
// Past `timeout` the process is killed and the test fails.
struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
};
CommandResult RunHotrow(const std::vector<std::string>& args, std::chrono::seconds timeout = std::chrono::seconds(300),
                        const std::vector<std::pair<std::string, std::string>>& env = {});

class ServerProcess {
 public:
  // Starts `hotrow serve --host 127.0.0.1 --port 0 <args>` with its output
  // in log_path, and waits until it answers /healthz. Fails the current
  // test (and returns nullptr) when it does not come up.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& args, const std::string& log_path,
                                              std::chrono::seconds timeout = std::chrono::seconds(60),
                                              const std::vector<std::pair<std::string, std::string>>& env = {});
  ~ServerProcess();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  // SIGTERM, then waits; returns the exit status (-signal if killed).
  int Stop(std::chrono::seconds timeout = std::chrono::seconds(60));
  // SIGKILL, then waits.
  void Kill();
  // Waits for the process to end by itself; returns its status.
  int Wait(std::chrono::seconds timeout) { return WaitExit(timeout); }
  bool running();
  std::string Log() const;

 private:
  ServerProcess() = default;
  int WaitExit(std::chrono::seconds timeout);
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
  int exit_status_ = 0;
  bool exited_ = false;
};

}  // namespace hotrow::testing

namespace hotrow::testing {

inline constexpr const char* kTestAdminToken = "test-admin-token";

struct TestServerOptions {
  int seed_plans = 0;           // date plans 1..N
  bool seed_pointcard = false;  // 200 cards, 20 stores, 1,000 history rows (seed 7)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string db_url = {};  // empty: SQLite in the server's temporary directory
};

// A server on a fresh SQLite database in a temporary directory, optionally
// seeded, with the admin token above.
class TestServer {
 public:
  explicit TestServer(int seed_plans = 0, std::vector<std::string> extra_args = {})
      : TestServer(TestServerOptions{seed_plans, false, std::move(extra_args), {}}) {}
  explicit TestServer(TestServerOptions options);
  ~TestServer();
  // (Re)starts the server on the same database; false on failure. `env`
  // replaces the options' environment for this start.
  bool Start();
  bool Start(const std::vector<std::pair<std::string, std::string>>& env);
  int Stop() { return process_ ? process_->Stop() : 0; }
  void Kill() {
    if (process_) process_->Kill();
  }
  uint16_t port() const { return process_->port(); }
  ServerProcess& process() { return *process_; }
  const std::string& db_url() const { return db_url_; }
  bool ok() const { return process_ != nullptr; }

 private:
  TempDir dir_;
  std::string db_url_;
  TestServerOptions options_;
  std::unique_ptr<ServerProcess> process_;
};

}  // namespace hotrow::testing
