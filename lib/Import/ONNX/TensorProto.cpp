//===- TensorProto.cpp - ONNX tensors and .npy files as attributes --------===//

#include "NodeContext.h"

#include <iterator>

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

Type kiln::onnx_import::elementTypeOf(int32_t onnxType, MLIRContext *context) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT16:
    return b.getI16Type();
  case onnx::TensorProto::INT8:
    return b.getI8Type();
  case onnx::TensorProto::UINT64:
    return b.getIntegerType(64, /*isSigned=*/false);
  case onnx::TensorProto::UINT32:
    return b.getIntegerType(32, /*isSigned=*/false);
  case onnx::TensorProto::UINT16:
    return b.getIntegerType(16, /*isSigned=*/false);
  case onnx::TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  // The narrow types of ONNX 1.14 and later (onnx.proto's numbers: Kiln's
  // ONNX library may predate them).
  case kFloat8E4M3FN:
    return b.getType<Float8E4M3FNType>();
  case kFloat8E4M3FNUZ:
    return b.getType<Float8E4M3FNUZType>();
  case kFloat8E5M2:
    return b.getType<Float8E5M2Type>();
  case kFloat8E5M2FNUZ:
    return b.getType<Float8E5M2FNUZType>();
  case kUInt4:
    return b.getIntegerType(4, /*isSigned=*/false);
  case kInt4:
    return b.getIntegerType(4);
  case kFloat4E2M1:
    return b.getType<Float4E2M1FNType>();
  case kFloat8E8M0:
    return b.getType<Float8E8M0FNUType>();
  case kUInt2:
    return b.getIntegerType(2, /*isSigned=*/false);
  case kInt2:
    return b.getIntegerType(2);
  default:
    return nullptr;
  }
}

StringRef kiln::onnx_import::onnxTypeName(int32_t onnxType) {
  if (onnx::TensorProto::DataType_IsValid(onnxType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(onnxType));
  // The types of ONNX releases newer than the library Kiln builds against
  // (1.14 and later), named as onnx.proto names them.
  static const char *const newer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",        "INT4",           "FLOAT4E2M1", "FLOAT8E8M0",
      "UINT2",        "INT2",           "FLOAT6E2M3", "FLOAT6E3M2"};
  if (onnxType >= 17 && onnxType < 17 + static_cast<int32_t>(std::size(newer)))
    return newer[onnxType - 17];
  return "unknown";
}

