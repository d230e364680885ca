#include "http/json.h"

#include <charconv>
#include <cstdio>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

namespace hotrow::http {

std::string_view JsonKindName(JsonObject::Kind kind) {
  switch (kind) {
    case JsonObject::Kind::kNull:
      return "null";
    case JsonObject::Kind::kBool:
      return "a boolean";
    case JsonObject::Kind::kNumber:
      return "a number";
    case JsonObject::Kind::kString:
      return "a string";
    case JsonObject::Kind::kObject:
      return "an object";
    case JsonObject::Kind::kArray:
      return "an array";
  }
  return "unknown";
}

// SAX handler: records top-level fields, skips the insides of nested values.
struct JsonObjectBuilder : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, JsonObjectBuilder> {
  JsonObject* obj;
  // The text and the reader's position in it: a top-level field's object
  // is kept as sent (RawObject). The (iterative) reader calls StartObject
  // and EndObject before it takes the '{' or '}'.
  std::string_view text;
  const rapidjson::MemoryStream* stream = nullptr;
  size_t raw_begin = 0;
  int depth = 0;
  bool root_is_object = false;
  std::string duplicate;

  // An array keeps at most this many string items (a bound on what a body
  // within its size limit could make us copy).
  static constexpr size_t kItemsKept = 1000;

  bool Value(JsonObject::Kind kind, const char* text = nullptr, size_t length = 0) {
    if (depth == 0) return false;  // root is not an object
    if (depth == 1) {
      auto& f = obj->fields_.back();
      f.kind = kind;
      if (text) f.text.assign(text, length);
    } else if (depth == 2 && in_object_) {
      // A member of a top-level field's object (JsonObject::Object).
      auto& m = obj->fields_.back().members.back();
      m.kind = kind;
      if (text) m.text.assign(text, length);
    } else if (depth == 2 && obj->fields_.back().kind == JsonObject::Kind::kArray && in_array_) {
      auto& f = obj->fields_.back();
      ++f.item_count;
      if (kind != JsonObject::Kind::kString)
        f.items_strings = false;
      else if (f.items.size() < kItemsKept)
        f.items.emplace_back(text, length);
    }
    return true;
  }
  bool in_array_ = false;   // depth 2 is a top-level field's array (not an object's members)
  bool in_object_ = false;  // depth 2 is a top-level field's object's members
  bool Null() { return Value(JsonObject::Kind::kNull); }
  bool Bool(bool b) {
    return b ? Value(JsonObject::Kind::kBool, "true", 4) : Value(JsonObject::Kind::kBool, "false", 5);
  }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) { return Value(JsonObject::Kind::kNumber, s, n); }
  bool String(const char* s, rapidjson::SizeType n, bool) { return Value(JsonObject::Kind::kString, s, n); }
  bool StartObject() {
    if (depth == 0)
      root_is_object = true;
    else if (!Value(JsonObject::Kind::kObject))
      return false;
    // Set where a top-level field's value begins; kept through its insides
    // (so members after a nested value are still recorded).
    if (depth == 1) in_object_ = true, in_array_ = false, raw_begin = stream->Tell();
    ++depth;
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (depth == 1) {
      std::string_view name(s, n);
      if (obj->Find(name)) {
        duplicate.assign(name);
        return false;
      }
      obj->fields_.push_back({std::string(name), JsonObject::Kind::kNull, {}, {}, 0, true, {}, {}});
    } else if (depth == 2 && in_object_) {
      auto& members = obj->fields_.back().members;
      std::string_view name(s, n);
      for (const auto& m : members)
        if (m.name == name) {
          duplicate = obj->fields_.back().name + "." + std::string(name);
          return false;
        }
      members.push_back({std::string(name), JsonObject::Kind::kNull, {}, {}, 0, true, {}, {}});
    }
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    if (--depth == 1 && in_object_) obj->fields_.back().raw = text.substr(raw_begin, stream->Tell() + 1 - raw_begin);
    return true;
  }
  bool StartArray() {
    if (!Value(JsonObject::Kind::kArray)) return false;
    if (depth == 1) in_array_ = true, in_object_ = false;
    ++depth;
    return true;
  }
  bool EndArray(rapidjson::SizeType) { return --depth, true; }
};

