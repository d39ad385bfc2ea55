//===- kiln-run.cpp - the Kiln runtime driver -----------------------------===//
//
// Runs compiled Kiln bundles through the C API of libkilnrt: prints what a
// bundle holds (--info) or runs one entry point on arrays from an .npz file
// and writes its outputs to another. Every error is one line on stderr naming
// the file or array at fault, and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"
#include "kiln/runtime/Manifest.h"
#include "kiln/runtime/Npy.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using kiln::runtime::NamedArray;
using kiln::runtime::Status;

namespace {

void printUsage(std::FILE *out) {
  std::fputs(
      "usage: kiln-run MODEL.kiln --info\n"
      "       kiln-run MODEL.kiln [--entry NAME] --inputs IN.npz --outputs "
      "OUT.npz\n"
      "\n"
      "Runs a compiled Kiln bundle (written by kilnc) with libkilnrt.\n"
      "\n"
      "options:\n"
      "  --info            print the bundle's entry points with their input "
      "and output\n"
      "                    names, types and shapes, its targets with their "
      "kernel counts,\n"
      "                    the arena size of each entry point, and the "
      "parameter count\n"
      "                    and bytes\n"
      "  --entry NAME      the entry point to run (e.g. forward); may be "
      "left out when\n"
      "                    the bundle has only one\n"
      "  --inputs FILE     an .npz archive (numpy.savez or "
      "numpy.savez_compressed) with\n"
      "                    one array per input of the entry point, keyed by "
      "the input's\n"
      "                    name; needed unless the entry point takes no "
      "inputs\n"
      "  --outputs FILE    the .npz archive to write, one array per output, "
      "keyed by the\n"
      "                    output's name\n"
      "  --params FILE     an .npz archive of parameter values, keyed by "
      "parameter name,\n"
      "                    that replace the bundle's initial values for "
      "this run\n"
      "  --save-params F   after the run (or training), write every "
      "parameter and optimizer\n"
      "                    state tensor to the safetensors file F\n"
      "  --compress        deflate-compress the --outputs archive (like "
      "numpy.savez_compressed)\n"
      "  --target NAME     the target to run on (default: cpu)\n"
      "  --repeat N        run the entry point N times (default 1) and print "
      "the mean and\n"
      "                    fastest time of one run; the outputs are those of "
      "the last run\n"
      "  -h, --help        print this message\n"
      "\n"
      "Arrays must match the entry point exactly: every input present once, "
      "no extra\n"
      "arrays, the declared element type and shape. Supported .npy dtypes: "
      "f4 f8 f2 i8\n"
      "i4 i1 b1, little-endian, C order.\n"
      "\n"
      "Training: kiln-run MODEL.kiln --data TRAIN.npz --steps N runs the "
      "entry point\n"
      "train_step (compiled with kilnc --optimizer) N times on batches of "
      "TRAIN.npz:\n"
      "one array per input, keyed by its name, the first axis the samples. "
      "Each epoch\n"
      "visits the samples in a seeded random order (--seed S, default 0; "
      "--no-shuffle:\n"
      "the stored order); a last incomplete batch is dropped; epochs wrap. "
      "Prints the\n"
      "loss every --log-every K steps (default 1). Checkpoints, --resume and "
      "--metrics\n"
      "are not supported yet.\n"
      "\n"
      "The compiled kernels use all cores; OMP_NUM_THREADS and "
      "OPENBLAS_NUM_THREADS\n"
      "limit them. Exit status: 0 on success, 1 on any error.\n",
      out);
}

/// What the command line asks for.
struct Options {
  std::string bundlePath;
  bool info = false;
  std::string entry;
  std::string inputs;
  std::string outputs;
  std::string params;
  std::string data;
  std::string saveParams;
  long steps = 0;
  long seed = 0;
  long logEvery = 1;
  bool noShuffle = false;
  bool compress = false;
  std::string target = "cpu";
  long repeat = 1;
  bool help = false;
};

void printError(const std::string &message) {
  std::fprintf(stderr, "kiln-run: error: %s\n", message.c_str());
}

/// Prints the C API's message for a failed call; returns false.
bool failed(kiln_status_t status, const std::string &context = "") {
  std::string message = kiln_status_message();
  if (message.empty())
    message = kiln_status_name(status);
  printError(context.empty() ? message : context + ": " + message);
  return false;
}

bool isTrainingFlag(const std::string &flag) {
  static const char *const kTrainingFlags[] = {"--checkpoint-dir",
                                               "--checkpoint-every", "--resume",
                                               "--metrics"};
  return std::any_of(std::begin(kTrainingFlags), std::end(kTrainingFlags),
                     [&](const char *name) { return flag == name; });
}

/// Splits "--flag=value" into flag and value.
void splitFlag(const std::string &argument, std::string &flag,
               std::string &value, bool &hasValue) {
  size_t equals = argument.find('=');
  hasValue = argument.rfind("--", 0) == 0 && equals != std::string::npos;
  flag = hasValue ? argument.substr(0, equals) : argument;
  value = hasValue ? argument.substr(equals + 1) : "";
}

bool parseCount(const std::string &flag, const std::string &text, long &count,
                bool allowZero = false) {
  char *end = nullptr;
  count = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || count < (allowZero ? 0 : 1)) {
    printError(flag + " takes a " + (allowZero ? "non-negative" : "positive") +
               " count, not '" + text + "'");
    return false;
  }
  return true;
}

