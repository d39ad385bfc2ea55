//===- Json.h - the little JSON kiln-run reads and writes -------*- C++ -*-===//
//
// kiln-run writes JSON (metrics lines, checkpoint sidecars, safetensors
// headers) and reads it back (sidecars and safetensors headers on --resume).
// This is a strict RFC 8259 reader for those small documents and the escaping
// and number formatting the writers share; libkilnrt and kiln-run link no
// LLVM, so llvm::json is not at hand.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_JSON_H
#define KILN_TOOLS_KILN_RUN_JSON_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::run {

/// A parsed JSON value. Numbers keep their text, so integers beyond 2^53 and
/// exact decimal forms survive.
struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  /// The number's text, or the string's decoded UTF-8.
  std::string text;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  /// The member called `key` of an object, or nullptr.
  const JsonValue *find(const std::string &key) const;
  /// The value of an integer number (no fraction or exponent) that fits.
  bool asInteger(int64_t &out) const;
  /// The value of any number.
  bool asDouble(double &out) const;
};

/// Parses `text` as one JSON document (surrounding whitespace allowed). On
/// failure, `error` says what is wrong at which byte offset.
bool parseJson(const std::string &text, JsonValue &out, std::string &error);

/// `text` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &text);

/// The shortest decimal form that reads back as exactly `value` (as a double
/// or as a float); "null" for NaN and infinities, which JSON cannot hold.
std::string jsonNumber(double value);
std::string jsonNumber(float value);

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_JSON_H
