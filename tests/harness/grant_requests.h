// A payment, then a grant over everything paid so far, by HTTP: what the
// grant's failpoint tests send to a server armed to abort() inside the
// grant (the grant's answer never comes; its exception is expected).
#pragma once

#include <exception>
#include <string>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"

namespace hotrow::testing {

inline void PayThenGrantAsTheServerDies(int port) {
  HttpClient c(port);
  ASSERT_EQ(c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":500})").status, 201);
  try {
    std::string to = pointcard::FormatTime(pointcard::NowUs() - 1000000);
    c.Post("/api/v1/grants",
           R"({"from":"2000-01-01T00:00:00Z","to":")" + to + R"(","ratePercent":1,"allowOverlap":true})",
           {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
  } catch (const std::exception&) {
    // the server died mid-request, as arranged
  }
}

}  // namespace hotrow::testing