Result<JsonObject> JsonObject::Parse(std::string_view text) {
  JsonObject obj;
  JsonObjectBuilder builder;
  builder.obj = &obj;
  rapidjson::MemoryStream stream(text.data(), text.size());
  builder.text = text;
  builder.stream = &stream;
  // One reader per thread: its parse stack keeps its memory between bodies.
  thread_local rapidjson::Reader reader;
  constexpr unsigned kFlags =
      rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNumbersAsStringsFlag;
  rapidjson::ParseResult ok = reader.Parse<kFlags>(stream, builder);
  if (!builder.duplicate.empty())
    return Status::InvalidField(builder.duplicate, "field '" + builder.duplicate + "' appears more than once");
  if (!ok) {
    if (ok.Code() == rapidjson::kParseErrorTermination || (ok.Code() == rapidjson::kParseErrorNone))
      return Status::BadRequest("request body must be a JSON object");
    if (ok.Code() == rapidjson::kParseErrorDocumentEmpty)
      return Status::BadRequest("request body is empty; expected a JSON object");
    // RapidJSON calls a raw control byte inside a string an invalid escape.
    size_t at = ok.Offset();
    if (ok.Code() == rapidjson::kParseErrorStringEscapeInvalid && at < text.size() &&
        static_cast<unsigned char>(text[at]) < 0x20) {
      char hex[8];
      snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(text[at]));
      return Status::BadRequest(std::string("request body is not valid JSON: a control character (U+") + hex +
                                ") must be escaped inside a string (at byte " + std::to_string(at) + ")");
    }
    return Status::BadRequest(std::string("request body is not valid JSON: ") + rapidjson::GetParseError_En(ok.Code()) +
                              " (at byte " + std::to_string(ok.Offset()) + ")");
  }
  if (!builder.root_is_object) return Status::BadRequest("request body must be a JSON object");
  return obj;
}

const JsonObject::Field* JsonObject::Find(std::string_view name) const {
  for (const auto& f : fields_)
    if (f.name == name) return &f;
  return nullptr;
}

Status JsonObject::OnlyFields(std::initializer_list<std::string_view> allowed) const {
  for (const auto& f : fields_) {
    bool known = false;
    for (auto a : allowed) known = known || a == f.name;
    if (!known) return Status::InvalidField(f.name, "unknown field '" + f.name + "'");
  }
  return Status::Ok();
}

Result<JsonObject> JsonObject::Object(std::string_view name) const {
  const Field* f = Find(name);
  if (!f) return Status::InvalidField(std::string(name), std::string(name) + " is required");
  if (f->kind != Kind::kObject) return Status::InvalidField(f->name, f->name + " must be an object");
  JsonObject child;
  for (const auto& m : f->members) child.fields_.push_back({m.name, m.kind, m.text, {}, 0, true, {}, {}});
  return child;
}

namespace {
// SAX handler for RawObject: the depth, and keys repeated in any object.
struct ObjectChecker : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, ObjectChecker> {
  int depth = 0, depth_max = 0;
  std::vector<std::vector<std::string>> keys;  // per open object (arrays: an empty, unused entry)
  std::string duplicate;
  bool Default() { return true; }
  bool StartObject() {
    keys.emplace_back();
    return ++depth <= depth_max;
  }
  bool StartArray() {
    keys.emplace_back();
    return ++depth <= depth_max;
  }
  // A lone surrogate escape (\udc00) decodes to bytes that are not UTF-8:
  // refused, as other readers of the metadata would refuse it.
  bool bad_text = false;
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (!IsValidUtf8(std::string_view(s, n))) return bad_text = true, false;
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    std::string_view k(s, n);
    if (!IsValidUtf8(k)) return bad_text = true, false;
    for (const auto& seen : keys.back())
      if (seen == k) return duplicate.assign(k), false;
    keys.back().emplace_back(k);
    return true;
  }
  bool EndObject(rapidjson::SizeType) { return keys.pop_back(), --depth, true; }
  bool EndArray(rapidjson::SizeType) { return keys.pop_back(), --depth, true; }
};
}  // namespace

