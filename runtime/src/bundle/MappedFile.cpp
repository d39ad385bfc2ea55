//===- MappedFile.cpp - a file mapped read-only into memory ---------------===//

#include "bundle/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::runtime {

MappedFile::~MappedFile() {
  if (address)
    munmap(address, length);
  if (fd >= 0)
    close(fd);
}

Status MappedFile::open(const std::string &path,
                        std::unique_ptr<MappedFile> &out) {
  std::unique_ptr<MappedFile> file(new MappedFile());
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer forever; it is refused below as not a regular file.
  file->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file->fd < 0)
    return ioError(path, ": cannot open: ", std::strerror(errno));
  struct stat info;
  if (fstat(file->fd, &info) != 0)
    return ioError(path, ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    return ioError(path, ": not a regular file (",
                   S_ISDIR(info.st_mode)    ? "a directory"
                   : S_ISFIFO(info.st_mode) ? "a FIFO"
                   : S_ISCHR(info.st_mode)  ? "a character device"
                                            : "a special file",
                   ")");
  if (info.st_size == 0)
    return formatError(path, ": the file is empty, not a Kiln bundle");
  file->length = static_cast<size_t>(info.st_size);
  void *address =
      mmap(nullptr, file->length, PROT_READ, MAP_PRIVATE, file->fd, 0);
  if (address == MAP_FAILED)
    return ioError(path, ": cannot map ", file->length,
                   " bytes: ", std::strerror(errno));
  file->address = address;
  out = std::move(file);
  return Status();
}

void MappedFile::releaseResidentPages() {
  // The mapping is read-only and private, so its pages never differ from
  // the file and MADV_DONTNEED cannot lose anything. It is only advice: a
  // failure leaves the pages resident, which is harmless.
  if (address)
    madvise(address, length, MADV_DONTNEED);
}

PrivateMapping::~PrivateMapping() {
  if (address)
    munmap(address, length);
}

Status PrivateMapping::map(int fd, uint64_t offset, uint64_t size,
                           const std::string &what) {
  uint64_t pageSize = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t pageOffset = offset - offset % pageSize;
  uint64_t skip = offset - pageOffset;
  size_t mapLength = static_cast<size_t>(skip + size);
  void *mapped = mmap(nullptr, mapLength, PROT_READ | PROT_WRITE, MAP_PRIVATE,
                      fd, static_cast<off_t>(pageOffset));
  if (mapped == MAP_FAILED)
    return ioError(what, ": cannot map ", size, " bytes at offset ", offset,
                   ": ", std::strerror(errno));
  address = mapped;
  length = mapLength;
  start = static_cast<uint8_t *>(mapped) + skip;
  return Status();
}

} // namespace kiln::runtime

kiln::runtime::Status kiln::runtime::writeAll(int fd, ByteSpan bytes,
                                              const std::string &what) {
  const uint8_t *data = bytes.data;
  size_t left = bytes.size;
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return ioError(what, ": cannot write: ", std::strerror(errno));
    data += written;
    left -= static_cast<size_t>(written);
  }
  return Status();
}
