//===- Train.cpp - kiln-run's training loop -------------------------------===//

#include "Train.h"

#include "Checkpoint.h"
#include "Json.h"
#include "Parameters.h"
#include "TensorBoard.h"
#include "kiln/runtime/Manifest.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace kiln::run {

using kiln::runtime::Status;
using Clock = std::chrono::steady_clock;

namespace {

/// The training data: one array per input of train_step, in its input order,
/// the first axis the samples.
struct Dataset {
  std::vector<NamedArray> arrays;
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
    auto found =
        std::find_if(arrays.begin(), arrays.end(),
                     [&](const NamedArray &a) { return a.name == input.name; });
    if (found == arrays.end()) {
      printError(options.data + ": no array '" + input.name + "' for input " +
                 describeTensor(input));
      return false;
    }
    const std::vector<int64_t> &shape = found->array.shape;
    kiln::runtime::adoptNarrowType(found->array, input.element_type);
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
    int worldSize = distributedInfo().world_size;
    if (dataset.samples / worldSize < input.shape[0]) {
      printError(
          options.data + ": " + std::to_string(dataset.samples) + " samples " +
          (worldSize > 1
               ? "over " + std::to_string(worldSize) + " ranks (" +
                     std::to_string(dataset.samples / worldSize) + " each) "
               : std::string()) +
          "do not fill one batch of " + std::to_string(input.shape[0]));
      return false;
    }
    dataset.arrays.push_back(std::move(*found));
    arrays.erase(found);
  }
  // As --inputs: an array no input takes is a mistake (a misspelt name),
  // not something to skip.
  if (!arrays.empty()) {
    std::string inputs;
    for (const NamedArray &array : dataset.arrays)
      inputs += (inputs.empty() ? "" : ", ") + array.name;
    printError(options.data + ": array '" + arrays.front().name +
               "' is not an input of entry point '" + entry.name +
               "' (its inputs: " + inputs + ")");
    return false;
  }
  return true;
}

/// The batches: the samples of epoch e in the order of a std::shuffle by
/// std::mt19937_64(seed * 1000003 + e) (the stored order with --no-shuffle),
/// epoch after epoch. A batch that would run past the end of an epoch takes
/// its remaining samples from the start of the next one, unless --drop-last
/// skips to the next epoch instead.
///
/// With W ranks each walks its shard of that order, as PyTorch's
/// DistributedSampler(drop_last=True) makes it: the order (the same on every
/// rank) cut to a multiple of W, and of that rank r takes the samples at
/// r, r + W, r + 2W, ... So the ranks' k-th batches of B samples together
/// hold the samples of the k-th batch of W * B one rank would take.
class DataStream {
public:
  DataStream(const Dataset &dataset, int64_t batchSize, uint64_t seed,
             bool shuffle, bool dropLast, int rank, int worldSize)
      : dataset(dataset), batchSize(batchSize), seed(seed), shuffle(shuffle),
        dropLast(dropLast), rank(rank), worldSize(worldSize),
        shardSize(dataset.samples / worldSize),
        order(static_cast<size_t>(dataset.samples)),
        shard(static_cast<size_t>(shardSize)) {}

  StreamCursor cursor() const { return next; }
  void seek(StreamCursor cursor) { next = cursor; }

  /// Copies the next batch's samples into `batch` (one array per data array,
  /// of batchSize samples each); returns the epoch of its first sample.
  int64_t fill(std::vector<NamedArray> &batch) {
    if (dropLast && next.position + batchSize > shardSize)
      next = {next.epoch + 1, 0};
    int64_t firstEpoch = next.epoch;
    for (int64_t row = 0; row < batchSize; ++row) {
      int64_t sample = sampleAt(next);
      for (size_t a = 0; a < batch.size(); ++a) {
        const kiln::runtime::AlignedBuffer &source =
            dataset.arrays[a].array.data;
        size_t rowBytes = source.size() / static_cast<size_t>(dataset.samples);
        std::memcpy(batch[a].array.data.data() + row * rowBytes,
                    source.data() + sample * rowBytes, rowBytes);
      }
      if (++next.position == shardSize)
        next = {next.epoch + 1, 0};
    }
    return firstEpoch;
  }

private:
  int64_t sampleAt(StreamCursor cursor) {
    if (orderEpoch != cursor.epoch) {
      for (size_t i = 0; i < order.size(); ++i)
        order[i] = static_cast<int64_t>(i);
      if (shuffle) {
        std::mt19937_64 random(seed * 1000003u +
                               static_cast<uint64_t>(cursor.epoch));
        std::shuffle(order.begin(), order.end(), random);
      }
      for (size_t j = 0; j < shard.size(); ++j)
        shard[j] = order[static_cast<size_t>(rank) +
                         j * static_cast<size_t>(worldSize)];
      orderEpoch = cursor.epoch;
    }
    return shard[static_cast<size_t>(cursor.position)];
  }

