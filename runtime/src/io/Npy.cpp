//===- Npy.cpp - NumPy .npy arrays ----------------------------------------===//

#include "kiln/runtime/Npy.h"

#include "io/NpyStream.h"
#include "kiln/runtime/BundleFormat.h"
#include "kiln/runtime/ElementType.h"

#include <cstring>
#include <string_view>

namespace kiln::runtime {

namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
constexpr uint64_t kMaxNpyBytes = uint64_t(1) << 62;
constexpr size_t kMaxHeaderSize = size_t(1) << 20;

struct DtypeEntry {
  kiln_element_type_t type;
  char kind;
  int size;
};

/// The dtypes .npy files may hold, by kind character and item size.
constexpr DtypeEntry kDtypes[] = {
    {KILN_ELEMENT_TYPE_F32, 'f', 4},
    {KILN_ELEMENT_TYPE_F64, 'f', 8},
    {KILN_ELEMENT_TYPE_F16, 'f', 2},
    {KILN_ELEMENT_TYPE_I64, 'i', 8},
    {KILN_ELEMENT_TYPE_I32, 'i', 4},
    {KILN_ELEMENT_TYPE_I16, 'i', 2},
    {KILN_ELEMENT_TYPE_I8, 'i', 1},
    {KILN_ELEMENT_TYPE_U64, 'u', 8},
    {KILN_ELEMENT_TYPE_U32, 'u', 4},
    {KILN_ELEMENT_TYPE_U16, 'u', 2},
    {KILN_ELEMENT_TYPE_U8, 'u', 1},
    {KILN_ELEMENT_TYPE_BOOL, 'b', 1},
    // NumPy has no bf16; ml_dtypes' bfloat16 arrays (what PyTorch's and
    // ONNX's Python packages give) save as the 2-byte void type, and Kiln
    // writes its bf16 arrays so, to be read back with
    // `.view(ml_dtypes.bfloat16)`.
    {KILN_ELEMENT_TYPE_BF16, 'V', 2},
};

/// Maps a descr such as "<f4" or "|b1" to an element type; ml_dtypes'
/// one-byte types ("|V1", and "<f1" for float8_e5m2) set `narrowBytes`.
Status parseDescr(const std::string &descr, kiln_element_type_t &type,
                  bool &narrowBytes) {
  if (descr.size() == 3 && (descr[1] == 'V' || descr[1] == 'f') &&
      descr[2] == '1' && descr[0] != '>') {
    type = KILN_ELEMENT_TYPE_U8;
    narrowBytes = true;
    return Status();
  }
  if (descr.size() == 3) {
    char order = descr[0];
    int size = descr[2] - '0';
    for (const DtypeEntry &entry : kDtypes) {
      if (entry.kind != descr[1] || entry.size != size)
        continue;
      if (order == '>' && size > 1)
        return unsupported("big-endian dtype '", descr,
                           "' is not supported; save little-endian arrays");
      if (order != '<' && order != '|' && order != '=' && order != '>')
        break;
      type = entry.type;
      return Status();
    }
  }
  return unsupported(
      "dtype '", descr,
      "' is not supported (supported: f4 f8 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1, "
      "V2 for bf16 and V1 for the float8, float4, int4 and int2 types)");
}

/// Parses the Python dict literal of an .npy header:
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text(text) {}

  Status parse(std::string &descr, bool &fortranOrder,
               std::vector<int64_t> &shape) {
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!consume('{'))
      return error("expected '{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      KILN_RETURN_IF_ERROR(parseString(key));
      skipSpace();
      if (!consume(':'))
        return error("expected ':' after '" + key + "'");
      skipSpace();
      if (key == "descr" && !haveDescr) {
        haveDescr = true;
        if (peek() == '[')
          return unsupported("structured dtypes are not supported");
        KILN_RETURN_IF_ERROR(parseString(descr));
      } else if (key == "fortran_order" && !haveOrder) {
        haveOrder = true;
        KILN_RETURN_IF_ERROR(parseBool(fortranOrder));
      } else if (key == "shape" && !haveShape) {
        haveShape = true;
        KILN_RETURN_IF_ERROR(parseShape(shape));
      } else {
        return error("unexpected or repeated key '" + key + "'");
      }
      skipSpace();
      if (!consume(',')) {
        skipSpace();
        if (!consume('}'))
          return error("expected ',' or '}'");
        break;
      }
    }
    if (!haveDescr || !haveOrder || !haveShape)
      return error("it lacks 'descr', 'fortran_order' or 'shape'");
    return Status();
  }

