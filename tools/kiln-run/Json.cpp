//===- Json.cpp - the little JSON kiln-run reads and writes ---------------===//

#include "Json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kiln::run {

namespace {

/// Nesting deeper than this is refused, so a hostile file cannot exhaust the
/// stack.
constexpr int kMaxDepth = 64;

class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  bool parseDocument(JsonValue &out, std::string &error) {
    skipSpace();
    if (!parseValue(out, 0)) {
      error = message;
      return false;
    }
    skipSpace();
    if (position != text.size()) {
      error = "unexpected text after the JSON value at byte " +
              std::to_string(position);
      return false;
    }
    return true;
  }

private:
  bool fail(const std::string &what) {
    message = what + " at byte " + std::to_string(position);
    return false;
  }

  bool atEnd() const { return position >= text.size(); }
  char peek() const { return atEnd() ? '\0' : text[position]; }

  void skipSpace() {
    while (!atEnd() && (text[position] == ' ' || text[position] == '\t' ||
                        text[position] == '\n' || text[position] == '\r'))
      ++position;
  }

  bool consumeWord(const char *word) {
    size_t length = std::char_traits<char>::length(word);
    if (text.compare(position, length, word) != 0)
      return fail(std::string("expected '") + word + "'");
    position += length;
    return true;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (depth > kMaxDepth)
      return fail("JSON nested too deeply");
    if (atEnd())
      return fail("unexpected end of the JSON text");
    char c = peek();
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = JsonValue::Kind::String;
      return parseString(out.text);
    }
    if (c == 't' || c == 'f') {
      out.kind = JsonValue::Kind::Bool;
      out.boolean = c == 't';
      return consumeWord(out.boolean ? "true" : "false");
    }
    if (c == 'n') {
      out.kind = JsonValue::Kind::Null;
      return consumeWord("null");
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool parseObject(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Object;
    ++position;
    skipSpace();
    if (peek() == '}') {
      ++position;
      return true;
    }
    while (true) {
      skipSpace();
      std::string key;
      if (peek() != '"')
        return fail("expected a member name");
      if (!parseString(key))
        return false;
      if (out.find(key))
        return fail("duplicate member '" + key + "'");
      skipSpace();
      if (peek() != ':')
        return fail("expected ':'");
      ++position;
      skipSpace();
      JsonValue value;
      if (!parseValue(value, depth + 1))
        return false;
      out.members.emplace_back(std::move(key), std::move(value));
      skipSpace();
      if (peek() == ',') {
        ++position;
        continue;
      }
      if (peek() == '}') {
        ++position;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool parseArray(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Array;
    ++position;
    skipSpace();
    if (peek() == ']') {
      ++position;
      return true;
    }
    while (true) {
      skipSpace();
      JsonValue value;
      if (!parseValue(value, depth + 1))
        return false;
      out.items.push_back(std::move(value));
      skipSpace();
      if (peek() == ',') {
        ++position;
        continue;
      }
      if (peek() == ']') {
        ++position;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool parseDigits() {
    size_t start = position;
    while (!atEnd() && text[position] >= '0' && text[position] <= '9')
      ++position;
    return position > start || fail("expected a digit");
  }

  bool parseNumber(JsonValue &out) {
    out.kind = JsonValue::Kind::Number;
    size_t start = position;
    if (peek() == '-')
      ++position;
    if (peek() == '0')
      ++position;
    else if (!parseDigits())
      return false;
    if (peek() == '.') {
      ++position;
      if (!parseDigits())
        return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++position;
      if (peek() == '+' || peek() == '-')
        ++position;
      if (!parseDigits())
        return false;
    }
    out.text = text.substr(start, position - start);
    return true;
  }

  bool parseHex4(unsigned &code) {
    if (text.size() - position < 4)
      return fail("truncated \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[position++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= static_cast<unsigned>(c - 'A' + 10);
      else
        return fail("bad \\u escape");
    }
    return true;
  }

  static void appendUtf8(std::string &out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool parseEscape(std::string &out) {
    if (atEnd())
      return fail("unterminated string");
    char c = text[position++];
    switch (c) {
    case '"':
    case '\\':
    case '/':
      out += c;
      return true;
    case 'b':
      out += '\b';
      return true;
    case 'f':
      out += '\f';
      return true;
    case 'n':
      out += '\n';
      return true;
    case 'r':
      out += '\r';
      return true;
    case 't':
      out += '\t';
      return true;
    case 'u':
      break;
    default:
      return fail("bad escape");
    }
    unsigned code = 0;
    if (!parseHex4(code))
      return false;
    if (code >= 0xD800 && code < 0xDC00) {
      unsigned low = 0;
      if (text.compare(position, 2, "\\u") != 0)
        return fail("unpaired surrogate");
      position += 2;
      if (!parseHex4(low))
        return false;
      if (low < 0xDC00 || low >= 0xE000)
        return fail("unpaired surrogate");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    } else if (code >= 0xDC00 && code < 0xE000) {
      return fail("unpaired surrogate");
    }
    appendUtf8(out, code);
    return true;
  }

  bool parseString(std::string &out) {
    ++position; // the opening quote
    out.clear();
    while (true) {
      if (atEnd())
        return fail("unterminated string");
      char c = text[position++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (!parseEscape(out))
        return false;
    }
  }

  const std::string &text;
  size_t position = 0;
  std::string message;
};

} // namespace

const JsonValue *JsonValue::find(const std::string &key) const {
  for (const auto &member : members)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

bool JsonValue::asInteger(int64_t &out) const {
  if (kind != Kind::Number || text.find_first_of(".eE") != std::string::npos)
    return false;
  const char *end = text.data() + text.size();
  auto result = std::from_chars(text.data(), end, out);
  return result.ec == std::errc() && result.ptr == end;
}

bool JsonValue::asDouble(double &out) const {
  if (kind != Kind::Number)
    return false;
  const char *end = text.data() + text.size();
  auto result = std::from_chars(text.data(), end, out);
  return result.ec == std::errc() && result.ptr == end;
}

bool parseJson(const std::string &text, JsonValue &out, std::string &error) {
  out = JsonValue();
  return Parser(text).parseDocument(out, error);
}

std::string jsonQuote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char escape[8];
        std::snprintf(escape, sizeof(escape), "\\u%04x", c);
        out += escape;
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

namespace {

template <typename Float> std::string shortestNumber(Float value) {
  if (!std::isfinite(value))
    return "null";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

} // namespace

std::string jsonNumber(double value) { return shortestNumber(value); }

std::string jsonNumber(float value) { return shortestNumber(value); }

} // namespace kiln::run
