//===- RankFailure.cpp - naming the rank whose death ended the job --------===//

#include "RankFailure.h"

#include "Driver.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <unistd.h>

namespace kiln::run {

namespace {

/// What a rank tells the others about itself.
struct RankRecord {
  int64_t pid;
  char host[64];
};

/// Filled before the handler is installed and never changed or freed
/// after (not even at exit, when a late signal may still come), so the
/// handler reads it without a lock.
RankRecord *records = nullptr;
size_t recordCount = 0;
int myRank = 0;

/// Appends `text` to `buffer` (of `size` bytes, NUL-terminated) without
/// the library calls a signal handler may not make.
void append(char *buffer, size_t size, const char *text) {
  size_t used = std::strlen(buffer);
  while (*text && used + 1 < size)
    buffer[used++] = *text++;
  buffer[used] = '\0';
}

void appendNumber(char *buffer, size_t size, int64_t value) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && count < 23);
  char text[24];
  for (int i = 0; i < count; ++i)
    text[i] = digits[count - 1 - i];
  text[count] = '\0';
  append(buffer, size, text);
}

/// Whether process `pid` of this host has ended: gone, or a zombie its
/// parent has not reaped yet.
bool hasEnded(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0)
    return errno == ESRCH;
  char path[64] = "/proc/";
  appendNumber(path, sizeof(path), pid);
  append(path, sizeof(path), "/stat");
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char stat[256];
  ssize_t length = ::read(fd, stat, sizeof(stat) - 1);
  ::close(fd);
  if (length <= 0)
    return false;
  stat[length] = '\0';
  // "pid (comm) S ...": the state follows the last ')'.
  const char *close = std::strrchr(stat, ')');
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

void onTerminate(int signal) {
  char message[1024] = "kiln-run: error: rank ";
  appendNumber(message, sizeof(message), myRank);
  append(message, sizeof(message), ": the launcher ended this rank (SIGTERM)");
  const char *host = records[static_cast<size_t>(myRank)].host;
  bool named = false;
  for (size_t r = 0; r < recordCount; ++r) {
    if (static_cast<int>(r) == myRank ||
        std::strncmp(records[r].host, host, sizeof(records[r].host)) != 0 ||
        !hasEnded(records[r].pid))
      continue;
    append(message, sizeof(message), named ? ", " : ": rank ");
    appendNumber(message, sizeof(message), static_cast<int64_t>(r));
    append(message, sizeof(message), " (process ");
    appendNumber(message, sizeof(message), records[r].pid);
    append(message, sizeof(message), " on ");
    append(message, sizeof(message), records[r].host);
    append(message, sizeof(message), ")");
    named = true;
  }
  append(message, sizeof(message),
         named ? " ended first; its output above, or the launcher's, may say "
                 "why\n"
               : "; another rank failed or ended (its message may be above), "
                 "or the job was cancelled\n");
  ssize_t ignored = ::write(STDERR_FILENO, message, std::strlen(message));
  (void)ignored;
  // End as the signal would have: the launcher reads the status.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

} // namespace

bool watchForFailedRanks() {
  const kiln_distributed_info_t &ranks = distributedInfo();
  if (ranks.world_size <= 1)
    return true;
  RankRecord mine{static_cast<int64_t>(::getpid()), {}};
  if (::gethostname(mine.host, sizeof(mine.host) - 1) != 0)
    std::strncpy(mine.host, "unknown", sizeof(mine.host) - 1);
  std::unique_ptr<RankRecord[]> gathered(
      new RankRecord[static_cast<size_t>(ranks.world_size)]);
  if (kiln_status_t status =
          kiln_distributed_all_gather(&mine, gathered.get(), sizeof(mine)))
    return failed(status);
  recordCount = static_cast<size_t>(ranks.world_size);
  records = gathered.release();
  myRank = ranks.rank;
  struct sigaction action = {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  return true;
}

void stopWatchingForFailedRanks() {
  if (records)
    ::signal(SIGTERM, SIG_DFL);
}

} // namespace kiln::run
