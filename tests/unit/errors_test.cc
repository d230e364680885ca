// The one error shape: what a client may see of a failure, and what only
// the log may (issue 9, item 12).
#include "http/errors.h"

#include <gtest/gtest.h>

namespace hotrow::http {
namespace {

TEST(ErrorResponse, A500NeverCarriesItsMessageButAnIdTheLogHas) {
  Status s = Status::Internal("SQLSTATE 22008: interval out of range (SELECT ... FROM H_TRANSACTION)");
  Response r = ErrorResponse(s);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("SQLSTATE"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("SELECT"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"message\":\"internal error\""), std::string::npos) << r.body;
  // The connection adds the request's id to the body and logs the rest
  // under it (Codec::Serialize; tests/http/cases check the id).
  EXPECT_TRUE(r.error);
  EXPECT_TRUE(r.log_as_error);
  ASSERT_TRUE(r.log_detail);
  EXPECT_NE(r.log_detail->find("SQLSTATE 22008"), std::string::npos) << *r.log_detail;
}

TEST(ErrorResponse, DetailsStayOutOfEveryBody) {
  Status s = Status::BadRequest("a value in the request is out of the range the store can hold")
                 .WithDetail("SQLSTATE 22008: interval out of range (SELECT payment_time FROM H_TRANSACTION)")
                 .WithSqlState("22008");
  EXPECT_EQ(s.sqlstate(), "22008");
  Response r = ErrorResponse(s);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.find("H_TRANSACTION"), std::string::npos) << r.body;
  ASSERT_TRUE(r.log_detail);
  EXPECT_NE(r.log_detail->find("H_TRANSACTION"), std::string::npos) << "the log gets the detail: " << *r.log_detail;
  EXPECT_FALSE(r.log_as_error) << "a client's error is a warning";
}

TEST(ErrorResponse, A503CarriesRetryAfter) {
  Response r = ErrorResponse(Status::Unavailable("the database is unavailable").WithDetail("SQLSTATE 57P01: ..."));
  EXPECT_EQ(r.status, 503);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  ASSERT_TRUE(r.log_detail);
  EXPECT_NE(r.log_detail->find("57P01"), std::string::npos) << "a backend's 503 is logged: " << *r.log_detail;
  EXPECT_EQ(r.body.find("57P01"), std::string::npos) << r.body;
}

TEST(ErrorResponse, AClientErrorIsNotLogged) {
  Response r = ErrorResponse(Status::InvalidField("title", "title must be 1-100 characters"));
  EXPECT_FALSE(r.log_detail);
  EXPECT_EQ(r.body, R"({"error":{"code":"invalid_field","message":"title must be 1-100 characters","field":"title"}})");
}

}  // namespace
}  // namespace hotrow::http