/// The boolean option `flag` sets, or nullptr.
bool *switchFor(Options &options, const std::string &flag) {
  if (flag == "-h" || flag == "--help")
    return &options.help;
  if (flag == "--info")
    return &options.info;
  if (flag == "--compress")
    return &options.compress;
  if (flag == "--no-shuffle")
    return &options.noShuffle;
  return nullptr;
}

/// The string option `flag` sets, or nullptr.
std::string *stringFor(Options &options, const std::string &flag) {
  if (flag == "--entry")
    return &options.entry;
  if (flag == "--inputs")
    return &options.inputs;
  if (flag == "--outputs")
    return &options.outputs;
  if (flag == "--params")
    return &options.params;
  if (flag == "--data")
    return &options.data;
  if (flag == "--save-params")
    return &options.saveParams;
  if (flag == "--target")
    return &options.target;
  return nullptr;
}

/// Reads the value of option argv[i]: after '=' or as the next argument.
bool takeValue(int argc, char **argv, int &i, std::string &value) {
  std::string flag;
  bool hasValue = false;
  splitFlag(argv[i], flag, value, hasValue);
  if (hasValue)
    return true;
  if (i + 1 >= argc) {
    printError(flag + " needs a value");
    return false;
  }
  value = argv[++i];
  return true;
}

/// Applies one option (or the bundle path) starting at argv[i].
bool parseArgument(int argc, char **argv, int &i, Options &options) {
  std::string flag, value;
  bool hasValue = false;
  splitFlag(argv[i], flag, value, hasValue);
  if (isTrainingFlag(flag)) {
    printError("training (" + flag +
               ") is not supported yet; this release runs single entry "
               "points with --inputs and --outputs");
    return false;
  }
  if (bool *option = switchFor(options, flag)) {
    if (hasValue) {
      printError(flag + " takes no value");
      return false;
    }
    *option = true;
    return true;
  }
  if (std::string *option = stringFor(options, flag))
    return takeValue(argc, argv, i, *option);
  if (flag == "--repeat")
    return takeValue(argc, argv, i, value) &&
           parseCount(flag, value, options.repeat);
  if (flag == "--steps")
    return takeValue(argc, argv, i, value) &&
           parseCount(flag, value, options.steps);
  if (flag == "--log-every")
    return takeValue(argc, argv, i, value) &&
           parseCount(flag, value, options.logEvery);
  if (flag == "--seed")
    return takeValue(argc, argv, i, value) &&
           parseCount(flag, value, options.seed, /*allowZero=*/true);
  if (flag.size() > 1 && flag[0] == '-') {
    printError("unknown option '" + flag + "' (see kiln-run --help)");
    return false;
  }
  if (!options.bundlePath.empty()) {
    printError("more than one bundle given: '" + options.bundlePath +
               "' and '" + flag + "'");
    return false;
  }
  options.bundlePath = flag;
  return true;
}

