//===- Checkpoint.cpp - kiln-run's training checkpoints -------------------===//

#include "Checkpoint.h"

#include "Driver.h"
#include "Json.h"
#include "Parameters.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace kiln::run {

namespace {

constexpr const char *kFormat = "kiln-run checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr const char *kLatest = "latest";
constexpr const char *kLockFile = "kiln-run.lock";

std::string stepName(int64_t step) { return "step-" + std::to_string(step); }

/// The end of the run of decimal digits in `text` starting at `begin`.
size_t skipDigits(const std::string &text, size_t begin) {
  while (begin < text.size() && text[begin] >= '0' && text[begin] <= '9')
    ++begin;
  return begin;
}

/// Whether `name` is "step-N.json" or "step-N.safetensors"; sets `step`.
bool isStepFile(const std::string &name, int64_t &step, bool &sidecar) {
  if (name.rfind("step-", 0) != 0)
    return false;
  size_t digits = skipDigits(name, 5);
  std::string suffix = name.substr(digits);
  if (digits == 5 || digits - 5 > 18 ||
      (suffix != ".json" && suffix != ".safetensors"))
    return false;
  step = std::strtoll(name.c_str() + 5, nullptr, 10);
  sidecar = suffix == ".json";
  return true;
}

/// Whether `name` is one of the files a checkpoint directory holds:
/// "latest", "step-N.json" or "step-N.safetensors".
bool isCheckpointFile(const std::string &name) {
  int64_t step = 0;
  bool sidecar = false;
  return name == kLatest || isStepFile(name, step, sidecar);
}

/// Whether `name` is a temporary file writeFileAtomically makes for a
/// checkpoint file: "NAME.tmp.PID.COUNT".
bool isCheckpointTemporary(const std::string &name) {
  size_t mark = name.find(".tmp.");
  if (mark == std::string::npos || !isCheckpointFile(name.substr(0, mark)))
    return false;
  size_t pid = mark + 5, dot = skipDigits(name, pid);
  if (dot == pid || dot >= name.size() || name[dot] != '.')
    return false;
  size_t count = dot + 1, end = skipDigits(name, count);
  return end > count && end == name.size();
}

/// The names of the entries of `dir`.
bool listDirectory(const std::string &dir, std::vector<std::string> &names) {
  DIR *stream = ::opendir(dir.c_str());
  if (!stream) {
    printError("--checkpoint-dir " + dir +
               ": cannot list: " + std::strerror(errno));
    return false;
  }
  while (dirent *entry = ::readdir(stream))
    names.push_back(entry->d_name);
  ::closedir(stream);
  std::sort(names.begin(), names.end());
  return true;
}

bool removeFile(const std::string &path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT)
    return true;
  printError(path + ": cannot remove: " + std::strerror(errno));
  return false;
}

/// Creates `dir` and any missing parents.
bool makeDirectories(const std::string &dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0777) != 0 &&
        errno != EEXIST) {
      printError("--checkpoint-dir " + dir + ": cannot create " + prefix +
                 ": " + std::strerror(errno));
      return false;
    }
    if (slash == std::string::npos)
      break;
  }
  struct stat status;
  if (::stat(dir.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
    printError("--checkpoint-dir " + dir + " is not a directory");
    return false;
  }
  return true;
}