  const Dataset &dataset;
  int64_t batchSize;
  uint64_t seed;
  bool shuffle, dropLast;
  int rank, worldSize;
  int64_t shardSize;
  /// The epoch's order of all samples, and this rank's shard of it.
  std::vector<int64_t> order, shard;
  int64_t orderEpoch = -1;
  StreamCursor next;
};

/// Fills and stages the micro-batches on a thread of its own, one ahead of
/// the step: as the run of micro-batch k starts, the loader takes batch
/// k + 1's samples from the stream and stages it (kiln_session_stage_inputs,
/// which on a CUDA target starts its copy to the device from pinned memory),
/// so both overlap run k. It never runs further ahead, so at most two staged
/// sets wait (k + 1 may be staged before run k has taken set k), and the
/// stream's cursor after each batch travels with it for checkpoints.
class BatchLoader {
public:
  /// Stages `count` micro-batches, batch i for entry point `entryOf(i)`,
  /// filling them into `batch` (whose tensors are `tensors`).
  BatchLoader(DataStream &stream, std::vector<NamedArray> &batch,
              std::vector<kiln_tensor_t> &tensors, kiln_session_t *session,
              long count, std::function<const char *(long)> entryOf)
      : stream(stream), batch(batch), tensors(tensors), session(session),
        count(count), entryOf(std::move(entryOf)) {
    if (count > 0)
      thread = std::thread([this] { load(); });
  }

  ~BatchLoader() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    if (thread.joinable())
      thread.join();
  }

  /// Waits until the next micro-batch is staged; gives its first sample's
  /// epoch and the stream's cursor after it, and lets the loader go on to
  /// the one after. False, having printed why, when staging failed.
  bool next(int64_t &epoch, StreamCursor &after) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return !ready.empty() || failure; });
    if (ready.empty()) {
      printError(*failure);
      return false;
    }
    epoch = ready.front().epoch;
    after = ready.front().after;
    ready.pop_front();
    ++allowed;
    lock.unlock();
    changed.notify_all();
    return true;
  }

private:
  struct Staged {
    int64_t epoch;
    StreamCursor after;
  };

  void load() {
    for (long i = 0; i < count; ++i) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stopping || allowed > i; });
        if (stopping)
          return;
      }
      Staged staged;
      staged.epoch = stream.fill(batch);
      staged.after = stream.cursor();
      kiln_status_t status = kiln_session_stage_inputs(
          session, entryOf(i), tensors.data(), tensors.size());
      std::lock_guard<std::mutex> lock(mutex);
      if (status != KILN_OK) {
        // The message is this thread's: keep it for the step's thread.
        std::string message = kiln_status_message();
        failure = "staging micro-batch " + std::to_string(i + 1) + ": " +
                  (message.empty() ? kiln_status_name(status) : message);
        changed.notify_all();
        return;
      }
      ready.push_back(staged);
      changed.notify_all();
    }
  }

  DataStream &stream;
  std::vector<NamedArray> &batch;
  std::vector<kiln_tensor_t> &tensors;
  kiln_session_t *session;
  long count;
  std::function<const char *(long)> entryOf;
  std::mutex mutex;
  std::condition_variable changed;
  /// Batches the loader may have staged: one ahead of those taken.
  long allowed = 1;
  std::deque<Staged> ready;
  std::optional<std::string> failure;
  bool stopping = false;
  std::thread thread;
};

/// An entry point the loop runs, with its output buffers.
struct StepEntry {
  size_t index = 0;
  kiln_entry_point_info_t info{};
  std::vector<NamedArray> outputs;
  std::vector<kiln_tensor_t> outputTensors;
};

/// The index of the output called `name` (an f32 scalar), or -1.
bool findScalarOutput(const StepEntry &entry, const char *name, int &index) {
  index = -1;
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    if (entry.outputs[i].name != name)
      continue;
    if (entry.outputs[i].array.elementType != KILN_ELEMENT_TYPE_F32 ||
        entry.outputs[i].array.data.size() != sizeof(float)) {
      printError(std::string("entry point '") + entry.info.name +
                 "': output '" + name + "' must be an f32 scalar");
      return false;
    }
    index = static_cast<int>(i);
  }
  return true;
}

