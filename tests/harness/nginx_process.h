// nginx for tests: a reverse proxy on a free loopback port in front of
// several hotrow instances, with its own configuration and directory.
// Open-source nginx has no active health checks; failed upstreams are taken
// out by passive checks (max_fails / fail_timeout).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/server_process.h"

namespace hotrow::testing {

class NginxProcess {
 public:
  static std::unique_ptr<NginxProcess> Start(const std::vector<uint16_t>& upstream_ports);
  ~NginxProcess();
  uint16_t port() const { return port_; }

 private:
  NginxProcess() = default;
  TempDir dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace hotrow::testing
