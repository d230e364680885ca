#include "dateplan/plan_json.h"

#include <charconv>

namespace hotrow::dateplan {

std::string RenderPlanHead(const Plan& p) {
  // Render the whole object with like 0, then cut before the count: the
  // writer stays in charge of every byte of escaping.
  std::string out;
  out.reserve(64 + p.title.size() + p.content.size() + p.category.size());
  http::JsonWriter w(out);
  w.StartObject();
  w.Field("id", p.id);
  w.Field("title", p.title);
  w.Field("content", p.content);
  w.Field("category", p.category);
  w.Field("like", int64_t{0});
  w.EndObject();
  out.resize(out.size() - 2);  // drop "0}"
  return out;
}

void AppendPlanJson(std::string& out, const Plan& p) {
  if (p.json_head.empty()) {
    out += RenderPlanHead(p);
  } else {
    out += p.json_head;
  }
  char number[24];
  auto [end, ec] = std::to_chars(number, number + sizeof number, p.like);
  out.append(number, static_cast<size_t>(end - number));
  out.push_back('}');
}

}  // namespace hotrow::dateplan