float scalarOutput(const StepEntry &entry, size_t index) {
  float value;
  std::memcpy(&value, entry.outputs[index].array.data.data(), sizeof(value));
  return value;
}

/// What one optimizer step did.
struct StepReport {
  long step = 0; // 1-based
  int64_t epoch = 0;
  float loss = 0; // the mean over the step's micro-batches
  bool hasLr = false, hasGradNorm = false, hasLossScale = false;
  float lr = 0, gradNorm = 0, lossScale = 0;
  int64_t samples = 0;
  double seconds = 0;        // this step
  double elapsedSeconds = 0; // since this run's first step
  long stepsThisRun = 0;
};

/// The --metrics file: one JSON object per step, each written with one
/// write(2) as its step ends (so a killed run's file holds every finished
/// step) and flushed to disk at checkpoints and at the end.
class MetricsFile {
public:
  ~MetricsFile() {
    if (fd >= 0)
      ::close(fd);
  }

  /// Opens --metrics: a new file, or with --resume the existing one cut back
  /// to the steps up to `resumedStep` (steps after it will be run again).
  bool open(const Options &options, long resumedStep) {
    path = options.metrics;
    if (path.empty())
      return true;
    struct stat status;
    bool exists = ::stat(path.c_str(), &status) == 0;
    if (exists && !options.resume) {
      printError("--metrics " + path +
                 " already exists; kiln-run appends to a metrics file only "
                 "with --resume");
      return false;
    }
    if (exists && !truncateAfter(resumedStep))
      return false;
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
      printError("--metrics " + path +
                 ": cannot open: " + std::strerror(errno));
      return false;
    }
    return true;
  }

  bool append(const StepReport &report) {
    if (fd < 0)
      return true;
    std::string line = "{\"step\":" + std::to_string(report.step) +
                       ",\"epoch\":" + std::to_string(report.epoch) +
                       ",\"loss\":" + jsonNumber(report.loss) + ",\"lr\":" +
                       (report.hasLr ? jsonNumber(report.lr) : "null");
    if (report.hasGradNorm)
      line += ",\"grad_norm\":" + jsonNumber(report.gradNorm);
    if (report.hasLossScale)
      line += ",\"loss_scale\":" + jsonNumber(report.lossScale);
    line += ",\"samples\":" + std::to_string(report.samples) +
            ",\"samples_per_s\":" +
            jsonNumber(static_cast<double>(report.samples) /
                       std::max(report.seconds, 1e-9)) +
            ",\"elapsed_s\":" + jsonNumber(report.elapsedSeconds) + "}\n";
    ssize_t written = ::write(fd, line.data(), line.size());
    if (written != static_cast<ssize_t>(line.size())) {
      printError("--metrics " + path +
                 ": cannot write: " + std::strerror(errno));
      return false;
    }
    return true;
  }

  bool sync() {
    if (fd >= 0 && fsync(fd) != 0) {
      printError("--metrics " + path +
                 ": cannot flush: " + std::strerror(errno));
      return false;
    }
    return true;
  }

private:
  /// Keeps the records of steps up to `step`; a last line cut short (a run
  /// killed while writing it) is dropped, any other malformed line refused.
  bool truncateAfter(long step) {
    std::string text, kept;
    if (!readWholeFile(path, text))
      return false;
    size_t begin = 0, number = 0;
    while (begin < text.size()) {
      size_t end = text.find('\n', begin);
      ++number;
      if (end == std::string::npos)
        break; // an unfinished last line
      std::string line = text.substr(begin, end - begin);
      JsonValue record;
      std::string error;
      int64_t recordStep = 0;
      const JsonValue *field = nullptr;
      if (!parseJson(line, record, error) || !(field = record.find("step")) ||
          !field->asInteger(recordStep)) {
        printError("--metrics " + path + ": line " + std::to_string(number) +
                   " is not a metrics record; not appending to it");
        return false;
      }
      if (recordStep <= step)
        kept += line + "\n";
      begin = end + 1;
    }
    return kept == text || writeFileAtomically(path, kept);
  }

  std::string path;
  int fd = -1;
};

