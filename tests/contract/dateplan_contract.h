// The date-plan store contract: what every DatePlanStore backend must do,
// checked through the service as the HTTP handlers use it. A backend joins
// by instantiating the suite with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, DatePlanContract,
//       ::testing::Values(DatePlanBackend{"sqlite", [] { return std::make_unique<SqliteBackend>(); }}));
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "dateplan/service.h"
#include "dateplan/store.h"

namespace hotrow::testing {

// One running backend over one data set.
class DatePlanBackendInstance {
 public:
  virtual ~DatePlanBackendInstance() = default;
  virtual dateplan::DatePlanStore& store() = 0;
  // Closes everything and opens the same data again (a process restart).
  virtual void Restart() = 0;
};

struct DatePlanBackend {
  std::string name;
  std::function<std::unique_ptr<DatePlanBackendInstance>()> make;
};

inline void PrintTo(const DatePlanBackend& b, std::ostream* os) { *os << b.name; }

class DatePlanContract : public ::testing::TestWithParam<DatePlanBackend> {
 protected:
  void SetUp() override;
  void Restart();

  std::unique_ptr<DatePlanBackendInstance> backend;
  AdminAuth admin{"admin-secret"};
  std::unique_ptr<dateplan::DatePlanService> service;
};

}  // namespace hotrow::testing
