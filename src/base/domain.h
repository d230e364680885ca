// DomainService: the part of every domain's service that cmd/serve.cc
// drives, so that it holds interfaces only and writes the start-up and
// teardown order once.
//
//   Load     builds the service's read model from its store: at start-up,
//            and again whenever changes may have been missed (the
//            PostgreSQL listener reconnected).
//   channel  the change feed of a store that other instances share (a
//            PostgreSQL NOTIFY channel), or nullptr.
//   Follow   applies one notification of that channel. An error means the
//            change was not applied: the listener reconnects and reloads.
//   entries  the read model's size (plans, players, stores), for metrics.
//   Stop     at shutdown, while the stores' writer or pool and the event
//            loops still run: answers or fails every request the service
//            and its store hold; later requests answer unavailable.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace hotrow {

class DomainService {
 public:
  virtual ~DomainService() = default;
  virtual std::string_view name() const = 0;
  virtual Status Load() = 0;
  virtual const char* channel() const { return nullptr; }
  virtual Status Follow(std::string_view notification) = 0;
  virtual size_t entries() const = 0;
  virtual void Stop() = 0;
};

}  // namespace hotrow
