#include "http/echo.h"

#include "http/errors.h"
#include "http/json.h"

namespace hotrow::http {

namespace {

struct Person {
  std::string name, id, country;
  int64_t age = 0;
};

Result<Person> ParsePerson(std::string_view body) {
  auto obj = JsonObject::Parse(body);
  if (!obj.ok()) return obj.status();
  if (Status s = obj->OnlyFields({"name", "id", "country", "age"}); !s.ok()) return s;
  Person p;
  auto name = obj->String("name");
  if (!name.ok()) return name.status();
  auto id = obj->String("id");
  if (!id.ok()) return id.status();
  auto country = obj->String("country");
  if (!country.ok()) return country.status();
  auto age = obj->Integer("age", 0, 1000);
  if (!age.ok()) return age.status();
  p.name = std::move(name).value();
  p.id = std::move(id).value();
  p.country = std::move(country).value();
  p.age = *age;
  return p;
}

}  // namespace

void AddEchoRoute(Router& router) {
  router.Add(
      Method::kPost, "/api/v1/echo",
      [](Request& req, Responder responder) {
        auto p = ParsePerson(req.body);
        if (!p.ok()) return responder.Send(ErrorResponse(p.status()));
        Response r = NewResponse(req);
        JsonWriter w(r.body);
        w.StartObject();
        w.Field("name", p->name);
        w.Field("id", p->id);
        w.Field("country", p->country);
        w.Field("age", p->age);
        w.EndObject();
        responder.Send(std::move(r));
      },
      BodyPolicy::kJson);
}

}  // namespace hotrow::http