std::string encodeSidecar(const CheckpointInfo &info) {
  auto boolean = [](bool value) { return value ? "true" : "false"; };
  std::string text = "{\n";
  text += "  \"format\": " + jsonQuote(kFormat) + ",\n";
  text += "  \"format_version\": " + std::to_string(kFormatVersion) + ",\n";
  text += "  \"kiln_run_version\": " + jsonQuote(info.kilnRunVersion) + ",\n";
  text += "  \"step\": " + std::to_string(info.step) + ",\n";
  text += "  \"bundle\": " + jsonQuote(info.bundlePath) + ",\n";
  text +=
      "  \"bundle_fingerprint\": " + jsonQuote(hex64(info.bundleFingerprint)) +
      ",\n";
  text += "  \"parameters\": " + jsonQuote(info.parametersFile) + ",\n";
  text +=
      "  \"parameters_bytes\": " + std::to_string(info.parametersBytes) + ",\n";
  text += "  \"parameters_fnv1a\": " + jsonQuote(hex64(info.parametersHash)) +
          ",\n";
  text += "  \"data\": {\n";
  text += "    \"path\": " + jsonQuote(info.dataPath) + ",\n";
  text += "    \"samples\": " + std::to_string(info.samples) + ",\n";
  text += "    \"batch_size\": " + std::to_string(info.batchSize) + ",\n";
  text += "    \"grad_accum\": " + std::to_string(info.gradAccum) + ",\n";
  text += "    \"seed\": " + std::to_string(info.seed) + ",\n";
  text += std::string("    \"shuffle\": ") + boolean(info.shuffle) + ",\n";
  text += std::string("    \"drop_last\": ") + boolean(info.dropLast) + ",\n";
  text += "    \"world_size\": " + std::to_string(info.worldSize) + ",\n";
  text += "    \"epoch\": " + std::to_string(info.cursor.epoch) + ",\n";
  text += "    \"position\": " + std::to_string(info.cursor.position) + "\n";
  text += "  }\n}\n";
  return text;
}

/// Reads the members of a sidecar; `problem` says what is missing or wrong.
class SidecarReader {
public:
  explicit SidecarReader(std::string &problem) : problem(problem) {}

  bool integer(const JsonValue &object, const char *key, int64_t &out,
               int64_t minimum = 0) {
    const JsonValue *value = object.find(key);
    if (!value || !value->asInteger(out) || out < minimum)
      return complain(std::string("no valid integer '") + key + "'");
    return true;
  }

  bool string(const JsonValue &object, const char *key, std::string &out) {
    const JsonValue *value = object.find(key);
    if (!value || value->kind != JsonValue::Kind::String)
      return complain(std::string("no string '") + key + "'");
    out = value->text;
    return true;
  }

  bool boolean(const JsonValue &object, const char *key, bool &out) {
    const JsonValue *value = object.find(key);
    if (!value || value->kind != JsonValue::Kind::Bool)
      return complain(std::string("no boolean '") + key + "'");
    out = value->boolean;
    return true;
  }

  bool hex(const JsonValue &object, const char *key, uint64_t &out) {
    std::string text;
    if (!string(object, key, text))
      return false;
    char *end = nullptr;
    errno = 0;
    out = std::strtoull(text.c_str(), &end, 16);
    if (text.size() != 18 || text.rfind("0x", 0) != 0 || *end != '\0' ||
        errno != 0)
      return complain(std::string("'") + key + "' is not a 64-bit hex value");
    return true;
  }

  bool complain(const std::string &what) {
    if (problem.empty())
      problem = what;
    return false;
  }

private:
  std::string &problem;
};

bool decodeSidecar(const JsonValue &root, CheckpointInfo &info,
                   std::string &problem) {
  SidecarReader read(problem);
  std::string format;
  int64_t version = 0;
  if (root.kind != JsonValue::Kind::Object)
    return read.complain("not a JSON object");
  if (!read.string(root, "format", format) ||
      !read.integer(root, "format_version", version))
    return false;
  if (format != kFormat || version != kFormatVersion)
    return read.complain("format '" + format + "' version " +
                         std::to_string(version) + ", expected '" + kFormat +
                         "' version " + std::to_string(kFormatVersion));
  int64_t bytes = 0;
  const JsonValue *data = root.find("data");
  if (!read.string(root, "kiln_run_version", info.kilnRunVersion) ||
      !read.integer(root, "step", info.step) ||
      !read.string(root, "bundle", info.bundlePath) ||
      !read.hex(root, "bundle_fingerprint", info.bundleFingerprint) ||
      !read.string(root, "parameters", info.parametersFile) ||
      !read.integer(root, "parameters_bytes", bytes) ||
      !read.hex(root, "parameters_fnv1a", info.parametersHash))
    return false;
  info.parametersBytes = static_cast<uint64_t>(bytes);
  if (!data || data->kind != JsonValue::Kind::Object)
    return read.complain("no object 'data'");
  if (!read.string(*data, "path", info.dataPath) ||
      !read.integer(*data, "samples", info.samples, 1) ||
      !read.integer(*data, "batch_size", info.batchSize, 1) ||
      !read.integer(*data, "grad_accum", info.gradAccum, 1) ||
      !read.integer(*data, "seed", info.seed) ||
      !read.boolean(*data, "shuffle", info.shuffle) ||
      !read.boolean(*data, "drop_last", info.dropLast) ||
      !read.integer(*data, "epoch", info.cursor.epoch) ||
      !read.integer(*data, "position", info.cursor.position))
    return false;
  if (data->find("world_size") &&
      !read.integer(*data, "world_size", info.worldSize, 1))
    return false;
  if (info.cursor.position >= info.samples)
    return read.complain(
        "data position " + std::to_string(info.cursor.position) +
        " is not below its " + std::to_string(info.samples) + " samples");
  if (info.parametersFile != stepName(info.step) + ".safetensors")
    return read.complain("parameters '" + info.parametersFile +
                         "' is not the step's file");
  return true;
}