private:
  Status error(const std::string &what) const {
    return formatError("malformed .npy header at character ", pos, ": ", what);
  }
  char peek() const { return pos < text.size() ? text[pos] : '\0'; }
  bool consume(char c) {
    if (peek() != c)
      return false;
    ++pos;
    return true;
  }
  void skipSpace() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n')
      ++pos;
  }

  Status parseString(std::string &out) {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      return error("expected a string");
    size_t end = text.find(quote, pos + 1);
    if (end == std::string_view::npos)
      return error("unterminated string");
    out.assign(text.substr(pos + 1, end - pos - 1));
    if (out.find('\\') != std::string::npos)
      return error("escapes in strings are not supported");
    pos = end + 1;
    return Status();
  }

  Status parseBool(bool &out) {
    if (text.substr(pos, 4) == "True") {
      pos += 4;
      out = true;
      return Status();
    }
    if (text.substr(pos, 5) == "False") {
      pos += 5;
      out = false;
      return Status();
    }
    return error("expected True or False");
  }

  Status parseInt(int64_t &out) {
    size_t start = pos;
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint64_t>(peek() - '0');
      if (value > kMaxNpyBytes)
        return error("dimension too large");
      ++pos;
    }
    if (pos == start)
      return error("expected a dimension");
    if (peek() == 'L')
      ++pos;
    out = static_cast<int64_t>(value);
    return Status();
  }

  Status parseShape(std::vector<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return error("expected '(' to start the shape");
    while (true) {
      skipSpace();
      if (consume(')'))
        return Status();
      int64_t dim = 0;
      KILN_RETURN_IF_ERROR(parseInt(dim));
      shape.push_back(dim);
      skipSpace();
      if (!consume(',')) {
        skipSpace();
        if (!consume(')'))
          return error("expected ',' or ')' in the shape");
        return Status();
      }
    }
  }

  std::string_view text;
  size_t pos = 0;
};

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    text += ",";
  return text + ")";
}

/// Reads the version-dependent header length that follows the magic.
Status readHeaderText(NpyStream &in, std::string &text) {
  uint8_t prefix[kNpyMagicSize + 2];
  KILN_RETURN_IF_ERROR(in.read(prefix, sizeof(prefix)));
  if (std::memcmp(prefix, kNpyMagic, kNpyMagicSize) != 0)
    return formatError("not an .npy array (bad magic)");
  uint8_t major = prefix[kNpyMagicSize];
  uint64_t length = 0;
  if (major == 1) {
    uint8_t size[2];
    KILN_RETURN_IF_ERROR(in.read(size, 2));
    length = size[0] | size[1] << 8;
  } else if (major == 2 || major == 3) {
    uint8_t size[4];
    KILN_RETURN_IF_ERROR(in.read(size, 4));
    length = loadLE32(size);
  } else {
    return unsupported(".npy format version ", int(major), " is not supported");
  }
  if (length > kMaxHeaderSize)
    return formatError(".npy header of ", length, " bytes is implausibly long");
  text.resize(static_cast<size_t>(length));
  return in.read(text.data(), text.size());
}

} // namespace

bool isNarrowElementType(int type) {
  return type >= KILN_ELEMENT_TYPE_F8E4M3FN && type <= KILN_ELEMENT_TYPE_U2;
}

void adoptNarrowType(NpyArray &array, int declared) {
  if (array.narrowBytes && isNarrowElementType(declared))
    array.elementType = static_cast<kiln_element_type_t>(declared);
}

const char *npyDescr(kiln_element_type_t type) {
  switch (type) {
  case KILN_ELEMENT_TYPE_F32:
    return "<f4";
  case KILN_ELEMENT_TYPE_F64:
    return "<f8";
  case KILN_ELEMENT_TYPE_F16:
    return "<f2";
  case KILN_ELEMENT_TYPE_BF16:
    return "<V2";
  case KILN_ELEMENT_TYPE_I64:
    return "<i8";
  case KILN_ELEMENT_TYPE_I32:
    return "<i4";
  case KILN_ELEMENT_TYPE_I16:
    return "<i2";
  case KILN_ELEMENT_TYPE_I8:
    return "|i1";
  case KILN_ELEMENT_TYPE_U64:
    return "<u8";
  case KILN_ELEMENT_TYPE_U32:
    return "<u4";
  case KILN_ELEMENT_TYPE_U16:
    return "<u2";
  case KILN_ELEMENT_TYPE_U8:
    return "|u1";
  case KILN_ELEMENT_TYPE_BOOL:
    return "|b1";
  case KILN_ELEMENT_TYPE_F8E4M3FN:
  case KILN_ELEMENT_TYPE_F8E4M3FNUZ:
  case KILN_ELEMENT_TYPE_F8E5M2:
  case KILN_ELEMENT_TYPE_F8E5M2FNUZ:
  case KILN_ELEMENT_TYPE_F8E8M0:
  case KILN_ELEMENT_TYPE_F4E2M1:
  case KILN_ELEMENT_TYPE_I4:
  case KILN_ELEMENT_TYPE_U4:
  case KILN_ELEMENT_TYPE_I2:
  case KILN_ELEMENT_TYPE_U2:
    return "|V1";
  }
  return nullptr; // Not a type of the enumeration.
}

