//===- kiln-run.cpp - the Kiln runtime driver -----------------------------===//
//
// Runs compiled Kiln bundles through the C API of libkilnrt: prints what a
// bundle holds (--info), runs one entry point on arrays from an .npz file and
// writes its outputs to another, or trains (Train.cpp). Every error is one
// line on stderr naming the file or array at fault, and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "Parameters.h"
#include "RankFailure.h"
#include "Train.h"

#include "kiln/runtime.h"
#include "kiln/runtime/Npy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

using namespace kiln::run;
using kiln::runtime::Status;

namespace {

const char *const kUsage = R"(usage: kiln-run MODEL.kiln --info
       kiln-run MODEL.kiln [--entry NAME] --inputs IN.npz --outputs OUT.npz
       kiln-run MODEL.kiln --data TRAIN.npz --steps N [training options]

Runs a compiled Kiln bundle (written by kilnc) with libkilnrt.

options:
  --info            print the bundle's entry points with their input and output
                    names, types and shapes, its targets with their kernel
                    counts (and a CUDA target's architectures), the arena size
                    of each entry point, the parameter count and bytes, its
                    metadata and its fingerprint
  --entry NAME      the entry point to run (e.g. forward); may be left out when
                    the bundle has only one
  --inputs FILE     an .npz archive (numpy.savez or numpy.savez_compressed) with
                    one array per input of the entry point, keyed by the input's
                    name; needed unless the entry point takes no inputs
  --outputs FILE    the .npz archive to write, one array per output, keyed by
                    the output's name
  --params FILE     an .npz archive of parameter values, keyed by parameter
                    name, that replace the bundle's initial values for this run
  --save-params F   after the run (or training), write every parameter and
                    optimizer state tensor to the safetensors file F
  --compress        deflate-compress the --outputs archive (like
                    numpy.savez_compressed)
  --target NAME     the target to run on: cpu, cuda, or auto (the default):
                    cuda when the bundle has a CUDA target and this machine
                    can run it (NVIDIA driver and GPU), else cpu
  --repeat N        run the entry point N times (default 1) and print the mean
                    and fastest time of one run; the outputs are those of the
                    last run
  --print-memory    once the session is open, print the bytes of the arena it
                    allocated (what kilnc --report=memory calls the peak arena)
  -h, --help        print this message

Arrays must match the entry point exactly: every input present once, no extra
arrays, the declared element type and shape. Supported .npy dtypes: f4 f8 f2 i8
i4 i2 i1 u8 u4 u2 u1 b1, V2 (ml_dtypes' bfloat16) and V1 (ml_dtypes' float8,
float4, int4 and int2 types, taking the type of the input they are bound to),
little-endian, C order.

Training: --data TRAIN.npz --steps N runs N optimizer steps of the entry point
train_step (compiled with kilnc --optimizer) on batches of TRAIN.npz: one array
per input, keyed by its name, the first axis the samples. For a bundle compiled
with kilnc --grad-accum=K, each step runs accumulate_step K-1 times and then
train_step, each on the next batch, and its loss is the mean of the K losses.
  --seed S          the data order: each epoch visits the samples in a random
                    order seeded by S and the epoch (default 0)
  --no-shuffle      visit the samples in their stored order
  --drop-last       skip the incomplete batch at the end of each epoch; by
                    default a batch continues into the next epoch's order, so
                    no sample is dropped
  --log-every K     print a line every K steps (default 1) when stdout is not
                    a terminal; on a terminal one progress line is redrawn
  --metrics F       write one JSON object per step to F (step, epoch, loss,
                    lr, grad_norm, loss_scale, samples, samples_per_s,
                    elapsed_s); F must not exist, unless with --resume,
                    which continues it
  --tensorboard D   write the same scalars (loss, lr, grad_norm, loss_scale,
                    samples_per_s) per step as a TensorBoard event file in
                    D (created if needed; a new file per run)
  --checkpoint-dir D
                    write checkpoints to D: D/step-N.safetensors (parameters
                    and optimizer state), D/step-N.json (step, data cursor,
                    bundle fingerprint) and D/latest, after the last step and
                    every --checkpoint-every K steps
  --checkpoint-every K
                    checkpoint every K steps too
  --resume          continue from the latest checkpoint in --checkpoint-dir
                    up to --steps N in all, exactly as an uninterrupted run;
                    refused for a checkpoint of another bundle or data order
  --keep-checkpoints K
                    keep only the K newest checkpoints, removing older ones
                    as new ones are written (default: keep all)
  --halt-on-nonfinite
                    stop with an error at the first step whose loss or
                    gradient norm is NaN or infinite, before its checkpoint,
                    so the checkpoints hold only finite steps; without it
                    the first such step is reported as a warning

Every output (--save-params, --metrics, --tensorboard, --checkpoint-dir,
--outputs) is
checked writable before the first step. A run locks its --checkpoint-dir
(D/kiln-run.lock): a second run given the same directory is refused while the
first runs; temporary files an interrupted run left there are removed.

Data parallelism: started by an MPI launcher (mpirun -np W kiln-run ..., or
srun), each of the W ranks trains on its shard of the data (the same seeded
order on every rank, truncated to a multiple of W; rank r takes samples r,
r+W, r+2W, ... of it) with a bundle compiled with kilnc --data-parallel, whose
steps average the gradients, loss and metrics over the ranks. Rank 0 alone
prints, writes --metrics, checkpoints and --save-params; a checkpoint resumes
only at the same number of ranks. A rank that fails ends every rank; a rank
the launcher ends because another died names the ranks of its host that are
gone.
  --collective-timeout S
                    give up, and end every rank with an error, when one
                    collective waits more than S seconds for the other ranks
                    (default 300; 0: no limit)

The compiled kernels use all cores: their loops and matrix products share
one OpenMP thread pool, which OMP_NUM_THREADS limits (OpenBLAS runs
single-threaded inside it). On CUDA, KILN_CUDA_DEVICE picks the GPU (default: the rank's
local rank modulo the GPU count, so 0 for one rank), KILN_CUDA_GRAPHS=0
runs every command directly instead of replaying a CUDA graph and
KILN_CUDA_SYNC=1 waits after every command, so that an error on the device
names the command. Exit status: 0 on success, 1 on any error.
)";

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
  if (flag == "--print-memory")
    return &options.printMemory;
  if (flag == "--compress")
    return &options.compress;
  if (flag == "--no-shuffle")
    return &options.noShuffle;
  if (flag == "--drop-last")
    return &options.dropLast;
  if (flag == "--resume")
    return &options.resume;
  if (flag == "--halt-on-nonfinite")
    return &options.haltOnNonfinite;
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
  if (flag == "--metrics")
    return &options.metrics;
  if (flag == "--tensorboard")
    return &options.tensorboard;
  if (flag == "--checkpoint-dir")
    return &options.checkpointDir;
  return nullptr;
}

