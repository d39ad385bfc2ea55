//===- Status.h - error results of the Kiln runtime libraries ---*- C++ -*-===//
//
// The bundle reader and writer, the NumPy file support and the runtime's
// internals report failures as a Status: a code (the same values as the C
// API's kiln_status_t) and a message naming the file, array or offset at
// fault. They never throw and never abort.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STATUS_H
#define KILN_RUNTIME_STATUS_H

#include <sstream>
#include <string>
#include <utility>

namespace kiln::runtime {

/// Kinds of failure; the values equal the C API's kiln_status_t.
enum class StatusCode {
  Ok = 0,
  IoError = 1,
  FormatError = 2,
  InvalidArgument = 3,
  NotFound = 4,
  Unsupported = 5,
  OutOfMemory = 6,
  Internal = 7,
  Collective = 8,
};

/// The outcome of an operation: success, or a code and a message.
class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  Status(StatusCode code, std::string message)
      : statusCode(code), text(std::move(message)) {}

  bool ok() const { return statusCode == StatusCode::Ok; }
  StatusCode code() const { return statusCode; }
  const std::string &message() const { return text; }

  /// The same failure with `context: ` in front of its message; success
  /// stays success.
  Status withContext(const std::string &context) const {
    if (ok())
      return *this;
    return Status(statusCode, context + ": " + text);
  }

private:
  StatusCode statusCode = StatusCode::Ok;
  std::string text;
};

/// Concatenates the arguments as an ostream would print them.
template <typename... Args> std::string strCat(const Args &...args) {
  std::ostringstream stream;
  (stream << ... << args);
  return stream.str();
}

template <typename... Args> Status ioError(const Args &...args) {
  return Status(StatusCode::IoError, strCat(args...));
}
template <typename... Args> Status formatError(const Args &...args) {
  return Status(StatusCode::FormatError, strCat(args...));
}
template <typename... Args> Status invalidArgument(const Args &...args) {
  return Status(StatusCode::InvalidArgument, strCat(args...));
}
template <typename... Args> Status notFound(const Args &...args) {
  return Status(StatusCode::NotFound, strCat(args...));
}
template <typename... Args> Status unsupported(const Args &...args) {
  return Status(StatusCode::Unsupported, strCat(args...));
}
template <typename... Args> Status outOfMemory(const Args &...args) {
  return Status(StatusCode::OutOfMemory, strCat(args...));
}
template <typename... Args> Status internalError(const Args &...args) {
  return Status(StatusCode::Internal, strCat(args...));
}
template <typename... Args> Status collectiveError(const Args &...args) {
  return Status(StatusCode::Collective, strCat(args...));
}

/// Returns from the enclosing function when `expr` is a failure.
#define KILN_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::kiln::runtime::Status kilnStatus_ = (expr);                              \
    if (!kilnStatus_.ok())                                                     \
      return kilnStatus_;                                                      \
  } while (false)

} // namespace kiln::runtime

#endif // KILN_RUNTIME_STATUS_H
