// The point-card store contract: what every PointCardStore backend must do,
// through the service as the HTTP handlers and the simulator use it. Each
// instance starts from the same small generated data set (seed 7: 200 cards,
// 20 stores, 1,000 history rows). A backend joins by instantiating
// PointCardContract with a factory.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "pointcard/check.h"
#include "pointcard/service.h"

namespace hotrow::testing {

inline constexpr int64_t kContractCards = 200;
inline constexpr int64_t kContractStores = 20;
inline constexpr int64_t kContractHistory = 1000;

class PointCardBackendInstance {
 public:
  virtual ~PointCardBackendInstance() = default;
  virtual pointcard::PointCardStore& store() = 0;
  // Closes everything and opens the same data again.
  virtual void Restart() = 0;
  // Checks the invariants on a fresh snapshot.
  virtual Result<pointcard::CheckReport> Check() = 0;
};

struct PointCardBackend {
  std::string name;
  std::function<std::unique_ptr<PointCardBackendInstance>()> make;
};

inline void PrintTo(const PointCardBackend& b, std::ostream* os) { *os << b.name; }

class PointCardContract : public ::testing::TestWithParam<PointCardBackend> {
 protected:
  void SetUp() override;
  void Restart();
  void ExpectInvariants();

  std::unique_ptr<PointCardBackendInstance> backend;
  std::unique_ptr<pointcard::PointCardService> service;
};

}  // namespace hotrow::testing