/// The sidecar name `latest` holds, checked to be a sidecar's name.
bool readLatest(const std::string &dir, std::string &sidecar) {
  std::string path = dir + "/" + kLatest;
  struct stat status;
  if (::stat(path.c_str(), &status) != 0) {
    printError("--resume: " + dir + " holds no checkpoint to resume (no " +
               path + ")");
    return false;
  }
  if (!readWholeFile(path, sidecar))
    return false;
  if (!sidecar.empty() && sidecar.back() == '\n')
    sidecar.pop_back();
  if (!isCheckpointFile(sidecar) || sidecar.size() < 5 ||
      sidecar.compare(sidecar.size() - 5, 5, ".json") != 0) {
    printError("checkpoint " + path +
               " is corrupt: it does not name a step-N.json sidecar");
    return false;
  }
  return true;
}

} // namespace

uint64_t fnv1a64(const std::string &bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string hex64(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

CheckpointLock::~CheckpointLock() {
  if (fd >= 0)
    ::close(fd);
}

bool CheckpointLock::acquire(const std::string &dir) {
  if (!makeDirectories(dir))
    return false;
  std::string path = dir + "/" + kLockFile;
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    printError("--checkpoint-dir " + dir + ": cannot create " + path + ": " +
               std::strerror(errno));
    return false;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    // A file system without locks (some FUSE, NFS or Lustre mounts): the
    // run goes on as before there was a lock, saying so.
    if (error == ENOLCK || error == ENOSYS || error == EOPNOTSUPP) {
      printWarning("--checkpoint-dir " + dir + ": cannot lock " + path + " (" +
                   std::strerror(error) +
                   "); another run given this directory would not be "
                   "refused");
      return true;
    }
    std::string owner;
    readWholeFile(path, owner);
    while (!owner.empty() && owner.back() == '\n')
      owner.pop_back();
    if (error == EWOULDBLOCK)
      printError(
          "--checkpoint-dir " + dir + " is in use by another run (" +
          (owner.empty() ? std::string("its lock file ") + path : owner) +
          "); wait for it to end, or choose another directory");
    else
      printError("--checkpoint-dir " + dir + ": cannot lock " + path + ": " +
                 std::strerror(error));
    return false;
  }
  char host[256] = "unknown host";
  ::gethostname(host, sizeof(host) - 1);
  std::string owner =
      "kiln-run process " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, owner.data(), owner.size(), 0) !=
                                     static_cast<ssize_t>(owner.size())) {
    printError("--checkpoint-dir " + dir + ": cannot write " + path + ": " +
               std::strerror(errno));
    return false;
  }
  return true;
}