bool parseArguments(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i)
    if (!parseArgument(argc, argv, i, options))
      return false;
  return true;
}

bool checkArguments(const Options &options) {
  if (options.bundlePath.empty()) {
    printError("no bundle given (usage: kiln-run MODEL.kiln ...; see "
               "kiln-run --help)");
    return false;
  }
  if (!options.data.empty() && options.steps == 0) {
    printError("--data needs --steps N");
    return false;
  }
  if (options.data.empty() && options.steps > 0) {
    printError("--steps needs --data TRAIN.npz");
    return false;
  }
  if (!options.info && options.outputs.empty() && options.data.empty()) {
    printError("nothing to do: give --info, --outputs OUT.npz (with "
               "--inputs IN.npz) to run an entry point, or --data TRAIN.npz "
               "--steps N to train");
    return false;
  }
  return true;
}

std::string describeTensor(const kiln_tensor_info_t &tensor) {
  std::string text = std::string(tensor.name) + ": " +
                     kiln_element_type_name(tensor.element_type) + "[";
  for (int32_t d = 0; d < tensor.rank; ++d)
    text += (d > 0 ? "," : "") + std::to_string(tensor.shape[d]);
  return text + "]";
}

/// "12345 bytes" or "12345 bytes (12.1 KiB)".
std::string describeBytes(uint64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  static const char *const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double scaled = static_cast<double>(bytes);
  int unit = -1;
  while (scaled >= 1024 && unit < 3) {
    scaled /= 1024;
    ++unit;
  }
  if (unit >= 0) {
    char human[32];
    std::snprintf(human, sizeof(human), " (%.1f %s)", scaled, kUnits[unit]);
    text += human;
  }
  return text;
}

/// "forward(x: f32[1,4]) -> (y: f32[1,2])".
bool describeSignature(const kiln_bundle_t *bundle, size_t index,
                       const kiln_entry_point_info_t &entry,
                       std::string &text) {
  text = std::string(entry.name) + "(";
  for (size_t i = 0; i < entry.input_count; ++i) {
    kiln_tensor_info_t input;
    if (kiln_status_t status =
            kiln_bundle_get_entry_point_input(bundle, index, i, &input))
      return failed(status);
    text += (i > 0 ? ", " : "") + describeTensor(input);
  }
  text += ") -> (";
  for (size_t i = 0; i < entry.output_count; ++i) {
    kiln_tensor_info_t output;
    if (kiln_status_t status =
            kiln_bundle_get_entry_point_output(bundle, index, i, &output))
      return failed(status);
    text += (i > 0 ? ", " : "") + describeTensor(output);
  }
  text += ")";
  return true;
}

bool printEntryPoints(const kiln_bundle_t *bundle,
                      const kiln_bundle_info_t &info) {
  std::printf("entry points:\n");
  for (size_t i = 0; i < info.entry_point_count; ++i) {
    kiln_entry_point_info_t entry;
    if (kiln_status_t status = kiln_bundle_get_entry_point(bundle, i, &entry))
      return failed(status);
    std::string signature;
    if (!describeSignature(bundle, i, entry, signature))
      return false;
    std::printf("  %s\n    arena %s, %zu commands\n", signature.c_str(),
                describeBytes(entry.arena_bytes).c_str(), entry.command_count);
  }
  return true;
}

