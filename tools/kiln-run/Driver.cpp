//===- Driver.cpp - what kiln-run's parts share ---------------------------===//

#include "Driver.h"

#include "Parameters.h"

#include <cstdio>

namespace kiln::run {

using kiln::runtime::Status;

namespace {
bool progressLineOpen = false;
kiln_distributed_info_t rankInfo = {0, 1, 0, 1, "none"};
} // namespace

const kiln_distributed_info_t &distributedInfo() { return rankInfo; }

void setDistributedInfo(const kiln_distributed_info_t &info) {
  rankInfo = info;
}

void setProgressLineOpen(bool open) { progressLineOpen = open; }

bool isProgressLineOpen() { return progressLineOpen; }

namespace {
void printDiagnostic(const char *kind, const std::string &message) {
  if (progressLineOpen) {
    std::fputs("\n", stdout);
    std::fflush(stdout);
    progressLineOpen = false;
  }
  if (rankInfo.world_size > 1)
    std::fprintf(stderr, "kiln-run: %s: rank %d: %s\n", kind, rankInfo.rank,
                 message.c_str());
  else
    std::fprintf(stderr, "kiln-run: %s: %s\n", kind, message.c_str());
  std::fflush(stderr);
}
} // namespace

void printError(const std::string &message) {
  printDiagnostic("error", message);
}

void printWarning(const std::string &message) {
  printDiagnostic("warning", message);
}

void printNote(const std::string &message) { printDiagnostic("note", message); }

bool failed(kiln_status_t status, const std::string &context) {
  std::string message = kiln_status_message();
  if (message.empty())
    message = kiln_status_name(status);
  printError(context.empty() ? message : context + ": " + message);
  return false;
}

std::string describeTensor(const kiln_tensor_info_t &tensor) {
  std::string text = std::string(tensor.name) + ": " +
                     kiln_element_type_name(tensor.element_type) + "[";
  for (int32_t d = 0; d < tensor.rank; ++d)
    text += (d > 0 ? "," : "") + std::to_string(tensor.shape[d]);
  return text + "]";
}

bool selectEntryPoint(const Options &options, const kiln_bundle_t *bundle,
                      size_t &index, kiln_entry_point_info_t &entry,
                      const std::string &fallback) {
  std::string name = options.entry.empty() ? fallback : options.entry;
  if (!name.empty()) {
    if (kiln_status_t status =
            kiln_bundle_find_entry_point(bundle, name.c_str(), &index))
      return failed(status);
  } else {
    kiln_bundle_info_t info;
    if (kiln_status_t status = kiln_bundle_get_info(bundle, &info))
      return failed(status);
    if (info.entry_point_count != 1) {
      std::string names;
      for (size_t i = 0; i < info.entry_point_count; ++i) {
        kiln_entry_point_info_t other;
        if (kiln_status_t status =
                kiln_bundle_get_entry_point(bundle, i, &other))
          return failed(status);
        names += (i > 0 ? ", " : "") + std::string(other.name);
      }
      printError(options.bundlePath + " has " +
                 std::to_string(info.entry_point_count) + " entry points (" +
                 names + "); choose one with --entry");
      return false;
    }
    index = 0;
  }
  if (kiln_status_t status = kiln_bundle_get_entry_point(bundle, index, &entry))
    return failed(status);
  return true;
}

bool allocateOutputs(const kiln_bundle_t *bundle, size_t index,
                     const kiln_entry_point_info_t &entry,
                     std::vector<NamedArray> &arrays) {
  arrays.resize(entry.output_count);
  for (size_t i = 0; i < entry.output_count; ++i) {
    kiln_tensor_info_t output;
    if (kiln_status_t status =
            kiln_bundle_get_entry_point_output(bundle, index, i, &output))
      return failed(status);
    NamedArray &array = arrays[i];
    array.name = output.name;
    array.array.elementType = output.element_type;
    array.array.shape.assign(output.shape, output.shape + output.rank);
    Status status = kiln::runtime::allocateNpyArray(array.array);
    if (!status.ok()) {
      printError("output '" + array.name + "': " + status.message());
      return false;
    }
  }
  return true;
}

std::vector<kiln_tensor_t> tensorsOf(std::vector<NamedArray> &arrays) {
  std::vector<kiln_tensor_t> tensors;
  for (NamedArray &array : arrays) {
    kiln_tensor_t tensor;
    tensor.name = array.name.c_str();
    tensor.element_type = array.array.elementType;
    tensor.rank = static_cast<int32_t>(array.array.shape.size());
    tensor.shape = array.array.shape.data();
    tensor.data = array.array.data.data();
    tensor.byte_size = array.array.data.size();
    tensors.push_back(tensor);
  }
  return tensors;
}

namespace {

/// Every target of `bundle`.
bool listTargets(const kiln_bundle_t *bundle,
                 std::vector<kiln_target_info_t> &targets) {
  kiln_bundle_info_t info;
  if (kiln_status_t status = kiln_bundle_get_info(bundle, &info))
    return failed(status);
  targets.resize(info.target_count);
  for (size_t i = 0; i < info.target_count; ++i)
    if (kiln_status_t status = kiln_bundle_get_target(bundle, i, &targets[i]))
      return failed(status);
  return true;
}

/// The first CUDA target (one with code images) and the first CPU target of
/// `bundle`; "" where there is none.
bool findTargets(const kiln_bundle_t *bundle, std::string &cuda,
                 std::string &cpu) {
  std::vector<kiln_target_info_t> targets;
  if (!listTargets(bundle, targets))
    return false;
  for (const kiln_target_info_t &target : targets) {
    std::string &slot = *target.images ? cuda : cpu;
    if (slot.empty())
      slot = target.name;
  }
  return true;
}

/// --target auto: the CUDA target if a session on it can be created; when
/// that fails only because this machine cannot run CUDA (no driver, device
/// or backend library) and there is a CPU target, the CPU.
bool createAutoSession(const kiln_bundle_t *bundle, kiln_session_t **rawSession,
                       std::string &chosen) {
  std::string cuda, cpu;
  if (!findTargets(bundle, cuda, cpu))
    return false;
  chosen = cuda;
  if (!cuda.empty()) {
    kiln_status_t status =
        kiln_session_create(bundle, cuda.c_str(), rawSession);
    if (status == KILN_OK)
      return true;
    if (status != KILN_STATUS_UNSUPPORTED || cpu.empty())
      return failed(status);
    std::fprintf(stderr, "kiln-run: note: running on target '%s': %s\n",
                 cpu.c_str(), kiln_status_message());
  }
  chosen = cpu.empty() ? "cpu" : cpu;
  if (kiln_status_t status = kiln_session_create(
          bundle, cpu.empty() ? nullptr : cpu.c_str(), rawSession))
    return failed(status);
  return true;
}

} // namespace

bool isCudaTarget(const kiln_bundle_t *bundle, const std::string &name,
                  bool &cuda) {
  cuda = false;
  std::vector<kiln_target_info_t> targets;
  if (!listTargets(bundle, targets))
    return false;
  for (const kiln_target_info_t &target : targets)
    if (name == target.name)
      cuda = *target.images != '\0';
  return true;
}

bool openSession(const Options &options, const kiln_bundle_t *bundle,
                 Session &session, std::string *target) {
  kiln_session_t *rawSession = nullptr;
  std::string chosen = options.target;
  if (options.target == "auto") {
    if (!createAutoSession(bundle, &rawSession, chosen))
      return false;
  } else if (kiln_status_t status = kiln_session_create(
                 bundle, options.target.c_str(), &rawSession)) {
    return failed(status);
  }
  session.reset(rawSession);
  if (target)
    *target = chosen;
  if (options.printMemory) {
    uint64_t arenaBytes = 0;
    if (kiln_status_t status =
            kiln_session_get_arena_bytes(session.get(), &arenaBytes))
      return failed(status);
    std::printf("session arena: %llu bytes allocated\n",
                static_cast<unsigned long long>(arenaBytes));
    std::fflush(stdout);
  }
  return loadParameters(options, bundle, session.get());
}

} // namespace kiln::run
