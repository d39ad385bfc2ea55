//===- Parameters.cpp - parameter values in and out of sessions -----------===//

#include "Parameters.h"

#include "Json.h"
#include "kiln/runtime/Manifest.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::run {

using kiln::runtime::Status;

namespace {

/// The shape files store `parameter` in: its own, or for a state sharded
/// over the ranks the whole of it, every rank's shard one after another.
std::vector<int64_t> storedShape(const kiln_parameter_info_t &parameter) {
  const kiln_tensor_info_t &tensor = parameter.tensor;
  std::vector<int64_t> shape(tensor.shape, tensor.shape + tensor.rank);
  if (parameter.shard_ranks > 0 && tensor.rank == 1)
    shape[0] *= parameter.shard_ranks;
  return shape;
}

const char *safetensorsDtype(kiln_element_type_t type) {
  switch (type) {
  case KILN_ELEMENT_TYPE_F32:
    return "F32";
  case KILN_ELEMENT_TYPE_F16:
    return "F16";
  case KILN_ELEMENT_TYPE_BF16:
    return "BF16";
  case KILN_ELEMENT_TYPE_F64:
    return "F64";
  case KILN_ELEMENT_TYPE_I64:
    return "I64";
  case KILN_ELEMENT_TYPE_I32:
    return "I32";
  case KILN_ELEMENT_TYPE_I16:
    return "I16";
  case KILN_ELEMENT_TYPE_I8:
    return "I8";
  case KILN_ELEMENT_TYPE_U64:
    return "U64";
  case KILN_ELEMENT_TYPE_U32:
    return "U32";
  case KILN_ELEMENT_TYPE_U16:
    return "U16";
  case KILN_ELEMENT_TYPE_U8:
    return "U8";
  case KILN_ELEMENT_TYPE_BOOL:
    return "BOOL";
  case KILN_ELEMENT_TYPE_F8E4M3FN:
    return "F8_E4M3";
  case KILN_ELEMENT_TYPE_F8E5M2:
    return "F8_E5M2";
  case KILN_ELEMENT_TYPE_F8E8M0:
    return "F8_E8M0";
  // Types safetensors does not name.
  case KILN_ELEMENT_TYPE_F8E4M3FNUZ:
  case KILN_ELEMENT_TYPE_F8E5M2FNUZ:
  case KILN_ELEMENT_TYPE_F4E2M1:
  case KILN_ELEMENT_TYPE_I4:
  case KILN_ELEMENT_TYPE_U4:
  case KILN_ELEMENT_TYPE_I2:
  case KILN_ELEMENT_TYPE_U2:
    return nullptr;
  }
  return nullptr;
}

bool elementTypeOfDtype(const std::string &dtype, kiln_element_type_t &type) {
  static const kiln_element_type_t kTypes[] = {
      KILN_ELEMENT_TYPE_F32,    KILN_ELEMENT_TYPE_F16,
      KILN_ELEMENT_TYPE_BF16,   KILN_ELEMENT_TYPE_F64,
      KILN_ELEMENT_TYPE_I64,    KILN_ELEMENT_TYPE_I32,
      KILN_ELEMENT_TYPE_I16,    KILN_ELEMENT_TYPE_I8,
      KILN_ELEMENT_TYPE_U64,    KILN_ELEMENT_TYPE_U32,
      KILN_ELEMENT_TYPE_U16,    KILN_ELEMENT_TYPE_U8,
      KILN_ELEMENT_TYPE_BOOL,   KILN_ELEMENT_TYPE_F8E4M3FN,
      KILN_ELEMENT_TYPE_F8E5M2, KILN_ELEMENT_TYPE_F8E8M0};
  for (kiln_element_type_t candidate : kTypes) {
    if (dtype == safetensorsDtype(candidate)) {
      type = candidate;
      return true;
    }
  }
  return false;
}

/// The index of the bundle's parameter called `name`, or false.
bool findParameter(const kiln_bundle_t *bundle, size_t count,
                   const std::string &name, kiln_parameter_info_t &parameter,
                   bool &found) {
  found = false;
  for (size_t i = 0; i < count && !found; ++i) {
    if (kiln_status_t error = kiln_bundle_get_parameter(bundle, i, &parameter))
      return failed(error);
    found = name == parameter.tensor.name;
  }
  return true;
}

/// Checks and decodes the header entry `name` of a safetensors file whose
/// data section is `data`.
bool decodeTensor(const std::string &name, const JsonValue &entry,
                  const std::string &data, const std::string &path,
                  NamedArray &array) {
  std::string what = path + ": tensor '" + name + "'";
  const JsonValue *dtype = entry.find("dtype");
  const JsonValue *shape = entry.find("shape");
  const JsonValue *offsets = entry.find("data_offsets");
  if (entry.kind != JsonValue::Kind::Object || !dtype ||
      dtype->kind != JsonValue::Kind::String || !shape ||
      shape->kind != JsonValue::Kind::Array || !offsets ||
      offsets->kind != JsonValue::Kind::Array || offsets->items.size() != 2) {
    printError(what + " lacks a dtype, shape or data_offsets");
    return false;
  }
  array.name = name;
  if (!elementTypeOfDtype(dtype->text, array.array.elementType)) {
    printError(what + " has the unsupported dtype '" + dtype->text + "'");
    return false;
  }
  for (const JsonValue &dim : shape->items) {
    int64_t size = 0;
    if (!dim.asInteger(size) || size < 0) {
      printError(what + " has a malformed shape");
      return false;
    }
    array.array.shape.push_back(size);
  }
  int64_t begin = 0, end = 0;
  uint64_t bytes = 0;
  if (!offsets->items[0].asInteger(begin) ||
      !offsets->items[1].asInteger(end) || begin < 0 || end < begin ||
      static_cast<uint64_t>(end) > data.size() ||
      !kiln::runtime::npyByteSize(array.array.elementType, array.array.shape,
                                  bytes) ||
      bytes != static_cast<uint64_t>(end - begin)) {
    printError(what + ": data_offsets do not fit its type and the " +
               std::to_string(data.size()) + "-byte data (truncated file?)");
    return false;
  }
  Status status = kiln::runtime::AlignedBuffer::allocate(
      static_cast<size_t>(bytes), array.array.data);
  if (!status.ok()) {
    printError(what + ": " + status.message());
    return false;
  }
  std::memcpy(array.array.data.data(), data.data() + begin,
              static_cast<size_t>(bytes));
  return true;
}

/// Creates a new file next to `path` that nothing else uses.
int createTemporary(const std::string &path, std::string &temporary) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    temporary = path + ".tmp." + std::to_string(getpid()) + "." +
                std::to_string(counter++);
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                    0666);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

