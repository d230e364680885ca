// A real redis-server for tests: loopback, a free port, its own directory,
// AOF on with appendfsync always (so a kill -9 loses nothing acknowledged).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "harness/server_process.h"

namespace hotrow::testing {

// A TCP port that was free a moment ago.
uint16_t FreePort();

class RedisProcess {
 public:
  // Starts redis-server and waits until it answers PING; nullptr (and a test
  // failure) if it does not.
  static std::unique_ptr<RedisProcess> Start();
  ~RedisProcess();

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  // SIGKILL and wait.
  void Kill();
  // SIGSTOP / SIGCONT: a server that stalls without closing its sockets.
  void Pause();
  void Resume();
  // Starts again on the same port and directory (reloading the AOF).
  bool Restart();

 private:
  RedisProcess() = default;
  bool Launch();
  TempDir dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace hotrow::testing