bool printTargets(const kiln_bundle_t *bundle, const kiln_bundle_info_t &info) {
  std::printf("targets:\n");
  for (size_t i = 0; i < info.target_count; ++i) {
    kiln_target_info_t target;
    if (kiln_status_t status = kiln_bundle_get_target(bundle, i, &target))
      return failed(status);
    std::printf("  %s: triple %s, cpu %s, %zu kernels, code %s\n", target.name,
                *target.triple ? target.triple : "unspecified",
                *target.cpu ? target.cpu : "generic", target.kernel_count,
                describeBytes(target.code_bytes).c_str());
  }
  return true;
}

bool printInfo(const Options &options, const kiln_bundle_t *bundle) {
  kiln_bundle_info_t info;
  if (kiln_status_t status = kiln_bundle_get_info(bundle, &info))
    return failed(status);
  std::printf("bundle: %s\n", options.bundlePath.c_str());
  std::printf("producer: %s\n", *info.producer ? info.producer : "unknown");
  std::printf("model: %s\n", *info.model_name ? info.model_name : "unnamed");
  if (!printEntryPoints(bundle, info) || !printTargets(bundle, info))
    return false;
  std::printf("parameters: %zu, %s\n", info.parameter_count,
              describeBytes(info.parameter_bytes).c_str());
  return true;
}

/// The entry point --entry names, or the only one there is.
bool selectEntryPoint(const Options &options, const kiln_bundle_t *bundle,
                      size_t &index, kiln_entry_point_info_t &entry) {
  if (!options.entry.empty()) {
    if (kiln_status_t status =
            kiln_bundle_find_entry_point(bundle, options.entry.c_str(), &index))
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

bool readInputs(const Options &options, const kiln_entry_point_info_t &entry,
                std::vector<NamedArray> &arrays) {
  if (options.inputs.empty()) {
    if (entry.input_count == 0)
      return true;
    printError(std::string("entry point '") + entry.name + "' takes " +
               std::to_string(entry.input_count) +
               " inputs; give them with --inputs IN.npz");
    return false;
  }
  Status status = kiln::runtime::readNpz(options.inputs, arrays);
  if (!status.ok()) {
    printError(status.message());
    return false;
  }
  return true;
}

/// Allocates one array per output of the entry point, in its order.
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

/// Describes `arrays` as kiln_tensor_t; the result points into `arrays`.
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

/// Runs the entry point `repeat` times, printing timings when more than one.
bool runRepeatedly(const Options &options, kiln_session_t *session,
                   const char *entryName,
                   const std::vector<kiln_tensor_t> &inputs,
                   const std::vector<kiln_tensor_t> &outputs) {
  using Clock = std::chrono::steady_clock;
  double total = 0, fastest = 0;
  for (long i = 0; i < options.repeat; ++i) {
    Clock::time_point start = Clock::now();
    if (kiln_status_t status =
            kiln_session_run(session, entryName, inputs.data(), inputs.size(),
                             outputs.data(), outputs.size()))
      return failed(status, status == KILN_STATUS_INVALID_ARGUMENT &&
                                    !options.inputs.empty()
                                ? options.inputs
                                : "");
    double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    total += ms;
    fastest = i == 0 ? ms : std::min(fastest, ms);
  }
  if (options.repeat > 1)
    std::printf("%s: %ld runs, mean %.3f ms, fastest %.3f ms\n", entryName,
                options.repeat, total / static_cast<double>(options.repeat),
                fastest);
  return true;
}

bool loadParameters(const Options &options, const kiln_bundle_t *bundle,
                    kiln_session_t *session);

using Session = std::unique_ptr<kiln_session_t, void (*)(kiln_session_t *)>;

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
  case KILN_ELEMENT_TYPE_I8:
    return "I8";
  case KILN_ELEMENT_TYPE_BOOL:
    return "BOOL";
  default:
    return nullptr;
  }
}