bool writeAll(int fd, const std::string &bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t count = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0 && errno == EINTR)
      continue;
    if (count <= 0)
      return false;
    written += static_cast<size_t>(count);
  }
  return true;
}

/// Flushes the directory holding `path`, so a rename into it is durable.
bool syncDirectoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string directory = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = fsync(fd) == 0;
  return (::close(fd) == 0) && ok;
}

} // namespace

bool setParameters(const kiln_bundle_t *bundle, kiln_session_t *session,
                   const std::vector<NamedArray> &arrays,
                   const std::string &source, bool requireAll) {
  kiln_bundle_info_t info;
  if (kiln_status_t error = kiln_bundle_get_info(bundle, &info))
    return failed(error);
  for (const NamedArray &array : arrays) {
    kiln_parameter_info_t parameter;
    bool found = false;
    if (!findParameter(bundle, info.parameter_count, array.name, parameter,
                       found))
      return false;
    if (!found) {
      printError(source + ": the bundle has no parameter '" + array.name + "'");
      return false;
    }
    const kiln_tensor_info_t &declared = parameter.tensor;
    // A sharded state is stored whole (every rank's shard, as
    // encodeSafetensors gathers it); this rank takes its own.
    std::vector<int64_t> expected = storedShape(parameter);
    // ml_dtypes' narrow arrays say only "one byte each".
    kiln_element_type_t type =
        array.array.narrowBytes &&
                kiln::runtime::isNarrowElementType(declared.element_type)
            ? declared.element_type
            : array.array.elementType;
    if (type != declared.element_type || array.array.shape != expected) {
      printError(source + ": array '" + array.name + "' has type " +
                 kiln::runtime::describeTensorType(
                     type, array.array.shape.data(), array.array.shape.size()) +
                 ", the parameter is " +
                 kiln::runtime::describeTensorType(
                     declared.element_type, expected.data(), expected.size()) +
                 (parameter.shard_ranks > 0
                      ? " (sharded over " +
                            std::to_string(parameter.shard_ranks) + " ranks)"
                      : ""));
      return false;
    }
    const uint8_t *data = array.array.data.data();
    size_t size = array.array.data.size();
    if (parameter.shard_ranks > 0) {
      size /= static_cast<size_t>(parameter.shard_ranks);
      data += size * static_cast<size_t>(distributedInfo().rank);
    }
    if (kiln_status_t error =
            kiln_session_set_parameter(session, array.name.c_str(), data, size))
      return failed(error, source);
  }
  if (!requireAll)
    return true;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t parameter;
    if (kiln_status_t error = kiln_bundle_get_parameter(bundle, i, &parameter))
      return failed(error);
    if (std::none_of(arrays.begin(), arrays.end(), [&](const NamedArray &a) {
          return a.name == parameter.tensor.name;
        })) {
      printError(source + ": no value for the parameter '" +
                 parameter.tensor.name + "'");
      return false;
    }
  }
  return true;
}

