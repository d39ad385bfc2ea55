//===- NpyStream.cpp - where .npy bytes are read from ---------------------===//

#include "io/NpyStream.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace kiln::runtime {

FileNpyStream::~FileNpyStream() {
  if (file)
    std::fclose(file);
}

Status FileNpyStream::open(const std::string &path) {
  file = std::fopen(path.c_str(), "rb");
  if (!file)
    return ioError(path, ": cannot open: ", std::strerror(errno));
  struct stat info;
  if (fstat(fileno(file), &info) != 0 || !S_ISREG(info.st_mode))
    return ioError(path, ": not a regular file");
  left = static_cast<uint64_t>(info.st_size);
  return Status();
}

Status FileNpyStream::read(void *data, size_t size) {
  if (size > left)
    return formatError("truncated: ", size, " more bytes expected, ", left,
                       " left");
  if (size > 0 && std::fread(data, 1, size, file) != size)
    return ioError("cannot read: ", std::strerror(errno));
  left -= size;
  return Status();
}

Status writeFileReplacing(const std::string &path,
                          std::initializer_list<ByteSpan> parts) {
  std::string tempPath = path + ".tmp";
  std::FILE *file = std::fopen(tempPath.c_str(), "wb");
  if (!file)
    return ioError(path, ": cannot create ", tempPath, ": ",
                   std::strerror(errno));
  bool ok = true;
  for (ByteSpan part : parts)
    ok = ok && (part.size == 0 ||
                std::fwrite(part.data, 1, part.size, file) == part.size);
  ok = (std::fclose(file) == 0) && ok;
  if (!ok || std::rename(tempPath.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(tempPath.c_str());
    return ioError(path, ": cannot write: ", std::strerror(error));
  }
  return Status();
}

} // namespace kiln::runtime