namespace {

/// Bytes of one element as Kiln holds it: booleans and the narrow types take
/// one byte each.
size_t storageBytes(Type element) {
  if (element.isInteger(1) || isNarrowType(element))
    return 1;
  return element.getIntOrFloatBitWidth() / 8;
}

/// Elements of a narrow type of fewer than 8 bits packed into bytes (`raw_data`
/// and `int32_data` alike), the first in the lowest bits, spread to one byte
/// each.
std::vector<char> unpackNarrow(ArrayRef<char> packed, unsigned width,
                               int64_t count) {
  unsigned perByte = 8 / width;
  std::vector<char> bytes(count);
  uint8_t mask = (1u << width) - 1;
  for (int64_t i = 0; i < count; ++i)
    bytes[i] = static_cast<char>(
        (static_cast<uint8_t>(packed[i / perByte]) >> (width * (i % perByte))) &
        mask);
  return bytes;
}

/// Builds the attribute from little-endian element bytes, one element per
/// `storageBytes` (booleans are one byte each).
DenseElementsAttr fromBytes(RankedTensorType type, ArrayRef<char> bytes) {
  Type element = type.getElementType();
  if (element.isInteger(1)) {
    SmallVector<bool> values;
    values.reserve(bytes.size());
    for (char byte : bytes)
      values.push_back(byte != 0);
    return DenseElementsAttr::get(type, values);
  }
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}

template <typename T, typename Field>
void appendAs(std::vector<char> &bytes, const Field &field) {
  for (auto value : field) {
    T converted = static_cast<T>(value);
    const char *p = reinterpret_cast<const char *>(&converted);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
}

/// The element bytes held in the typed repeated fields of a TensorProto.
bool typedFieldBytes(const onnx::TensorProto &tensor, Type element,
                     std::vector<char> &bytes) {
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    appendAs<float>(bytes, tensor.float_data());
    return true;
  case onnx::TensorProto::DOUBLE:
    appendAs<double>(bytes, tensor.double_data());
    return true;
  case onnx::TensorProto::INT64:
    appendAs<int64_t>(bytes, tensor.int64_data());
    return true;
  case onnx::TensorProto::INT32:
    appendAs<int32_t>(bytes, tensor.int32_data());
    return true;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    appendAs<int8_t>(bytes, tensor.int32_data());
    return true;
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    appendAs<int16_t>(bytes, tensor.int32_data());
    return true;
  case onnx::TensorProto::UINT32:
    appendAs<uint32_t>(bytes, tensor.uint64_data());
    return true;
  case onnx::TensorProto::UINT64:
    appendAs<uint64_t>(bytes, tensor.uint64_data());
    return true;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // 16-bit floats keep their bit patterns in int32_data.
    appendAs<uint16_t>(bytes, tensor.int32_data());
    return true;
  default:
    // The narrow types keep a byte each in int32_data (float8) or their
    // packed bytes (the 4- and 2-bit types, unpacked by the caller).
    if (isNarrowType(element)) {
      appendAs<uint8_t>(bytes, tensor.int32_data());
      return true;
    }
    return false;
  }
}

/// Reads `length` bytes at `offset` of an external data file.
bool readExternal(const onnx::TensorProto &tensor, StringRef baseDir,
                  size_t expected, std::vector<char> &bytes,
                  std::string &error) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      uint64_t value;
      if (StringRef(entry.value()).getAsInteger(10, value)) {
        error = "external data " + entry.key() + " '" + entry.value() +
                "' is not a number";
        return false;
      }
      if (entry.key() == "offset")
        offset = value;
      else
        length = value;
    }
  }
  if (location.empty()) {
    error = "external data of tensor '" + tensor.name() + "' has no location";
    return false;
  }
  if (baseDir.empty() && !llvm::sys::path::is_absolute(location)) {
    error = "external data file '" + location +
            "' cannot be resolved for a model read from memory";
    return false;
  }
  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot read external data file '" + path.str().str() +
            "': " + buffer.getError().message();
    return false;
  }
  uint64_t size = (*buffer)->getBufferSize();
  uint64_t count = length.value_or(size > offset ? size - offset : 0);
  if (offset > size || count > size - offset) {
    error = "external data of tensor '" + tensor.name() + "' ([" +
            std::to_string(offset) + ", +" + std::to_string(count) +
            ")) lies outside '" + path.str().str() + "' (" +
            std::to_string(size) + " bytes)";
    return false;
  }
  if (count != expected) {
    error = "external data of tensor '" + tensor.name() + "' holds " +
            std::to_string(count) + " bytes, expected " +
            std::to_string(expected);
    return false;
  }
  const char *start = (*buffer)->getBufferStart() + offset;
  bytes.assign(start, start + count);
  return true;
}

} // namespace

FailureOr<DenseElementsAttr>
kiln::onnx_import::convertTensor(const onnx::TensorProto &tensor,
                                 MLIRContext *context, StringRef baseDir,
                                 std::string &error) {
  std::string name = tensor.name().empty() ? "<unnamed>" : tensor.name();
  Type element = elementTypeOf(tensor.data_type(), context);
  if (!element) {
    error = "tensor '" + name + "' has element type " +
            onnxTypeName(tensor.data_type()).str() +
            ", which Kiln does not support";
    return failure();
  }
  if (tensor.has_segment()) {
    error = "tensor '" + name + "' is segmented, which is not supported";
    return failure();
  }
  SmallVector<int64_t> shape;
  int64_t count = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0 || (dim > 0 && count > (int64_t(1) << 40) / dim)) {
      error = "tensor '" + name + "' has an invalid shape";
      return failure();
    }
    shape.push_back(dim);
    count *= dim;
  }
  auto type = RankedTensorType::get(shape, element);
  unsigned width = element.isInteger(1) ? 8 : element.getIntOrFloatBitWidth();
  // What the file holds: the 4- and 2-bit types packed, `8 / width` a byte.
  size_t expected = width < 8
                        ? static_cast<size_t>((count * width + 7) / 8)
                        : static_cast<size_t>(count) * storageBytes(element);

  std::vector<char> bytes;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!readExternal(tensor, baseDir, expected, bytes, error))
      return failure();
  } else if (tensor.has_raw_data()) {
    bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
  } else {
    typedFieldBytes(tensor, element, bytes);
  }
  if (bytes.size() != expected) {
    error = "tensor '" + name + "' holds " + std::to_string(bytes.size()) +
            " bytes of data, expected " + std::to_string(expected) +
            " for shape and type";
    return failure();
  }
  if (width < 8)
    bytes = unpackNarrow(bytes, width, count);
  return fromBytes(type, bytes);
}