/// A step's scalars for TensorBoard, named as in the --metrics records.
std::vector<std::pair<std::string, float>> scalarsOf(const StepReport &report) {
  std::vector<std::pair<std::string, float>> scalars{{"loss", report.loss}};
  if (report.hasLr)
    scalars.emplace_back("lr", report.lr);
  if (report.hasGradNorm)
    scalars.emplace_back("grad_norm", report.gradNorm);
  if (report.hasLossScale)
    scalars.emplace_back("loss_scale", report.lossScale);
  scalars.emplace_back("samples_per_s",
                       static_cast<float>(static_cast<double>(report.samples) /
                                          std::max(report.seconds, 1e-9)));
  return scalars;
}

/// "1:02:03".
std::string describeDuration(double seconds) {
  long total = static_cast<long>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", total / 3600,
                total / 60 % 60, total % 60);
  return text;
}

/// What a person watching sees: on a terminal one progress line, redrawn in
/// place at most ten times a second; otherwise a plain line every
/// --log-every steps and after the last. Under a launcher of several ranks
/// always plain lines: mpirun gives every rank a pseudo-terminal, whatever
/// its own output is.
class ProgressReporter {
public:
  ProgressReporter(const Options &options)
      : options(options), terminal(isatty(fileno(stdout)) == 1 &&
                                   distributedInfo().world_size == 1) {}

  ~ProgressReporter() { finish(); }

  void report(const StepReport &report) {
    bool last = report.step == options.steps;
    double perSecond = static_cast<double>(report.samples) *
                       static_cast<double>(report.stepsThisRun) /
                       std::max(report.elapsedSeconds, 1e-9);
    char loss[64], lr[48] = "";
    std::snprintf(loss, sizeof(loss), "loss %.6f", report.loss);
    if (report.hasLr)
      std::snprintf(lr, sizeof(lr), "  lr %.6g", report.lr);
    if (!terminal) {
      if (report.step % options.logEvery == 0 || last) {
        std::printf("step %ld/%ld  epoch %lld  %s%s  samples/s %.1f\n",
                    report.step, options.steps,
                    static_cast<long long>(report.epoch), loss, lr, perSecond);
        std::fflush(stdout);
      }
      return;
    }
    Clock::time_point now = Clock::now();
    if (drawn && !last && now - lastDraw < std::chrono::milliseconds(100))
      return;
    double eta = report.elapsedSeconds /
                 static_cast<double>(report.stepsThisRun) *
                 static_cast<double>(options.steps - report.step);
    std::printf("\rstep %ld/%ld  %s%s  samples/s %.1f  ETA %s\033[K",
                report.step, options.steps, loss, lr, perSecond,
                describeDuration(eta).c_str());
    std::fflush(stdout);
    drawn = true;
    setProgressLineOpen(true);
    lastDraw = now;
  }

  /// Ends the progress line, so that what follows starts on its own line.
  void finish() {
    if (isProgressLineOpen())
      std::printf("\n");
    std::fflush(stdout);
    setProgressLineOpen(false);
  }

private:
  const Options &options;
  bool terminal;
  bool drawn = false;
  Clock::time_point lastDraw;
};

/// Parses the bundle's training.grad_accum metadata; 1 when absent.
bool gradAccumOf(const Options &options, const kiln_bundle_t *bundle,
                 long &count) {
  const char *value = nullptr;
  count = 1;
  if (kiln_bundle_get_metadata(bundle, "training.grad_accum", &value) ==
      KILN_STATUS_NOT_FOUND)
    return true;
  char *end = nullptr;
  count = std::strtol(value, &end, 10);
  if (!*value || *end != '\0' || count < 1) {
    printError(options.bundlePath + ": metadata training.grad_accum is '" +
               value + "', not a positive count");
    return false;
  }
  return true;
}

class Trainer {
public:
  Trainer(const Options &options, const kiln_bundle_t *bundle)
      : options(options), bundle(bundle), progress(options) {}

