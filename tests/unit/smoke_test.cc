#include <gtest/gtest.h>
#include "ops/status.h"
TEST(Smoke, StatusNames) { EXPECT_EQ(hotrow::ErrorCodeName(hotrow::ErrorCode::kInvalidField), "invalid_field"); }
