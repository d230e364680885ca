// JSON in and out, on RapidJSON.
//
// Out: JsonWriter appends to a std::string through RapidJSON's Writer, which
// escapes every string it is given; no JSON is ever built by concatenating
// untrusted text.
//
// In: every request body hotrow accepts is one flat JSON object ({"title":
// "...", "score": 5}). JsonObject parses it with RapidJSON's SAX reader
// (iterative, so deep nesting cannot exhaust the stack; UTF-8 validated) into
// a list of top-level fields. Numbers are kept as their literal text so that
// "integers are JSON integer literals only" can be enforced exactly: 5 is an
// integer, 5.0 and 5e0 are not, and 2^63 is out of range rather than rounded.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <rapidjson/allocators.h>
#include <rapidjson/writer.h>

#include "base/status.h"
#include "base/text.h"

namespace hotrow::http {

namespace detail {
// RapidJSON output stream that appends to a std::string.
struct StringAppender {
  using Ch = char;
  std::string* out;
  void Put(char c) { out->push_back(c); }
  void Flush() {}
};
}  // namespace detail

// The writer's nesting stack lives in a buffer inside the JsonWriter, so
// writing a response allocates nothing but the output string's growth.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out)
      : stream_{&out}, stack_memory_(stack_buffer_, sizeof stack_buffer_), writer_(stream_, &stack_memory_, 16) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void StartObject() { writer_.StartObject(); }
  void EndObject() { writer_.EndObject(); }
  void StartArray() { writer_.StartArray(); }
  void EndArray() { writer_.EndArray(); }
  void Key(std::string_view k) { writer_.Key(k.data(), static_cast<unsigned>(k.size())); }
  // Text that is not valid UTF-8 (a path echoed in a 404) goes out with
  // U+FFFD in place of each bad byte: everything hotrow emits is valid JSON.
  void String(std::string_view s) {
    if (!IsValidUtf8(s)) return String(ToValidUtf8(s));
    writer_.String(s.data(), static_cast<unsigned>(s.size()));
  }
  void Int(int64_t v) { writer_.Int64(v); }
  void Bool(bool b) { writer_.Bool(b); }
  void Null() { writer_.Null(); }
  void Double(double d) { writer_.Double(d); }
  // A JSON object's text as it is (stored metadata, checked when it was
  // accepted: JsonObject::RawObject).
  void RawObject(std::string_view json) { writer_.RawValue(json.data(), json.size(), rapidjson::kObjectType); }

  // Key and value in one call, for the common case.
  void Field(std::string_view k, std::string_view v) { Key(k), String(v); }
  void Field(std::string_view k, const char* v) { Key(k), String(v); }
  void Field(std::string_view k, int64_t v) { Key(k), Int(v); }
  void Field(std::string_view k, int v) { Key(k), Int(v); }

 private:
  detail::StringAppender stream_;
  alignas(8) char stack_buffer_[512];
  rapidjson::MemoryPoolAllocator<> stack_memory_;
  rapidjson::Writer<detail::StringAppender, rapidjson::UTF8<>, rapidjson::UTF8<>, rapidjson::MemoryPoolAllocator<>>
      writer_;
};

// One flat JSON object, as a request body.
class JsonObject {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kObject, kArray };

  // Parses `text`. Fails with bad_request when it is not valid JSON (the
  // message says where), not valid UTF-8, or not an object, and with
  // invalid_field when a field name repeats.
  static Result<JsonObject> Parse(std::string_view text);

  // invalid_field naming the first field not in `allowed`.
  Status OnlyFields(std::initializer_list<std::string_view> allowed) const;

  bool Has(std::string_view name) const { return Find(name) != nullptr; }

  // A required string field: invalid_field when missing or not a string.
  Result<std::string> String(std::string_view name) const;
  // A required integer field: a JSON integer literal within [min, max].
  Result<int64_t> Integer(std::string_view name, int64_t min, int64_t max) const {
    return IntegerOf(name, min, max, false);
  }
  // An integer for a service that checks a narrower range itself, with its
  // own message: a literal beyond int64 saturates to INT64_MIN or INT64_MAX,
  // which that check then refuses, naming its bounds (not int64's). Not for
  // fields whose valid range is all of int64.
  Result<int64_t> SaturatedInteger(std::string_view name) const { return IntegerOf(name, INT64_MIN, INT64_MAX, true); }
  // An optional boolean field: `fallback` when absent, invalid_field when
  // present and not true or false.
  Result<bool> OptionalBool(std::string_view name, bool fallback) const;
  // A required number field, as a double (a number past double's range is
  // refused by the parser: bad_request).
  Result<double> Number(std::string_view name) const;
  // A required array of strings with at most `items_max` items.
  Result<std::vector<std::string>> StringArray(std::string_view name, size_t items_max) const;
  // A required object field, as a JsonObject of its members (their own
  // insides are skipped, as at the top level).
  Result<JsonObject> Object(std::string_view name) const;
  Kind KindOf(std::string_view name) const { return Find(name) ? Find(name)->kind : Kind::kNull; }
  // A required object field exactly as sent (its bytes, whitespace and
  // all: stored and returned byte for byte): invalid_field naming it unless
  // it is an object of at most `bytes_max` bytes, nested at most
  // `depth_max` deep (the object itself is depth 1), with no key twice in
  // any object inside it.
  Result<std::string> RawObject(std::string_view name, size_t bytes_max, int depth_max) const;

 private:
  Result<int64_t> IntegerOf(std::string_view name, int64_t min, int64_t max, bool saturate) const;
  struct Field {
    std::string name;
    Kind kind;
    std::string text;                // string value, or a number's literal
    std::vector<std::string> items;  // an array's string items (up to a bound)
    size_t item_count = 0;           // an array's items, of any kind
    bool items_strings = true;       // whether every item is a string
    std::vector<Field> members;      // an object's members (their insides skipped)
    std::string_view raw = {};       // an object's text as sent (into the parsed body)
  };
  friend struct JsonObjectBuilder;
  const Field* Find(std::string_view name) const;

  // Request bodies are small flat objects: up to 8 fields need no heap.
  // Fields' `raw` views point into the text parsed: a JsonObject must not
  // outlive it.
  boost::container::small_vector<Field, 8> fields_;
};

std::string_view JsonKindName(JsonObject::Kind kind);

// The integer `field` of every object in the top-level array `array_key`
// ({"stores":[{"storeId":1,...},...]} -> [1, ...]), for clients reading lists.
Result<std::vector<int64_t>> ExtractIntegers(std::string_view json, std::string_view array_key, std::string_view field);

}  // namespace hotrow::http