bool loadParameters(const Options &options, const kiln_bundle_t *bundle,
                    kiln_session_t *session) {
  if (options.params.empty())
    return true;
  std::vector<NamedArray> arrays;
  Status status = kiln::runtime::readNpz(options.params, arrays);
  if (!status.ok()) {
    printError(status.message());
    return false;
  }
  return setParameters(bundle, session, arrays, options.params,
                       /*requireAll=*/false);
}

bool encodeSafetensors(const kiln_bundle_t *bundle, kiln_session_t *session,
                       std::string &bytes) {
  kiln_bundle_info_t info;
  if (kiln_status_t error = kiln_bundle_get_info(bundle, &info))
    return failed(error);
  std::string header = "{", data;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t parameter;
    if (kiln_status_t error = kiln_bundle_get_parameter(bundle, i, &parameter))
      return failed(error);
    const kiln_tensor_info_t &tensor = parameter.tensor;
    std::string value(tensor.byte_size, '\0');
    if (kiln_status_t error = kiln_session_get_parameter(
            session, tensor.name, value.data(), value.size()))
      return failed(error);
    std::vector<int64_t> dims = storedShape(parameter);
    // A sharded state is gathered from every rank and stored whole.
    if (parameter.shard_ranks > 0 && tensor.rank == 1) {
      std::string whole(
          value.size() * static_cast<size_t>(parameter.shard_ranks), '\0');
      if (kiln_status_t error = kiln_distributed_all_gather(
              value.data(), whole.data(), value.size()))
        return failed(error);
      value = std::move(whole);
    }
    std::string shape;
    for (size_t d = 0; d < dims.size(); ++d)
      shape += (d ? "," : "") + std::to_string(dims[d]);
    header += std::string(i ? "," : "") + jsonQuote(tensor.name) +
              ":{\"dtype\":\"" + safetensorsDtype(tensor.element_type) +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," +
              std::to_string(data.size() + value.size()) + "]}";
    data += value;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  bytes.clear();
  uint64_t length = header.size();
  for (int b = 0; b < 8; ++b)
    bytes += static_cast<char>(static_cast<unsigned char>(length >> (8 * b)));
  bytes += header;
  bytes += data;
  return true;
}