  bool run() {
    if (!checkDataParallel() || !prepareEntries() || !prepareBatch() ||
        !checkOutputs())
      return false;
    std::string target;
    // Before the session: a CUDA session of a data-parallel bundle is itself
    // collective (it joins the NCCL communicator).
    if (kiln_status_t error = kiln_bundle_get_fingerprint(bundle, &fingerprint))
      return failed(error);
    if (!checkRanksAgree())
      return false;
    if (!openSession(options, bundle, session, &target))
      return false;
    stream = std::make_unique<DataStream>(
        dataset, batchSize, static_cast<uint64_t>(options.seed),
        !options.noShuffle, options.dropLast, ranks.rank, ranks.world_size);
    long firstStep = 0;
    if (!prepareCheckpoints(firstStep) ||
        (isRoot() && (!metrics.open(options, firstStep) ||
                      !tensorboard.open(options.tensorboard))))
      return false;
    consumed = stream->cursor();
    loader = std::make_unique<BatchLoader>(
        *stream, batch, batchTensors, session.get(),
        (options.steps - firstStep) * gradAccum, [this](long i) {
          return i % gradAccum + 1 < gradAccum ? accumulateStep.info.name
                                               : trainStep.info.name;
        });
    Clock::time_point start = Clock::now();
    for (long step = firstStep; step < options.steps; ++step) {
      StepReport report;
      currentStep = step + 1;
      Clock::time_point stepStart = Clock::now();
      if (!runStep(report))
        return false;
      Clock::time_point now = Clock::now();
      report.step = step + 1;
      report.seconds = std::chrono::duration<double>(now - stepStart).count();
      report.elapsedSeconds =
          std::chrono::duration<double>(now - start).count();
      report.stepsThisRun = step + 1 - firstStep;
      // The replicated state and the reports are the same on every rank:
      // rank 0 alone writes them (sharded state is gathered to it).
      if (isRoot()) {
        progress.report(report);
        if (!metrics.append(report) ||
            !tensorboard.append(report.step, scalarsOf(report)))
          return false;
      }
      // Before the checkpoint: a halted run keeps the last finite one.
      if (!checkFinite(report))
        return false;
      if (checkpointDue(report.step) && !checkpoint(report.step))
        return false;
    }
    if (isRoot()) {
      progress.finish();
      if (!metrics.sync() || !tensorboard.sync())
        return false;
    }
    return saveParameters(options, bundle, session.get());
  }

private:
  bool isRoot() const { return ranks.rank == 0; }

  /// Everything the run writes is checked (and the checkpoint directory
  /// created and locked) before the first step, so that no run is lost to
  /// an output it finds unwritable at its end. Rank 0 writes them all.
  bool checkOutputs() {
    if (!isRoot())
      return true;
    // The directory first: the files may be meant to go into it.
    if (!options.checkpointDir.empty() &&
        (!checkpointLock.acquire(options.checkpointDir) ||
         !removeStaleTemporaries(options.checkpointDir)))
      return false;
    return (options.saveParams.empty() ||
            checkWritable("--save-params", options.saveParams)) &&
           (options.metrics.empty() ||
            checkWritable("--metrics", options.metrics));
  }

  /// Reports the first step whose loss (or gradient norm) is not finite;
  /// with --halt-on-nonfinite, stops the run there, before its checkpoint.
  /// Under an fp16 loss scale an infinite gradient norm is an overflow the
  /// step skipped, not a fault. The values are the same on every rank.
  bool checkFinite(const StepReport &report) {
    bool gradFinite = !report.hasGradNorm || report.hasLossScale ||
                      std::isfinite(report.gradNorm);
    if (std::isfinite(report.loss) && gradFinite)
      return true;
    std::string what =
        !std::isfinite(report.loss)
            ? "the loss is " + describeFloat(report.loss)
            : "the gradient norm is " + describeFloat(report.gradNorm);
    if (options.haltOnNonfinite) {
      if (isRoot()) {
        metrics.sync();
        tensorboard.sync();
        printError("step " + std::to_string(report.step) + ": " + what +
                   "; stopped by --halt-on-nonfinite" +
                   (options.checkpointDir.empty()
                        ? std::string()
                        : " (the checkpoints in " + options.checkpointDir +
                              " are those of earlier steps)"));
      }
      return false;
    }
    if (!reportedNonfinite && isRoot())
      printWarning("step " + std::to_string(report.step) + ": " + what +
                   " (the first such step); the parameters may no longer be "
                   "finite; --halt-on-nonfinite stops a run there");
    reportedNonfinite = true;
    return true;
  }

  static std::string describeFloat(float value) {
    return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
  }

