//===- Profile.cpp - device time of each command of an entry point --------===//

#include "Profile.h"

#include "CudaErrors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::runtime::cuda {

Status CommandProfile::create(std::string entryName,
                              std::vector<Command> commands,
                              std::unique_ptr<CommandProfile> &out) {
  std::unique_ptr<CommandProfile> profile(new CommandProfile());
  profile->entryName = std::move(entryName);
  profile->commands = std::move(commands);
  size_t count = profile->commands.size();
  for (const Command &command : profile->commands)
    profile->timed.push_back(command.kind != "collectives");
  profile->totalMs.assign(count, 0.0);
  for (size_t i = 0; i < 2 * count + 2; ++i) {
    CUevent event = nullptr;
    KILN_RETURN_IF_ERROR(
        checkCu(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate")
            .withContext("creating the profile's events"));
    profile->events.push_back(event);
  }
  out = std::move(profile);
  return Status();
}

CommandProfile::~CommandProfile() {
  for (CUevent event : events)
    cuEventDestroy(event);
}

Status CommandProfile::beginRun(CUstream stream) {
  return checkCu(cuEventRecord(events[2 * commands.size()], stream),
                 "cuEventRecord");
}

Status CommandProfile::endRun(CUstream stream) {
  return checkCu(cuEventRecord(events[2 * commands.size() + 1], stream),
                 "cuEventRecord");
}

Status CommandProfile::begin(size_t index, CUstream stream) {
  if (!timed[index])
    return Status();
  return checkCu(cuEventRecord(events[2 * index], stream), "cuEventRecord");
}

Status CommandProfile::end(size_t index, CUstream stream) {
  if (!timed[index])
    return Status();
  return checkCu(cuEventRecord(events[2 * index + 1], stream), "cuEventRecord");
}

Status CommandProfile::accumulate() {
  float ms = 0;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (!timed[i])
      continue;
    KILN_RETURN_IF_ERROR(
        checkCu(cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]),
                "cuEventElapsedTime")
            .withContext(strCat("profiling ", commands[i].description)));
    totalMs[i] += ms;
  }
  size_t run = 2 * commands.size();
  KILN_RETURN_IF_ERROR(
      checkCu(cuEventElapsedTime(&ms, events[run], events[run + 1]),
              "cuEventElapsedTime")
          .withContext("profiling the run"));
  runMs += ms;
  ++runs;
  return Status();
}

std::string CommandProfile::report() const {
  return profileReport(entryName, commands, totalMs, runMs, runs);
}

Status writeProfile(const std::string &path, const std::string &header,
                    const std::vector<const CommandProfile *> &profiles) {
  std::vector<std::string> reports;
  for (const CommandProfile *profile : profiles)
    reports.push_back(profile->report());
  std::string text = profileText(header, reports);
  std::FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return ioError("KILN_CUDA_PROFILE: cannot write '", path,
                   "': ", std::strerror(errno));
  bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written)
    return ioError("KILN_CUDA_PROFILE: writing '", path,
                   "' failed: ", std::strerror(errno));
  return Status();
}

} // namespace kiln::runtime::cuda