Result<std::string> JsonObject::RawObject(std::string_view name, size_t bytes_max, int depth_max) const {
  const Field* f = Find(name);
  if (!f) return Status::InvalidField(std::string(name), std::string(name) + " is required");
  if (f->kind != Kind::kObject)
    return Status::InvalidField(f->name, f->name + " must be an object, not " + std::string(JsonKindName(f->kind)));
  if (f->raw.size() > bytes_max)
    return Status::InvalidField(
        f->name, f->name + " is " + std::to_string(f->raw.size()) + " bytes; at most " + std::to_string(bytes_max));
  ObjectChecker checker;
  checker.depth_max = depth_max;
  rapidjson::MemoryStream stream(f->raw.data(), f->raw.size());
  rapidjson::Reader reader;
  if (!reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag>(stream, checker)) {
    if (!checker.duplicate.empty())
      return Status::InvalidField(f->name, f->name + " has the key '" + checker.duplicate + "' twice in one object");
    if (checker.bad_text)
      return Status::InvalidField(f->name, f->name + " has a string that is not Unicode text (a lone surrogate)");
    return Status::InvalidField(f->name, f->name + " is nested more than " + std::to_string(depth_max) + " deep");
  }
  return std::string(f->raw);
}

Result<std::vector<std::string>> JsonObject::StringArray(std::string_view name, size_t items_max) const {
  const Field* f = Find(name);
  if (!f) return Status::InvalidField(std::string(name), std::string(name) + " is required");
  if (f->kind != Kind::kArray)
    return Status::InvalidField(f->name, f->name + " must be an array, not " + std::string(JsonKindName(f->kind)));
  if (!f->items_strings) return Status::InvalidField(f->name, f->name + " must hold strings only");
  if (f->item_count > items_max)
    return Status::InvalidField(
        f->name, f->name + " holds " + std::to_string(f->item_count) + " items; at most " + std::to_string(items_max));
  return f->items;
}

Result<std::string> JsonObject::String(std::string_view name) const {
  const Field* f = Find(name);
  if (!f) return Status::InvalidField(std::string(name), std::string(name) + " is required");
  if (f->kind != Kind::kString)
    return Status::InvalidField(f->name, f->name + " must be a string, not " + std::string(JsonKindName(f->kind)));
  return f->text;
}

// The field's integer, or the error that names it; `saturate` turns a
// literal beyond int64 into INT64_MIN or INT64_MAX instead of an error.
Result<int64_t> JsonObject::IntegerOf(std::string_view name, int64_t min, int64_t max, bool saturate) const {
  const Field* f = Find(name);
  if (!f) return Status::InvalidField(std::string(name), std::string(name) + " is required");
  if (f->kind != Kind::kNumber)
    return Status::InvalidField(f->name, f->name + " must be an integer, not " + std::string(JsonKindName(f->kind)));
  if (f->text.find_first_of(".eE") != std::string::npos)
    return Status::InvalidField(f->name, f->name + " must be an integer literal (no fraction or exponent)");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(f->text.data(), f->text.data() + f->text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    if (saturate) return f->text.starts_with('-') ? INT64_MIN : INT64_MAX;
    return Status::OutOfRange(f->name, min, max);
  }
  if (ec != std::errc() || end != f->text.data() + f->text.size())
    return Status::InvalidField(f->name, f->name + " must be an integer");
  if (v < min || v > max) return Status::OutOfRange(f->name, min, max);
  return v;
}

Result<bool> JsonObject::OptionalBool(std::string_view name, bool fallback) const {
  const Field* f = Find(name);
  if (!f) return fallback;
  if (f->kind != Kind::kBool)
    return Status::InvalidField(f->name, f->name + " must be true or false, not " + std::string(JsonKindName(f->kind)));
  return f->text == "true";
}

Result<double> JsonObject::Number(std::string_view name) const {
  const Field* f = Find(name);
  if (!f) return Status::InvalidField(std::string(name), std::string(name) + " is required");
  if (f->kind != Kind::kNumber) return Status::InvalidField(f->name, f->name + " must be a number");
  return std::strtod(f->text.c_str(), nullptr);
}

Result<std::vector<int64_t>> ExtractIntegers(std::string_view json, std::string_view array_key,
                                             std::string_view field) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::BadRequest("not a JSON object");
  const rapidjson::Document& read = doc;  // const iterators: clang finds == on mixed ones ambiguous
  auto list = read.FindMember(rapidjson::Value(array_key.data(), static_cast<rapidjson::SizeType>(array_key.size())));
  if (list == read.MemberEnd() || !list->value.IsArray())
    return Status::BadRequest(std::string(array_key) + " is not an array");
  std::vector<int64_t> out;
  rapidjson::Value key(field.data(), static_cast<rapidjson::SizeType>(field.size()));
  for (const auto& item : list->value.GetArray()) {
    if (!item.IsObject()) continue;
    auto v = item.FindMember(key);
    if (v != item.MemberEnd() && v->value.IsInt64()) out.push_back(v->value.GetInt64());
  }
  return out;
}

}  // namespace hotrow::http