bool decodeSafetensors(const std::string &bytes, const std::string &path,
                       std::vector<NamedArray> &arrays) {
  uint64_t length = 0;
  for (int b = 0; b < 8 && static_cast<size_t>(b) < bytes.size(); ++b)
    length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[b]))
              << (8 * b);
  if (bytes.size() < 8 || length > bytes.size() - 8) {
    printError(path +
               ": not a safetensors file (the header length does not "
               "fit the " +
               std::to_string(bytes.size()) + "-byte file)");
    return false;
  }
  JsonValue header;
  std::string error;
  if (!parseJson(bytes.substr(8, length), header, error) ||
      header.kind != JsonValue::Kind::Object) {
    printError(path + ": the safetensors header is not a JSON object" +
               (error.empty() ? "" : ": " + error));
    return false;
  }
  std::string data = bytes.substr(8 + length);
  arrays.clear();
  for (const auto &[name, entry] : header.members) {
    if (name == "__metadata__")
      continue;
    NamedArray array;
    if (!decodeTensor(name, entry, data, path, array))
      return false;
    arrays.push_back(std::move(array));
  }
  return true;
}

bool hasShardedState(const kiln_bundle_t *bundle) {
  kiln_bundle_info_t info;
  if (kiln_bundle_get_info(bundle, &info) != KILN_OK)
    return false;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t parameter;
    if (kiln_bundle_get_parameter(bundle, i, &parameter) == KILN_OK &&
        parameter.shard_ranks > 0)
      return true;
  }
  return false;
}

bool saveParameters(const Options &options, const kiln_bundle_t *bundle,
                    kiln_session_t *session) {
  if (options.saveParams.empty())
    return true;
  bool root = distributedInfo().rank == 0;
  if (!root && !hasShardedState(bundle))
    return true;
  std::string bytes;
  return encodeSafetensors(bundle, session, bytes) &&
         (!root || writeFileAtomically(options.saveParams, bytes));
}

bool writeFileAtomically(const std::string &path, const std::string &bytes) {
  std::string temporary;
  int fd = createTemporary(path, temporary);
  if (fd < 0) {
    printError(path + ": cannot create a temporary file next to it: " +
               std::strerror(errno));
    return false;
  }
  bool ok = writeAll(fd, bytes) && fsync(fd) == 0;
  int savedErrno = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    savedErrno = errno;
  }
  if (ok && std::rename(temporary.c_str(), path.c_str()) != 0) {
    ok = false;
    savedErrno = errno;
  }
  if (!ok) {
    ::unlink(temporary.c_str());
    printError(path + ": cannot write: " + std::strerror(savedErrno));
    return false;
  }
  if (!syncDirectoryOf(path)) {
    printError(path + ": cannot flush its directory: " + std::strerror(errno));
    return false;
  }
  return true;
}

bool checkWritable(const std::string &flag, const std::string &path) {
  struct stat status;
  if (::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode)) {
    printError(flag + " " + path + " is a directory, not a file");
    return false;
  }
  size_t slash = path.find_last_of('/');
  std::string directory = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::stat(directory.c_str(), &status) != 0) {
    int error = errno;
    printError(flag + " " + path + ": its directory " + directory +
               (error == ENOENT ? std::string(" does not exist")
                                : ": " + std::string(std::strerror(error))));
    return false;
  }
  if (!S_ISDIR(status.st_mode)) {
    printError(flag + " " + path + ": " + directory + " is not a directory");
    return false;
  }
  std::string probe;
  int fd = createTemporary(path, probe);
  if (fd < 0) {
    int error = errno;
    printError(flag + " " + path + ": cannot create files in " + directory +
               ": " + std::strerror(error));
    return false;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

bool readWholeFile(const std::string &path, std::string &bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    printError(path + ": cannot read: " + std::strerror(errno));
    return false;
  }
  std::ostringstream stream;
  stream << file.rdbuf();
  if (file.bad()) {
    printError(path + ": cannot read: " + std::strerror(errno));
    return false;
  }
  bytes = stream.str();
  return true;
}

} // namespace kiln::run