/// The count option `flag` sets, or nullptr; `allowZero` says whether 0 is
/// a valid value.
long *countFor(Options &options, const std::string &flag, bool &allowZero) {
  allowZero = flag == "--seed" || flag == "--collective-timeout";
  if (flag == "--repeat")
    return &options.repeat;
  if (flag == "--steps")
    return &options.steps;
  if (flag == "--log-every")
    return &options.logEvery;
  if (flag == "--seed")
    return &options.seed;
  if (flag == "--checkpoint-every")
    return &options.checkpointEvery;
  if (flag == "--keep-checkpoints")
    return &options.keepCheckpoints;
  if (flag == "--collective-timeout")
    return &options.collectiveTimeout;
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
  bool hasValue = false, allowZero = false;
  splitFlag(argv[i], flag, value, hasValue);
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
  if (long *option = countFor(options, flag, allowZero))
    return takeValue(argc, argv, i, value) &&
           parseCount(flag, value, *option, allowZero);
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

/// The training flags need --data; --checkpoint-every and --resume need
/// --checkpoint-dir.
bool checkTrainingArguments(const Options &options) {
  const struct {
    bool given;
    const char *flag;
  } trainingFlags[] = {{!options.metrics.empty(), "--metrics"},
                       {!options.tensorboard.empty(), "--tensorboard"},
                       {!options.checkpointDir.empty(), "--checkpoint-dir"},
                       {options.checkpointEvery > 0, "--checkpoint-every"},
                       {options.resume, "--resume"},
                       {options.keepCheckpoints > 0, "--keep-checkpoints"},
                       {options.haltOnNonfinite, "--halt-on-nonfinite"},
                       {options.dropLast, "--drop-last"}};
  for (const auto &training : trainingFlags) {
    if (training.given && options.data.empty()) {
      printError(std::string(training.flag) +
                 " is for training; it needs --data TRAIN.npz --steps N");
      return false;
    }
  }
  if (options.checkpointDir.empty() &&
      (options.checkpointEvery > 0 || options.resume ||
       options.keepCheckpoints > 0)) {
    printError(std::string(options.resume ? "--resume"
                           : options.keepCheckpoints > 0
                               ? "--keep-checkpoints"
                               : "--checkpoint-every") +
               " needs --checkpoint-dir DIR");
    return false;
  }
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
  if (!checkTrainingArguments(options))
    return false;
  if (!options.info && options.outputs.empty() && options.data.empty()) {
    printError("nothing to do: give --info, --outputs OUT.npz (with "
               "--inputs IN.npz) to run an entry point, or --data TRAIN.npz "
               "--steps N to train");
    return false;
  }
  return true;
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
    std::printf("  %s\n", signature.c_str());
    for (size_t t = 0; t < info.target_count; ++t) {
      kiln_target_info_t target;
      if (kiln_status_t status = kiln_bundle_get_target(bundle, t, &target))
        return failed(status);
      kiln_program_info_t program;
      if (!*target.images) {
        std::printf("    %s: arena %s, %zu commands\n", target.name,
                    describeBytes(entry.arena_bytes).c_str(),
                    entry.command_count);
      } else if (kiln_bundle_get_program(bundle, i, target.name, &program) ==
                 KILN_OK) {
        std::string collectives;
        if (program.attention_count > 0)
          collectives = ", " + std::to_string(program.attention_count) +
                        " attention commands";
        if (program.layer_norm_count > 0)
          collectives +=
              ", " + std::to_string(program.layer_norm_count) + " layer norms";
        if (program.collective_count > 0)
          collectives +=
              ", " + std::to_string(program.collective_count) + " all-reduces";
        if (program.shard_collective_count > 0)
          collectives += ", " + std::to_string(program.shard_collective_count) +
                         " shard collectives";
        std::printf("    %s: arena %s, %zu commands (%zu kernel launches, %zu "
                    "matrix products%s)\n",
                    target.name, describeBytes(program.arena_bytes).c_str(),
                    program.command_count, program.launch_count,
                    program.gemm_count, collectives.c_str());
      }
    }
  }
  return true;
}