/// Writes every parameter of the session to --save-params as safetensors (a
/// JSON header of names, dtypes, shapes and offsets, then the data), through
/// a temporary file and a rename.
bool saveParameters(const Options &options, const kiln_bundle_t *bundle,
                    kiln_session_t *session) {
  if (options.saveParams.empty())
    return true;
  kiln_bundle_info_t info;
  if (kiln_status_t error = kiln_bundle_get_info(bundle, &info))
    return failed(error);
  std::string header = "{", data;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t parameter;
    if (kiln_status_t error = kiln_bundle_get_parameter(bundle, i, &parameter))
      return failed(error);
    const kiln_tensor_info_t &tensor = parameter.tensor;
    std::string bytes(tensor.byte_size, '\0');
    if (kiln_status_t error = kiln_session_get_parameter(
            session, tensor.name, bytes.data(), bytes.size()))
      return failed(error);
    std::string shape;
    for (int32_t d = 0; d < tensor.rank; ++d)
      shape += (d ? "," : "") + std::to_string(tensor.shape[d]);
    header += std::string(i ? "," : "") + "\"" + tensor.name +
              "\":{\"dtype\":\"" + safetensorsDtype(tensor.element_type) +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," +
              std::to_string(data.size() + bytes.size()) + "]}";
    data += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string temporary = options.saveParams + ".tmp";
  std::FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file) {
    printError(options.saveParams + ": cannot write: " + std::strerror(errno));
    return false;
  }
  uint64_t length = header.size();
  unsigned char prefix[8];
  for (int b = 0; b < 8; ++b)
    prefix[b] = static_cast<unsigned char>(length >> (8 * b));
  bool ok = std::fwrite(prefix, 1, 8, file) == 8 &&
            std::fwrite(header.data(), 1, header.size(), file) == header.size() &&
            std::fwrite(data.data(), 1, data.size(), file) == data.size();
  ok = (std::fclose(file) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), options.saveParams.c_str()) != 0) {
    std::remove(temporary.c_str());
    printError(options.saveParams + ": cannot write: " + std::strerror(errno));
    return false;
  }
  return true;
}

/// A session on --target with the --params values loaded.
bool openSession(const Options &options, const kiln_bundle_t *bundle,
                 Session &session) {
  kiln_session_t *rawSession = nullptr;
  if (kiln_status_t status =
          kiln_session_create(bundle, options.target.c_str(), &rawSession))
    return failed(status);
  session.reset(rawSession);
  return loadParameters(options, bundle, session.get());
}

bool runEntryPoint(const Options &options, const kiln_bundle_t *bundle) {
  size_t index = 0;
  kiln_entry_point_info_t entry;
  std::vector<NamedArray> inputArrays, outputArrays;
  if (!selectEntryPoint(options, bundle, index, entry) ||
      !readInputs(options, entry, inputArrays) ||
      !allocateOutputs(bundle, index, entry, outputArrays))
    return false;

  Session session(nullptr, kiln_session_release);
  if (!openSession(options, bundle, session))
    return false;
  if (!runRepeatedly(options, session.get(), entry.name, tensorsOf(inputArrays),
                     tensorsOf(outputArrays)))
    return false;
  if (!saveParameters(options, bundle, session.get()))
    return false;
  Status status =
      kiln::runtime::writeNpz(options.outputs, outputArrays, options.compress);
  if (!status.ok()) {
    printError(status.message());
    return false;
  }
  return true;
}