bool removeStaleTemporaries(const std::string &dir) {
  std::vector<std::string> names;
  if (!listDirectory(dir, names))
    return false;
  size_t removed = 0;
  for (const std::string &name : names) {
    if (!isCheckpointTemporary(name))
      continue;
    if (!removeFile(dir + "/" + name))
      return false;
    ++removed;
  }
  if (removed > 0)
    printNote("removed " + std::to_string(removed) + " temporary file" +
              (removed == 1 ? "" : "s") + " that an interrupted run left in " +
              dir);
  return true;
}

bool checkNoCheckpoints(const std::string &dir) {
  std::vector<std::string> names;
  if (!listDirectory(dir, names))
    return false;
  for (const std::string &name : names) {
    if (!isCheckpointFile(name))
      continue;
    printError("--checkpoint-dir " + dir + " already holds checkpoints (" +
               dir + "/" + name +
               "); continue them with --resume, or choose another directory");
    return false;
  }
  return true;
}

bool rotateCheckpoints(const std::string &dir, int64_t step, int64_t keep) {
  std::vector<std::string> names;
  if (!listDirectory(dir, names))
    return false;
  std::vector<int64_t> steps;
  for (const std::string &name : names) {
    int64_t found = 0;
    bool sidecar = false;
    if (isStepFile(name, found, sidecar) && found <= step)
      steps.push_back(found);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  if (static_cast<int64_t>(steps.size()) <= keep)
    return true;
  steps.resize(steps.size() - static_cast<size_t>(keep));
  for (int64_t old : steps)
    if (!removeFile(dir + "/" + stepName(old) + ".json") ||
        !removeFile(dir + "/" + stepName(old) + ".safetensors"))
      return false;
  return true;
}

bool writeCheckpoint(const std::string &dir, CheckpointInfo &info,
                     const std::string &parameters) {
  info.parametersFile = stepName(info.step) + ".safetensors";
  info.parametersBytes = parameters.size();
  info.parametersHash = fnv1a64(parameters);
  std::string sidecar = stepName(info.step) + ".json";
  return writeFileAtomically(dir + "/" + info.parametersFile, parameters) &&
         writeFileAtomically(dir + "/" + sidecar, encodeSidecar(info)) &&
         writeFileAtomically(dir + "/" + kLatest, sidecar + "\n");
}

bool readLatestCheckpoint(const std::string &dir, CheckpointInfo &info,
                          std::string &sidecarPath, std::string &parameters) {
  std::string sidecar, text;
  if (!readLatest(dir, sidecar))
    return false;
  sidecarPath = dir + "/" + sidecar;
  if (!readWholeFile(sidecarPath, text))
    return false;
  JsonValue root;
  std::string problem;
  bool valid =
      parseJson(text, root, problem) && decodeSidecar(root, info, problem);
  if (valid && sidecar != stepName(info.step) + ".json") {
    problem = "its step " + std::to_string(info.step) +
              " is not the one its name says";
    valid = false;
  }
  if (!valid) {
    // The Python trainer's checkpoints count the batches of its iterable,
    // not a position in a --data file (python/README.md).
    const JsonValue *format =
        root.kind == JsonValue::Kind::Object ? root.find("format") : nullptr;
    if (format && format->kind == JsonValue::Kind::String &&
        format->text == "kiln python checkpoint") {
      printError("checkpoint " + sidecarPath +
                 " was written by the Python trainer, whose data cursor counts "
                 "the batches of its iterable: resume it with "
                 "kiln.Trainer.train(..., resume=True)");
      return false;
    }
    printError("checkpoint " + sidecarPath +
               " is corrupt or truncated: " + problem);
    return false;
  }
  std::string parametersPath = dir + "/" + info.parametersFile;
  if (!readWholeFile(parametersPath, parameters))
    return false;
  if (parameters.size() != info.parametersBytes ||
      fnv1a64(parameters) != info.parametersHash) {
    printError("checkpoint " + parametersPath + " does not match its sidecar " +
               sidecarPath + " (" + std::to_string(parameters.size()) +
               " bytes, FNV-1a " + hex64(fnv1a64(parameters)) +
               "; the sidecar records " + std::to_string(info.parametersBytes) +
               " bytes, " + hex64(info.parametersHash) + ")");
    return false;
  }
  return true;
}

} // namespace kiln::run