bool printTargets(const kiln_bundle_t *bundle, const kiln_bundle_info_t &info) {
  std::printf("targets:\n");
  for (size_t i = 0; i < info.target_count; ++i) {
    kiln_target_info_t target;
    if (kiln_status_t status = kiln_bundle_get_target(bundle, i, &target))
      return failed(status);
    if (*target.images)
      std::printf("  %s: triple %s, architectures %s, %zu kernels, code %s\n",
                  target.name, *target.triple ? target.triple : "unspecified",
                  target.images, target.kernel_count,
                  describeBytes(target.code_bytes).c_str());
    else
      std::printf("  %s: triple %s, cpu %s, %zu kernels, code %s\n",
                  target.name, *target.triple ? target.triple : "unspecified",
                  *target.cpu ? target.cpu : "generic", target.kernel_count,
                  describeBytes(target.code_bytes).c_str());
  }
  return true;
}

/// "metadata:" and one "  key: value" line per entry, when there are any.
bool printMetadata(const kiln_bundle_t *bundle,
                   const kiln_bundle_info_t &info) {
  if (info.metadata_count > 0)
    std::printf("metadata:\n");
  for (size_t i = 0; i < info.metadata_count; ++i) {
    const char *key = nullptr, *value = nullptr;
    if (kiln_status_t status =
            kiln_bundle_get_metadata_entry(bundle, i, &key, &value))
      return failed(status);
    std::printf("  %s: %s\n", key, value);
  }
  return true;
}

bool printInfo(const Options &options, const kiln_bundle_t *bundle) {
  kiln_bundle_info_t info;
  if (kiln_status_t status = kiln_bundle_get_info(bundle, &info))
    return failed(status);
  uint64_t fingerprint = 0;
  if (kiln_status_t status = kiln_bundle_get_fingerprint(bundle, &fingerprint))
    return failed(status);
  std::printf("bundle: %s\n", options.bundlePath.c_str());
  std::printf("producer: %s\n", *info.producer ? info.producer : "unknown");
  std::printf("model: %s\n", *info.model_name ? info.model_name : "unnamed");
  if (!printEntryPoints(bundle, info) || !printTargets(bundle, info))
    return false;
  std::printf("parameters: %zu, %s\n", info.parameter_count,
              describeBytes(info.parameter_bytes).c_str());
  // Those training updates, and those whose stored value the code relies
  // on, which take no other.
  std::string trained, fixed;
  size_t trainedCount = 0;
  uint64_t trainedBytes = 0;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t parameter;
    if (kiln_status_t status = kiln_bundle_get_parameter(bundle, i, &parameter))
      return failed(status);
    if (parameter.fixed)
      fixed += (fixed.empty() ? "" : ", ") + std::string(parameter.tensor.name);
    if (parameter.trainable) {
      trained +=
          (trained.empty() ? "" : ", ") + std::string(parameter.tensor.name);
      ++trainedCount;
      trainedBytes += parameter.tensor.byte_size;
    }
  }
  size_t trainStep = 0;
  if (trainedCount > 0 &&
      kiln_bundle_find_entry_point(bundle, "train_step", &trainStep) == KILN_OK)
    std::printf("trained parameters: %zu, %s: %s\n", trainedCount,
                describeBytes(trainedBytes).c_str(), trained.c_str());
  if (!fixed.empty())
    std::printf("fixed parameters (compiled into the code): %s\n",
                fixed.c_str());
  if (!printMetadata(bundle, info))
    return false;
  std::printf("fingerprint: 0x%016llx\n",
              static_cast<unsigned long long>(fingerprint));
  return true;
}