FailureOr<DenseElementsAttr>
kiln::onnx_import::readNpyFile(StringRef path, MLIRContext *context,
                               std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot read '" + path.str() + "': " + buffer.getError().message();
    return failure();
  }
  StringRef data = (*buffer)->getBuffer();
  auto bad = [&](const Twine &why) {
    error = "'" + path.str() + "' is not a valid .npy file: " + why.str();
    return failure();
  };
  if (data.size() < 10 || !data.starts_with("\x93NUMPY"))
    return bad("missing the \\x93NUMPY magic");
  uint8_t major = data[6];
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = uint8_t(data[8]) | (uint8_t(data[9]) << 8);
    headerStart = 10;
  } else if ((major == 2 || major == 3) && data.size() >= 12) {
    headerLength = uint32_t(uint8_t(data[8])) |
                   (uint32_t(uint8_t(data[9])) << 8) |
                   (uint32_t(uint8_t(data[10])) << 16) |
                   (uint32_t(uint8_t(data[11])) << 24);
    headerStart = 12;
  } else {
    return bad("unsupported format version " + Twine(int(major)));
  }
  if (headerStart + headerLength > data.size())
    return bad("truncated header");
  StringRef header = data.substr(headerStart, headerLength);
  auto field = [&](StringRef key) -> StringRef {
    size_t at = header.find(("'" + key + "'").str());
    if (at == StringRef::npos)
      return {};
    StringRef rest = header.drop_front(at + key.size() + 2).ltrim(" :");
    return rest;
  };
  StringRef descr = field("descr");
  if (!descr.consume_front("'"))
    return bad("no 'descr'");
  descr = descr.take_until([](char c) { return c == '\''; });
  if (field("fortran_order").starts_with("True"))
    return bad("Fortran-ordered arrays are not supported");
  StringRef shapeText = field("shape");
  if (!shapeText.consume_front("("))
    return bad("no 'shape'");
  shapeText = shapeText.take_until([](char c) { return c == ')'; });
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  shapeText.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    int64_t dim;
    if (part.trim().getAsInteger(10, dim) || dim < 0)
      return bad("bad shape '" + shapeText + "'");
    shape.push_back(dim);
  }
  Builder b(context);
  Type element;
  if (descr == "<f4")
    element = b.getF32Type();
  else if (descr == "<f8")
    element = b.getF64Type();
  else if (descr == "<f2")
    element = b.getF16Type();
  else if (descr == "<i8")
    element = b.getI64Type();
  else if (descr == "<i4")
    element = b.getI32Type();
  else if (descr == "<i2")
    element = b.getI16Type();
  else if (descr == "|i1")
    element = b.getI8Type();
  else if (descr == "<u8" || descr == "<u4" || descr == "<u2" || descr == "|u1")
    element = b.getIntegerType(8 * (descr.back() - '0'), /*isSigned=*/false);
  else if (descr == "|b1")
    element = b.getI1Type();
  else
    return bad("element type '" + descr + "' is not supported");
  auto type = RankedTensorType::get(shape, element);
  size_t expected = type.getNumElements() * storageBytes(element);
  StringRef payload = data.drop_front(headerStart + headerLength);
  if (payload.size() != expected)
    return bad("holds " + Twine(payload.size()) + " bytes of data, expected " +
               Twine(expected));
  return fromBytes(type, ArrayRef<char>(payload.data(), payload.size()));
}