  /// Every rank must run the same bundle on the same data with the same
  /// flags, or their all-reduces would pair unrelated values (or hang): the
  /// ranks compare a hash of what they run (its lowest and highest value
  /// over the ranks, 32 bits at a time, which doubles hold exactly) and all
  /// stop when any differs. A rank given fewer --steps stops early, which
  /// the collective timeout reports.
  bool checkRanksAgree() {
    if (ranks.world_size == 1)
      return true;
    const char *graphs = std::getenv("KILN_CUDA_GRAPHS");
    std::string what =
        std::to_string(fingerprint) + "|" + std::string(trainStep.info.name) +
        "|" + std::to_string(dataset.samples) + "|" +
        std::to_string(options.seed) + "|" + std::to_string(options.noShuffle) +
        "|" + std::to_string(options.dropLast) + "|" +
        std::to_string(options.resume) + "|" +
        std::to_string(options.checkpointEvery) + "|" + options.target + "|" +
        (graphs ? graphs : "");
    uint64_t hash = 14695981039346656037ull; // FNV-1a
    for (unsigned char c : what)
      hash = (hash ^ c) * 1099511628211ull;
    double low[2] = {static_cast<double>(hash >> 32),
                     static_cast<double>(hash & 0xffffffffu)};
    double high[2] = {low[0], low[1]};
    if (kiln_status_t error =
            kiln_distributed_all_reduce_f64(low, 2, KILN_REDUCE_MIN))
      return failed(error);
    if (kiln_status_t error =
            kiln_distributed_all_reduce_f64(high, 2, KILN_REDUCE_MAX))
      return failed(error);
    if (low[0] == high[0] && low[1] == high[1])
      return true;
    printError("the " + std::to_string(ranks.world_size) +
               " ranks do not all run the same bundle (fingerprint " +
               hex64(fingerprint) + " here), entry point, data (" +
               std::to_string(dataset.samples) +
               " samples here) and training flags (--seed, --no-shuffle, "
               "--drop-last, --resume, --checkpoint-every, --target, "
               "KILN_CUDA_GRAPHS); start every rank with the same command");
    return false;
  }

  /// Several ranks need a bundle whose steps average their gradients.
  bool checkDataParallel() {
    if (ranks.world_size == 1)
      return true;
    const char *value = nullptr;
    if (kiln_bundle_get_metadata(bundle, "training.data_parallel", &value) ==
            KILN_OK &&
        std::string(value) == "1")
      return true;
    printError(options.bundlePath +
               " was not compiled for data parallelism "
               "(its metadata has no training.data_parallel = 1), so " +
               std::to_string(ranks.world_size) +
               " ranks would each train their own copy; recompile it with "
               "kilnc --data-parallel");
    return false;
  }

  /// train_step (or --entry) and, for a bundle with training.grad_accum > 1,
  /// accumulate_step, whose inputs must be train_step's.
  bool prepareEntries() {
    if (!selectEntryPoint(options, bundle, trainStep.index, trainStep.info,
                          "train_step") ||
        !readDataset(options, bundle, trainStep.index, trainStep.info,
                     dataset) ||
        !prepareOutputs(trainStep) ||
        !findScalarOutput(trainStep, "lr", lrOutput) ||
        !findScalarOutput(trainStep, "grad_norm", gradNormOutput) ||
        !findScalarOutput(trainStep, "loss_scale", lossScaleOutput) ||
        !gradAccumOf(options, bundle, gradAccum))
      return false;
    if (gradAccum == 1)
      return true;
    if (kiln_bundle_find_entry_point(bundle, "accumulate_step",
                                     &accumulateStep.index) != KILN_OK) {
      printError(options.bundlePath + ": metadata training.grad_accum is " +
                 std::to_string(gradAccum) +
                 " but the bundle has no entry point 'accumulate_step'");
      return false;
    }
    if (kiln_status_t error = kiln_bundle_get_entry_point(
            bundle, accumulateStep.index, &accumulateStep.info))
      return failed(error);
    return sameInputs() && prepareOutputs(accumulateStep);
  }

  bool prepareOutputs(StepEntry &entry) {
    if (!allocateOutputs(bundle, entry.index, entry.info, entry.outputs))
      return false;
    if (entry.outputs.empty() ||
        entry.outputs.front().array.data.size() != sizeof(float) ||
        entry.outputs.front().array.elementType != KILN_ELEMENT_TYPE_F32) {
      printError(std::string("entry point '") + entry.info.name +
                 "' must return the f32 loss first");
      return false;
    }
    entry.outputTensors = tensorsOf(entry.outputs);
    return true;
  }

  bool sameInputs() {
    bool same = accumulateStep.info.input_count == trainStep.info.input_count;
    for (size_t i = 0; same && i < trainStep.info.input_count; ++i) {
      kiln_tensor_info_t a, b;
      if (kiln_status_t error =
              kiln_bundle_get_entry_point_input(bundle, trainStep.index, i, &a))
        return failed(error);
      if (kiln_status_t error = kiln_bundle_get_entry_point_input(
              bundle, accumulateStep.index, i, &b))
        return failed(error);
      same = describeTensor(a) == describeTensor(b);
    }
    if (!same)
      printError(options.bundlePath + ": entry points '" + trainStep.info.name +
                 "' and 'accumulate_step' take different inputs");
    return same;
  }