/// Replaces parameter values with the arrays of --params, each checked
/// against the parameter's declared type and shape.
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
  kiln_bundle_info_t info;
  if (kiln_status_t error = kiln_bundle_get_info(bundle, &info))
    return failed(error);
  for (const NamedArray &array : arrays) {
    kiln_parameter_info_t parameter;
    bool found = false;
    for (size_t i = 0; i < info.parameter_count && !found; ++i) {
      if (kiln_status_t error = kiln_bundle_get_parameter(bundle, i, &parameter))
        return failed(error);
      found = array.name == parameter.tensor.name;
    }
    if (!found) {
      printError(options.params + ": the bundle has no parameter '" +
                 array.name + "'");
      return false;
    }
    const kiln_tensor_info_t &declared = parameter.tensor;
    bool sameShape =
        array.array.shape.size() == static_cast<size_t>(declared.rank) &&
        std::equal(array.array.shape.begin(), array.array.shape.end(),
                   declared.shape);
    if (array.array.elementType != declared.element_type || !sameShape) {
      printError(options.params + ": array '" + array.name + "' has type " +
                 kiln::runtime::describeTensorType(
                     array.array.elementType, array.array.shape.data(),
                     array.array.shape.size()) +
                 ", the parameter is " +
                 kiln::runtime::describeTensorType(declared.element_type,
                                                   declared.shape,
                                                   declared.rank));
      return false;
    }
    if (kiln_status_t error = kiln_session_set_parameter(
            session, array.name.c_str(), array.array.data.data(),
            array.array.data.size()))
      return failed(error, options.params);
  }
  return true;
}

/// The training data: one array per input of the entry point, first axis the
/// samples.
struct Dataset {
  std::vector<NamedArray> arrays; // in the entry point's input order
  int64_t samples = 0;
};

bool readDataset(const Options &options, const kiln_bundle_t *bundle,
                 size_t entryIndex, const kiln_entry_point_info_t &entry,
                 Dataset &dataset) {
  std::vector<NamedArray> arrays;
  Status status = kiln::runtime::readNpz(options.data, arrays);
  if (!status.ok()) {
    printError(status.message());
    return false;
  }
  for (size_t i = 0; i < entry.input_count; ++i) {
    kiln_tensor_info_t input;
    if (kiln_status_t error =
            kiln_bundle_get_entry_point_input(bundle, entryIndex, i, &input))
      return failed(error);
    auto found = std::find_if(arrays.begin(), arrays.end(),
                              [&](const NamedArray &a) { return a.name == input.name; });
    if (found == arrays.end()) {
      printError(options.data + ": no array '" + input.name + "' for input " +
                 describeTensor(input));
      return false;
    }
    const std::vector<int64_t> &shape = found->array.shape;
    bool fits = found->array.elementType == input.element_type &&
                input.rank >= 1 &&
                shape.size() == static_cast<size_t>(input.rank) &&
                std::equal(shape.begin() + 1, shape.end(), input.shape + 1);
    if (!fits) {
      printError(options.data + ": array '" + found->name + "' has type " +
                 kiln::runtime::describeTensorType(found->array.elementType,
                                                   shape.data(), shape.size()) +
                 "; input " + describeTensor(input) +
                 " needs samples of the same type and shape along axis 0");
      return false;
    }
    if (i > 0 && shape[0] != dataset.samples) {
      printError(options.data + ": array '" + found->name + "' has " +
                 std::to_string(shape[0]) + " samples, '" +
                 dataset.arrays.front().name + "' has " +
                 std::to_string(dataset.samples));
      return false;
    }
    dataset.samples = shape[0];
    if (dataset.samples < input.shape[0]) {
      printError(options.data + ": " + std::to_string(dataset.samples) +
                 " samples do not fill one batch of " +
                 std::to_string(input.shape[0]));
      return false;
    }
    dataset.arrays.push_back(std::move(*found));
  }
  return true;
}

