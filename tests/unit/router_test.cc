#include "http/router.h"

#include <gtest/gtest.h>

namespace hotrow::http {
namespace {

// Captures the response a handler or the router sends.
struct Capture : ResponseSink {
  Response response;
  int sends = 0;
  void Deliver(Response&& r) override {
    response = std::move(r);
    ++sends;
  }
};

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto named = [this](std::string name) {
      return [this, name](Request& req, Responder res) {
        last_handler = name;
        last_params = req.params;
        Response r;
        r.body = name;
        res.Send(std::move(r));
      };
    };
    router.Add(Method::kGet, "/datePlan", named("random"));
    router.Add(Method::kGet, "/datePlan/ranking", named("ranking"));
    router.Add(Method::kGet, "/datePlan/{id}", named("get"));
    router.Add(Method::kPut, "/datePlan/{id}", named("put"), BodyPolicy::kJson);
    router.Add(Method::kDelete, "/datePlan/{id}", named("delete"));
    router.Add(Method::kPost, "/datePlan/{id}/like", named("like"));
  }

  Response Call(Method m, std::string path, std::vector<std::pair<std::string_view, std::string_view>> headers = {}) {
    auto sink = std::make_shared<Capture>();
    Request req;
    req.method = m;
    req.path = path;
    req.headers = std::move(headers);
    router.Dispatch(req, Responder(sink, sink->BeginRequest()));
    EXPECT_EQ(sink->sends, 1);
    return std::move(sink->response);
  }

  Router router;
  std::string last_handler;
  std::vector<std::string> last_params;
};

TEST_F(RouterTest, FixedPathsWinOverParameters) {
  EXPECT_EQ(Call(Method::kGet, "/datePlan/ranking").body, "ranking");
  EXPECT_EQ(Call(Method::kGet, "/datePlan/12").body, "get");
  EXPECT_EQ(last_params, std::vector<std::string>{"12"});
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  Response r = Call(Method::kGet, "/datePlan/1/like");
  EXPECT_EQ(r.status, 405);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Allow");
  EXPECT_EQ(r.headers[0].second, "POST, OPTIONS");
  Response r2 = Call(Method::kPost, "/datePlan/7");
  EXPECT_EQ(r2.status, 405);
  EXPECT_EQ(r2.headers[0].second, "GET, HEAD, PUT, DELETE, OPTIONS");
  // The fixed path decides alone: PUT /datePlan/ranking is not a PUT of id "ranking".
  Response r3 = Call(Method::kPut, "/datePlan/ranking");
  EXPECT_EQ(r3.status, 405);
  EXPECT_EQ(r3.headers[0].second, "GET, HEAD, OPTIONS");
}

TEST_F(RouterTest, UnknownPathIs404) {
  EXPECT_EQ(Call(Method::kGet, "/nope").status, 404);
  EXPECT_EQ(Call(Method::kGet, "/datePlan/1/like/x").status, 404);
  EXPECT_EQ(Call(Method::kGet, "/datePlan//like").status, 404);
  EXPECT_NE(Call(Method::kGet, "/nope").body.find("\"code\":\"not_found\""), std::string::npos);
}

TEST_F(RouterTest, ParamsArePercentDecoded) {
  Call(Method::kGet, "/datePlan/a%2Fb");
  EXPECT_EQ(last_params, std::vector<std::string>{"a/b"});
  EXPECT_EQ(Call(Method::kGet, "/datePlan/%zz").status, 400);
}

TEST_F(RouterTest, ContentTypeChecksOnlyWhereABodyIsRead) {
  EXPECT_EQ(Call(Method::kPut, "/datePlan/1", {{"Content-Type", "text/plain"}}).status, 415);
  EXPECT_EQ(Call(Method::kPut, "/datePlan/1", {{"content-type", "application/json; charset=latin1"}}).status, 415);
  EXPECT_EQ(Call(Method::kPut, "/datePlan/1", {{"Content-Type", "Application/JSON; charset=\"UTF-8\""}}).body, "put");
  EXPECT_EQ(Call(Method::kPut, "/datePlan/1").body, "put");  // missing Content-Type is accepted
  // hey sends "Content-Type: text/html" on a bodiless POST: the like ignores it.
  EXPECT_EQ(Call(Method::kPost, "/datePlan/1/like", {{"Content-Type", "text/html"}}).body, "like");
}

TEST(ContentType, Parsing) {
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType(" application/json ; charset=utf-8"));
  EXPECT_FALSE(IsJsonContentType("application/jsonx"));
  EXPECT_FALSE(IsJsonContentType("text/json"));
  EXPECT_FALSE(IsJsonContentType(""));
}

Response WithStatus(int status) {
  Response r;
  r.status = status;
  return r;
}

// A handler answers each request once; the server may answer for it first.
TEST(ResponseSinkTest, TheFirstAnswerCountsAndALateHandlerAfterTheServerIsDropped) {
  auto sink = std::make_shared<Capture>();
  uint64_t first = sink->BeginRequest();
  Responder(sink, first).Send(WithStatus(201));
  EXPECT_EQ(sink->sends, 1);

  uint64_t second = sink->BeginRequest();
  Responder late(sink, second);
  EXPECT_TRUE(sink->Claim(second, ResponseSink::By::kServer));  // a timeout answers for the handler
  late.Send(WithStatus(200));                                   // and the handler's answer comes after
  EXPECT_EQ(sink->sends, 1);
  EXPECT_EQ(sink->response.status, 201);
  EXPECT_FALSE(sink->Claim(second, ResponseSink::By::kServer));  // the sweep checks again: nothing to do
}

TEST(ResponseSinkDeathTest, AHandlerThatAnswersTwiceStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto sink = std::make_shared<Capture>();
  Responder responder(sink, sink->BeginRequest());
  Responder copy = responder;  // callbacks carry copies
  responder.Send(Response{});
  EXPECT_DEATH(copy.Send(Response{}), "answered one request twice");
  EXPECT_DEATH(responder.Send(Response{}), "sent twice");
  Responder moved_from(sink, sink->BeginRequest());
  Responder taken = std::move(moved_from);
  moved_from.Send(Response{});  // NOLINT(bugprone-use-after-move): empty, does nothing
  EXPECT_EQ(sink->sends, 1);
  taken.Send(Response{});
  EXPECT_EQ(sink->sends, 2);
  // A copy sending for an earlier request, after the next one began, is
  // the case that would answer the wrong request.
  sink->BeginRequest();
  EXPECT_DEATH(Responder(sink, 1).Send(Response{}), "answered one request twice");
}

}  // namespace
}  // namespace hotrow::http