  /// One buffer per input, batchSize samples long, that the stream fills.
  bool prepareBatch() {
    for (size_t i = 0; i < dataset.arrays.size(); ++i) {
      const NamedArray &data = dataset.arrays[i];
      kiln_tensor_info_t input;
      if (kiln_status_t error = kiln_bundle_get_entry_point_input(
              bundle, trainStep.index, i, &input))
        return failed(error);
      batchSize = input.shape[0];
      NamedArray slot;
      slot.name = data.name;
      slot.array.elementType = data.array.elementType;
      slot.array.shape = data.array.shape;
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
    batchTensors = tensorsOf(batch);
    return true;
  }

  /// Runs `entry` on the batch the loader staged next; adds its loss to
  /// `lossSum`.
  bool runMicroBatch(StepEntry &entry, int64_t &epoch, double &lossSum) {
    if (!loader->next(epoch, consumed))
      return false;
    if (kiln_status_t status = kiln_session_run_staged(
            session.get(), entry.info.name, entry.outputTensors.data(),
            entry.outputTensors.size()))
      return failed(status,
                    options.data + ": step " + std::to_string(currentStep));
    // On the CPU the run is synchronous and the outputs are host memory the
    // run wrote: reading the loss costs no further wait. With several ranks
    // the step itself (kilnc --data-parallel) returns the mean loss over all
    // ranks, the same on each: it is not averaged again here.
    lossSum += scalarOutput(entry, 0);
    return true;
  }

  /// One optimizer step: gradAccum - 1 accumulate_steps, then train_step,
  /// each on its own micro-batch.
  bool runStep(StepReport &report) {
    double lossSum = 0;
    int64_t epoch = 0;
    for (long micro = 0; micro < gradAccum; ++micro) {
      StepEntry &entry = micro + 1 < gradAccum ? accumulateStep : trainStep;
      if (!runMicroBatch(entry, micro == 0 ? report.epoch : epoch, lossSum))
        return false;
    }
    report.loss = static_cast<float>(lossSum / static_cast<double>(gradAccum));
    report.samples = batchSize * gradAccum * ranks.world_size;
    report.hasLr = lrOutput >= 0;
    if (report.hasLr)
      report.lr = scalarOutput(trainStep, static_cast<size_t>(lrOutput));
    report.hasGradNorm = gradNormOutput >= 0;
    if (report.hasGradNorm)
      report.gradNorm =
          scalarOutput(trainStep, static_cast<size_t>(gradNormOutput));
    report.hasLossScale = lossScaleOutput >= 0;
    if (report.hasLossScale)
      report.lossScale =
          scalarOutput(trainStep, static_cast<size_t>(lossScaleOutput));
    return true;
  }

  bool checkpointDue(long step) const {
    if (options.checkpointDir.empty())
      return false;
    return step == options.steps ||
           (options.checkpointEvery > 0 && step % options.checkpointEvery == 0);
  }

  CheckpointInfo describeRun(long step) const {
    CheckpointInfo info;
    info.step = step;
    info.bundleFingerprint = fingerprint;
    info.bundlePath = options.bundlePath;
    info.kilnRunVersion = kVersion;
    info.dataPath = options.data;
    info.samples = dataset.samples;
    info.batchSize = batchSize;
    info.gradAccum = gradAccum;
    info.seed = options.seed;
    info.shuffle = !options.noShuffle;
    info.dropLast = options.dropLast;
    info.worldSize = ranks.world_size;
    // Where the batches run so far end, not the ones staged ahead.
    info.cursor = consumed;
    return info;
  }

  /// Rank 0 writes the checkpoint; with sharded optimizer state every rank
  /// takes part in gathering it.
  bool checkpoint(long step) {
    if (!isRoot() && !hasShardedState(bundle))
      return true;
    std::string parameters;
    CheckpointInfo info = describeRun(step);
    if (!encodeSafetensors(bundle, session.get(), parameters))
      return false;
    return !isRoot() ||
           (metrics.sync() && tensorboard.sync() &&
            writeCheckpoint(options.checkpointDir, info, parameters) &&
            (options.keepCheckpoints == 0 ||
             rotateCheckpoints(options.checkpointDir, step,
                               options.keepCheckpoints)));
  }

  /// A fresh run checks the directory; --resume loads its latest checkpoint
  /// and starts after its step.
  bool prepareCheckpoints(long &firstStep) {
    if (options.checkpointDir.empty())
      return true;
    if (!options.resume)
      return !isRoot() || checkNoCheckpoints(options.checkpointDir);
    CheckpointInfo saved;
    std::string sidecar, parameters;
    std::vector<NamedArray> arrays;
    if (!readLatestCheckpoint(options.checkpointDir, saved, sidecar,
                              parameters) ||
        !checkResumable(saved, sidecar) ||
        !decodeSafetensors(parameters,
                           options.checkpointDir + "/" + saved.parametersFile,
                           arrays) ||
        !setParameters(bundle, session.get(), arrays,
                       options.checkpointDir + "/" + saved.parametersFile,
                       /*requireAll=*/true))
      return false;
    stream->seek(saved.cursor);
    firstStep = saved.step;
    return true;
  }

  /// The checkpoint must continue this run: the same bundle, the same data
  /// set and data order, and a step within --steps.
  bool checkResumable(const CheckpointInfo &saved, const std::string &sidecar) {
    CheckpointInfo now = describeRun(saved.step);
    std::string prefix = "checkpoint " + sidecar;
    if (saved.bundleFingerprint != now.bundleFingerprint) {
      printError(prefix + " was written for a different bundle (" +
                 saved.bundlePath + ", fingerprint " +
                 hex64(saved.bundleFingerprint) + "); " + options.bundlePath +
                 " has fingerprint " + hex64(now.bundleFingerprint));
      return false;
    }
    if (saved.worldSize != now.worldSize) {
      printError(prefix + " was written by a run of " +
                 std::to_string(saved.worldSize) + " rank" +
                 (saved.worldSize == 1 ? "" : "s") +
                 ", whose data shards this run of " +
                 std::to_string(now.worldSize) +
                 " cannot continue; resume it with " +
                 std::to_string(saved.worldSize) + " rank" +
                 (saved.worldSize == 1 ? "" : "s"));
      return false;
    }
    if (saved.batchSize != now.batchSize || saved.gradAccum != now.gradAccum) {
      printError(prefix + " is corrupt: it records batch size " +
                 std::to_string(saved.batchSize) + " and grad_accum " +
                 std::to_string(saved.gradAccum) + ", its bundle has " +
                 std::to_string(now.batchSize) + " and " +
                 std::to_string(now.gradAccum));
      return false;
    }
    if (saved.samples != now.samples) {
      printError(prefix + " was written for data of " +
                 std::to_string(saved.samples) + " samples (" + saved.dataPath +
                 "); " + options.data + " has " + std::to_string(now.samples));
      return false;
    }
    if (saved.seed != now.seed || saved.shuffle != now.shuffle ||
        saved.dropLast != now.dropLast) {
      auto flags = [](const CheckpointInfo &info) {
        return "--seed " + std::to_string(info.seed) +
               (info.shuffle ? "" : " --no-shuffle") +
               (info.dropLast ? " --drop-last" : "");
      };
      printError(prefix + " continues the data order of " + flags(saved) +
                 "; resume with the same flags, not " + flags(now));
      return false;
    }
    if (saved.step > options.steps) {
      printError(prefix + " is at step " + std::to_string(saved.step) +
                 ", past --steps " + std::to_string(options.steps));
      return false;
    }
    return true;
  }

  const Options &options;
  const kiln_bundle_t *bundle;
  Dataset dataset;
  StepEntry trainStep, accumulateStep;
  int lrOutput = -1, gradNormOutput = -1, lossScaleOutput = -1;
  long gradAccum = 1;
  int64_t batchSize = 0;
  std::vector<NamedArray> batch;
  std::vector<kiln_tensor_t> batchTensors;
  Session session{nullptr, kiln_session_release};
  uint64_t fingerprint = 0;
  std::unique_ptr<DataStream> stream;
  /// The stream's cursor after the last micro-batch run.
  StreamCursor consumed;
  /// After `session`, so that it stops before the session goes.
  std::unique_ptr<BatchLoader> loader;
  MetricsFile metrics;
  TensorBoardWriter tensorboard;
  ProgressReporter progress;
  /// Held by rank 0 from checkOutputs to the end of the run.
  CheckpointLock checkpointLock;
  bool reportedNonfinite = false;
  /// The step running, from 1, for errors.
  long currentStep = 0;
  const kiln_distributed_info_t &ranks = distributedInfo();
};

} // namespace

bool train(const Options &options, const kiln_bundle_t *bundle) {
  return Trainer(options, bundle).run();
}

} // namespace kiln::run