bool npyByteSize(kiln_element_type_t type, const std::vector<int64_t> &shape,
                 uint64_t &bytes) {
  uint64_t size = elementTypeSize(type);
  if (size == 0)
    return false;
  for (int64_t dim : shape) {
    if (dim < 0)
      return false;
    if (dim != 0 && size > kMaxNpyBytes / static_cast<uint64_t>(dim))
      return false;
    size *= static_cast<uint64_t>(dim);
  }
  bytes = size;
  return true;
}

Status allocateNpyArray(NpyArray &array) {
  uint64_t bytes = 0;
  if (!npyByteSize(array.elementType, array.shape, bytes))
    return invalidArgument("an array of type ",
                           elementTypeName(array.elementType), " and shape ",
                           formatShape(array.shape), " has no valid size");
  if (bytes > SIZE_MAX)
    return outOfMemory("an array of ", bytes, " bytes does not fit in memory");
  return AlignedBuffer::allocate(static_cast<size_t>(bytes), array.data);
}

Status encodeNpyHeader(kiln_element_type_t type,
                       const std::vector<int64_t> &shape, std::string &out) {
  const char *descr = npyDescr(type);
  if (!descr)
    return unsupported(".npy files cannot hold ", elementTypeName(type),
                       " arrays");
  std::string dict =
      strCat("{'descr': '", descr,
             "', 'fortran_order': False, 'shape': ", formatShape(shape), ", }");
  // Version 1 stores the header length in 2 bytes, version 2 in 4.
  size_t prefix = kNpyMagicSize + 2 + 2;
  size_t total = alignUp(prefix + dict.size() + 1, kTensorAlignment);
  uint8_t major = 1;
  if (total - prefix > 0xffff) {
    prefix += 2;
    total = alignUp(prefix + dict.size() + 1, kTensorAlignment);
    major = 2;
  }
  size_t length = total - prefix;
  dict.append(length - dict.size() - 1, ' ');
  dict += '\n';
  out.assign(kNpyMagic, kNpyMagicSize);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < prefix - kNpyMagicSize - 2; ++i)
    out += static_cast<char>((length >> (8 * i)) & 0xff);
  out += dict;
  return Status();
}

Status readNpy(NpyStream &in, NpyArray &out) {
  std::string text;
  KILN_RETURN_IF_ERROR(readHeaderText(in, text));
  std::string descr;
  bool fortranOrder = false;
  NpyArray array;
  KILN_RETURN_IF_ERROR(
      HeaderParser(text).parse(descr, fortranOrder, array.shape));
  KILN_RETURN_IF_ERROR(parseDescr(descr, array.elementType, array.narrowBytes));
  if (fortranOrder)
    return unsupported("Fortran-order arrays are not supported; save the "
                       "array in C order (numpy.ascontiguousarray)");
  uint64_t bytes = 0;
  if (!npyByteSize(array.elementType, array.shape, bytes))
    return formatError("shape ", formatShape(array.shape), " is too large");
  if (in.remaining() != bytes)
    return formatError("holds ", in.remaining(), " bytes of data, but ", descr,
                       " ", formatShape(array.shape), " needs ", bytes);
  KILN_RETURN_IF_ERROR(allocateNpyArray(array));
  KILN_RETURN_IF_ERROR(in.read(array.data.data(), array.data.size()));
  out = std::move(array);
  return Status();
}

Status readNpyFile(const std::string &path, NpyArray &out) {
  FileNpyStream in;
  KILN_RETURN_IF_ERROR(in.open(path));
  return readNpy(in, out).withContext(path);
}

Status writeNpyFile(const std::string &path, const NpyArray &array) {
  std::string header;
  KILN_RETURN_IF_ERROR(encodeNpyHeader(array.elementType, array.shape, header)
                           .withContext(path));
  return writeFileReplacing(
      path, {ByteSpan(header), ByteSpan(array.data.data(), array.data.size())});
}

} // namespace kiln::runtime