bool readInputs(const Options &options, const kiln_bundle_t *bundle,
                size_t index, const kiln_entry_point_info_t &entry,
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
  // ml_dtypes' narrow arrays say only "one byte each": they take the type of
  // the input they are bound to.
  for (NamedArray &array : arrays) {
    for (size_t i = 0; i < entry.input_count; ++i) {
      kiln_tensor_info_t input;
      if (kiln_status_t error =
              kiln_bundle_get_entry_point_input(bundle, index, i, &input))
        return failed(error);
      if (array.name == input.name)
        kiln::runtime::adoptNarrowType(array.array, input.element_type);
    }
  }
  return true;
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

bool runEntryPoint(const Options &options, const kiln_bundle_t *bundle) {
  size_t index = 0;
  kiln_entry_point_info_t entry;
  std::vector<NamedArray> inputArrays, outputArrays;
  if (!checkWritable("--outputs", options.outputs) ||
      (!options.saveParams.empty() &&
       !checkWritable("--save-params", options.saveParams)) ||
      !selectEntryPoint(options, bundle, index, entry) ||
      !readInputs(options, bundle, index, entry, inputArrays) ||
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
  // The index counts were checked by the run; they are not the model's
  // outputs.
  outputArrays.erase(
      std::remove_if(outputArrays.begin(), outputArrays.end(),
                     [](const NamedArray &array) {
                       return array.name.rfind(KILN_INDEX_CHECK_PREFIX, 0) == 0;
                     }),
      outputArrays.end());
  Status status =
      kiln::runtime::writeNpz(options.outputs, outputArrays, options.compress);
  if (!status.ok()) {
    printError(status.message());
    return false;
  }
  return true;
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

/// Joins the ranks of a launcher (or makes a single rank); a run of several
/// ranks must train.
bool initDistributed(const Options &options) {
  kiln_distributed_options_t distributed = {
      static_cast<double>(options.collectiveTimeout)};
  kiln_distributed_info_t info;
  if (kiln_status_t status = kiln_distributed_init(&distributed, &info))
    return failed(status);
  setDistributedInfo(info);
  if (info.world_size > 1 && options.data.empty()) {
    printError("started as one of " + std::to_string(info.world_size) +
               " ranks, kiln-run trains (--data TRAIN.npz --steps N); run "
               "--info and single entry points as one process");
    return false;
  }
  return watchForFailedRanks();
}

} // namespace

static int runMain(int argc, char **argv) {
  Options options;
  if (!parseArguments(argc, argv, options))
    return 1;
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!checkArguments(options))
    return 1;
  bool ok = initDistributed(options) && runTool(options);
  stopWatchingForFailedRanks();
  if (!ok) {
    // A failing rank ends every rank, so that none waits for it in a
    // collective; a single rank just exits.
    std::fflush(stdout);
    kiln_distributed_abort(1);
    return 1;
  }
  if (kiln_status_t status = kiln_distributed_finalize())
    return failed(status), 1;
  return 0;
}

int main(int argc, char **argv) {
  // Allocations outside the C API (data sets, batches, checkpoints' bytes)
  // that do not fit end the run with a message, not an abort.
  try {
    return runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    printError("out of memory (raise the memory limit, or train with a "
               "smaller data set or batch)");
  } catch (const std::system_error &error) {
    // A thread (the batch loader's) that could not start: under a memory
    // limit, its stack did not fit.
    printError(std::string("cannot start a thread: ") + error.what() +
               " (out of memory or of processes; raise the limit)");
  }
  stopWatchingForFailedRanks();
  std::fflush(stdout);
  kiln_distributed_abort(1);
  return 1;
}