/// Runs train_step --steps times over shuffled batches, printing the loss.
bool train(const Options &options, const kiln_bundle_t *bundle) {
  size_t index = 0;
  kiln_entry_point_info_t entry;
  Options trainOptions = options;
  if (trainOptions.entry.empty())
    trainOptions.entry = "train_step";
  std::vector<NamedArray> batch, outputs;
  Dataset dataset;
  if (!selectEntryPoint(trainOptions, bundle, index, entry) ||
      !readDataset(options, bundle, index, entry, dataset) ||
      !allocateOutputs(bundle, index, entry, outputs))
    return false;
  if (outputs.empty() || outputs.front().array.data.size() != sizeof(float) ||
      outputs.front().array.elementType != KILN_ELEMENT_TYPE_F32) {
    printError(std::string("entry point '") + entry.name +
               "' must return the f32 loss first");
    return false;
  }
  int64_t batchSize = 0;
  for (NamedArray &data : dataset.arrays) {
    NamedArray slot;
    slot.name = data.name;
    slot.array.elementType = data.array.elementType;
    slot.array.shape = data.array.shape;
    kiln_tensor_info_t input;
    if (kiln_status_t error = kiln_bundle_get_entry_point_input(
            bundle, index, batch.size(), &input))
      return failed(error);
    batchSize = input.shape[0];
    slot.array.shape[0] = batchSize;
    Status allocated = kiln::runtime::AlignedBuffer::allocate(
        data.array.data.size() / static_cast<size_t>(dataset.samples) *
            static_cast<size_t>(batchSize),
        slot.array.data);
    if (!allocated.ok()) {
      printError(allocated.message());
      return false;
    }
    batch.push_back(std::move(slot));
  }
  Session session(nullptr, kiln_session_release);
  if (!openSession(options, bundle, session))
    return false;

  std::vector<int64_t> order(dataset.samples);
  int64_t batchesPerEpoch = dataset.samples / batchSize;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();
  for (long step = 0; step < options.steps; ++step) {
    int64_t epoch = step / batchesPerEpoch, within = step % batchesPerEpoch;
    if (within == 0) {
      for (int64_t i = 0; i < dataset.samples; ++i)
        order[i] = i;
      if (!options.noShuffle) {
        std::mt19937_64 random(static_cast<uint64_t>(options.seed) * 1000003u +
                               static_cast<uint64_t>(epoch));
        std::shuffle(order.begin(), order.end(), random);
      }
    }
    for (size_t a = 0; a < batch.size(); ++a) {
      size_t row = dataset.arrays[a].array.data.size() /
                   static_cast<size_t>(dataset.samples);
      for (int64_t r = 0; r < batchSize; ++r)
        std::memcpy(batch[a].array.data.data() + r * row,
                    dataset.arrays[a].array.data.data() +
                        order[within * batchSize + r] * row,
                    row);
    }
    std::vector<kiln_tensor_t> inputs = tensorsOf(batch),
                               results = tensorsOf(outputs);
    if (kiln_status_t status =
            kiln_session_run(session.get(), entry.name, inputs.data(),
                             inputs.size(), results.data(), results.size()))
      return failed(status, options.data);
    if ((step + 1) % options.logEvery == 0 || step + 1 == options.steps) {
      float loss;
      std::memcpy(&loss, outputs.front().array.data.data(), sizeof(loss));
      double seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      std::printf("step %ld/%ld  epoch %lld  loss %.6f  samples/s %.1f\n",
                  step + 1, options.steps, static_cast<long long>(epoch), loss,
                  static_cast<double>((step + 1) * batchSize) / seconds);
      std::fflush(stdout);
    }
  }
  return saveParameters(options, bundle, session.get());
}

bool runTool(const Options &options) {
  kiln_bundle_t *rawBundle = nullptr;
  if (kiln_status_t status =
          kiln_bundle_open(options.bundlePath.c_str(), &rawBundle))
    return failed(status);
  std::unique_ptr<kiln_bundle_t, void (*)(kiln_bundle_t *)> bundle(
      rawBundle, kiln_bundle_release);
  if (options.info && !printInfo(options, bundle.get()))
    return false;
  if (!options.data.empty())
    return train(options, bundle.get());
  if (!options.outputs.empty())
    return runEntryPoint(options, bundle.get());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (!parseArguments(argc, argv, options))
    return 1;
  if (options.help) {
    printUsage(stdout);
    return 0;
  }
  if (!checkArguments(options))
    return 1;
  return runTool(options) ? 0 : 1;
}
