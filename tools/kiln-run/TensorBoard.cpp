//===- TensorBoard.cpp - TensorBoard event files of kiln-run --------------===//

#include "TensorBoard.h"

#include "Driver.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::run {

namespace {

/// The reflected table of CRC-32C's polynomial 0x1EDC6F41.
struct Crc32cTable {
  uint32_t entries[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78u : 0);
      entries[i] = crc;
    }
  }
};

/// TFRecord's masking of a CRC, so that a CRC of CRCs is not trivial.
uint32_t masked(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

void appendLittleEndian(std::string &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

/// A length-delimited field (wire type 2).
void appendBytesField(std::string &out, int field, const std::string &bytes) {
  appendVarint(out, static_cast<uint64_t>(field) << 3 | 2);
  appendVarint(out, bytes.size());
  out += bytes;
}

void appendDoubleField(std::string &out, int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  appendVarint(out, static_cast<uint64_t>(field) << 3 | 1);
  appendLittleEndian(out, bits, 8);
}

void appendFloatField(std::string &out, int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  appendVarint(out, static_cast<uint64_t>(field) << 3 | 5);
  appendLittleEndian(out, bits, 4);
}

double wallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

uint32_t crc32c(const void *data, size_t size) {
  static const Crc32cTable table;
  const auto *bytes = static_cast<const uint8_t *>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    crc = table.entries[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string tfRecord(const std::string &payload) {
  std::string record;
  appendLittleEndian(record, payload.size(), 8);
  appendLittleEndian(record, masked(crc32c(record.data(), 8)), 4);
  record += payload;
  appendLittleEndian(record, masked(crc32c(payload.data(), payload.size())), 4);
  return record;
}

std::string
scalarEvent(double wallTime, int64_t step,
            const std::vector<std::pair<std::string, float>> &values) {
  // Summary.Value { tag = 1; simple_value = 2 }, Summary { value = 1 },
  // Event { wall_time = 1; step = 2; summary = 5 }.
  std::string summary;
  for (const auto &[tag, value] : values) {
    std::string entry;
    appendBytesField(entry, 1, tag);
    appendFloatField(entry, 2, value);
    appendBytesField(summary, 1, entry);
  }
  std::string event;
  appendDoubleField(event, 1, wallTime);
  appendVarint(event, 2 << 3 | 0);
  appendVarint(event, static_cast<uint64_t>(step));
  appendBytesField(event, 5, summary);
  return event;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd >= 0)
    ::close(fd);
}

bool TensorBoardWriter::open(const std::string &dir) {
  if (dir.empty())
    return true;
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    printError("--tensorboard " + dir +
               ": cannot create: " + std::strerror(errno));
    return false;
  }
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  double now = wallTime();
  path = dir + "/events.out.tfevents." +
         std::to_string(static_cast<long long>(now)) + "." + host + "." +
         std::to_string(::getpid()) + ".kiln";
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    printError("--tensorboard " + path +
               ": cannot create: " + std::strerror(errno));
    return false;
  }
  // Event { wall_time = 1; file_version = 3 }.
  std::string first;
  appendDoubleField(first, 1, now);
  appendBytesField(first, 3, "brain.Event:2");
  return write(tfRecord(first));
}

bool TensorBoardWriter::append(
    int64_t step, const std::vector<std::pair<std::string, float>> &values) {
  if (fd < 0)
    return true;
  return write(tfRecord(scalarEvent(wallTime(), step, values)));
}

bool TensorBoardWriter::sync() {
  if (fd >= 0 && fsync(fd) != 0) {
    printError("--tensorboard " + path +
               ": cannot flush: " + std::strerror(errno));
    return false;
  }
  return true;
}

bool TensorBoardWriter::write(const std::string &record) {
  ssize_t written = ::write(fd, record.data(), record.size());
  if (written != static_cast<ssize_t>(record.size())) {
    printError("--tensorboard " + path +
               ": cannot write: " + std::strerror(errno));
    return false;
  }
  return true;
}

} // namespace kiln::run
