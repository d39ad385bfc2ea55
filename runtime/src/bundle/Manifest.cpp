//===- Manifest.cpp - checking and describing a bundle's manifest ---------===//

#include "kiln/runtime/Manifest.h"

// The rows of a block of the layer-norm backward's partial sums.
#include "kiln/abi/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace kiln::runtime {

namespace bp = kiln::bundle;

namespace {

/// Sizes above this are refused, so sums of sizes and offsets cannot wrap.
constexpr uint64_t kMaxByteSize = uint64_t(1) << 62;
/// The largest gemm size, leading dimension or batch stride (in elements):
/// below 2^31, so a product of two fits in 62 bits.
constexpr int64_t kMaxGemmDim = (int64_t(1) << 31) - 1;
/// Attention kernels run a row of blocks per head (CUDA's grid.y limit),
/// and count rows in int tiles of 64 that must not overflow.
constexpr int64_t kMaxAttentionHeads = 65535;
constexpr int64_t kMaxAttentionRows = int64_t(1) << 30;
/// Layer-norm kernels launch a block per 8 or 32 rows and a thread per
/// column in blocks of 256, which this keeps far inside CUDA's grid.x limit
/// (2^31 - 1); rows times cols is at most 2^60 too, so that every f32
/// tensor's byte size is at most 2^62.
constexpr int64_t kMaxLayerNormDim = (int64_t(1) << 31) - 1;
constexpr int64_t kMaxLayerNormElements = int64_t(1) << 60;

/// Whether [offset, offset + size) lies inside [0, extent).
bool rangeInside(uint64_t offset, uint64_t size, uint64_t extent) {
  return offset <= extent && size <= extent - offset;
}

bool hasNul(const std::string &text) {
  return text.find('\0') != std::string::npos;
}

} // namespace

bool tensorByteSize(const bp::TensorSpec &spec, uint64_t &bytes) {
  uint64_t size = elementTypeSize(spec.element_type());
  if (size == 0)
    return false;
  for (int64_t dim : spec.shape()) {
    if (dim < 0)
      return false;
    if (dim != 0 && size > kMaxByteSize / static_cast<uint64_t>(dim))
      return false;
    size *= static_cast<uint64_t>(dim);
  }
  bytes = size;
  return true;
}

std::string describeTensorType(int elementType, const int64_t *shape,
                               size_t rank) {
  std::string text = elementTypeName(elementType);
  text += '[';
  for (size_t i = 0; i < rank; ++i) {
    if (i > 0)
      text += ',';
    text += std::to_string(shape[i]);
  }
  text += ']';
  return text;
}

std::string describeTensorType(const bp::TensorSpec &spec) {
  return describeTensorType(spec.element_type(), spec.shape().data(),
                            static_cast<size_t>(spec.shape_size()));
}

uint32_t arenaAlignment(const bp::EntryPoint &entry) {
  return entry.arena_alignment() == 0 ? 64 : entry.arena_alignment();
}

namespace {

/// Checks one manifest against the section table it came with.
class ManifestValidator {
public:
  ManifestValidator(const bp::Manifest &manifest,
                    const std::vector<SectionEntry> &sections)
      : manifest(manifest), sections(sections) {}

  Status validate() {
    KILN_RETURN_IF_ERROR(validateParameters());
    KILN_RETURN_IF_ERROR(validateTargets());
    KILN_RETURN_IF_ERROR(validateMetadata());
    if (manifest.entry_points_size() == 0)
      return formatError("manifest has no entry points");
    std::set<std::string> names;
    for (int i = 0; i < manifest.entry_points_size(); ++i) {
      const bp::EntryPoint &entry = manifest.entry_points(i);
      std::string what = strCat("entry point ", i);
      KILN_RETURN_IF_ERROR(validateName(entry.name(), what, names));
      KILN_RETURN_IF_ERROR(validateEntryPoint(entry).withContext(
          strCat("entry point '", entry.name(), "'")));
    }
    return Status();
  }

private:
  /// A name must be non-empty, free of NUL bytes and unique in `seen`.
  static Status validateName(const std::string &name, const std::string &what,
                             std::set<std::string> &seen) {
    if (name.empty())
      return formatError(what, " has an empty name");
    if (hasNul(name))
      return formatError(what, " has a name with a NUL byte");
    if (!seen.insert(name).second)
      return formatError(what, ": the name '", name, "' is used twice");
    return Status();
  }

  static Status validateTensor(const bp::TensorSpec &tensor,
                               const std::string &what,
                               std::set<std::string> &names, uint64_t &bytes) {
    KILN_RETURN_IF_ERROR(validateName(tensor.name(), what, names));
    std::string named = strCat(what, " '", tensor.name(), "'");
    if (elementTypeSize(tensor.element_type()) == 0)
      return formatError(named, " has unknown element type ",
                         tensor.element_type());
    if (tensor.shape_size() > kMaxRank)
      return formatError(named, " has rank ", tensor.shape_size(),
                         ", more than ", kMaxRank);
    for (int d = 0; d < tensor.shape_size(); ++d)
      if (tensor.shape(d) < 0)
        return formatError(named, " has negative dimension ", d, " (",
                           tensor.shape(d), ")");
    if (!tensorByteSize(tensor, bytes))
      return formatError(named, " of type ", describeTensorType(tensor),
                         " is larger than 2^62 bytes");
    return Status();
  }

  Status validateParameters() {
    if (manifest.parameters_size() == 0)
      return Status();
    uint32_t index = manifest.weights_section();
    if (index >= sections.size() ||
        sections[index].kind != static_cast<uint32_t>(SectionKind::Weights))
      return formatError("manifest: weights_section ", index,
                         " is not a weights section of the ", sections.size(),
                         "-section table");
    uint64_t weightsSize = sections[index].size;
    uint64_t spaceSize = manifest.parameter_bytes() == 0
                             ? weightsSize
                             : manifest.parameter_bytes();
    if (spaceSize < weightsSize || spaceSize > kMaxByteSize)
      return formatError("manifest: parameter_bytes ", spaceSize,
                         " is below the weights section's ", weightsSize,
                         " bytes or above 2^62");
    std::set<std::string> names;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    uint32_t shardRanks = 0;
    for (int i = 0; i < manifest.parameters_size(); ++i) {
      const bp::Parameter &parameter = manifest.parameters(i);
      uint64_t bytes = 0;
      KILN_RETURN_IF_ERROR(validateTensor(
          parameter.tensor(), strCat("parameter ", i), names, bytes));
      std::string what =
          strCat("parameter ", i, " '", parameter.tensor().name(), "'");
      if (parameter.size_bytes() != bytes)
        return formatError(what, ": size_bytes ", parameter.size_bytes(),
                           " does not match its type ",
                           describeTensorType(parameter.tensor()), " (", bytes,
                           " bytes)");
      if (parameter.weights_offset() % kSectionAlignment != 0)
        return formatError(what, ": weights_offset ",
                           parameter.weights_offset(),
                           " is not a multiple of 64");
      if (parameter.init() == bp::Parameter::WEIGHTS) {
        if (!rangeInside(parameter.weights_offset(), bytes, weightsSize))
          return formatError(what, ": bytes [", parameter.weights_offset(),
                             ", ", parameter.weights_offset() + bytes,
                             ") lie outside the ", weightsSize,
                             "-byte weights section");
      } else if (parameter.init() == bp::Parameter::ZEROS ||
                 parameter.init() == bp::Parameter::EXTERNAL) {
        // No stored value: its storage lies past the weights section.
        if (parameter.weights_offset() < weightsSize ||
            !rangeInside(parameter.weights_offset(), bytes, spaceSize))
          return formatError(what, ": bytes [", parameter.weights_offset(),
                             ", ", parameter.weights_offset() + bytes,
                             ") of a parameter without a stored value lie "
                             "outside [",
                             weightsSize, ", ", spaceSize,
                             "), the parameter space past the weights");
      } else {
        return formatError(what, " has unknown init ",
                           static_cast<int>(parameter.init()));
      }
      if (parameter.fixed() && (parameter.init() == bp::Parameter::EXTERNAL ||
                                parameter.shard_ranks() != 0))
        return formatError(what, " is fixed (the code relies on its value) "
                                 "but has no stored value of its own");
      if (parameter.shard_ranks() != 0) {
        // A rank's shard of an optimizer state (kilnc --shard-optimizer),
        // all over the same ranks.
        if (parameter.trainable() || parameter.tensor().shape_size() != 1 ||
            parameter.tensor().element_type() != bp::F32)
          return formatError(what,
                             ": only 1-D f32 optimizer state can be "
                             "sharded over the ranks (shard_ranks ",
                             parameter.shard_ranks(), ")");
        if (shardRanks != 0 && shardRanks != parameter.shard_ranks())
          return formatError(what, ": sharded over ", parameter.shard_ranks(),
                             " ranks, another parameter over ", shardRanks);
        shardRanks = parameter.shard_ranks();
      }
      if (bytes > 0)
        ranges.emplace_back(parameter.weights_offset(), bytes);
    }
    return validateDisjoint(ranges);
  }

  Status validateDisjoint(std::vector<std::pair<uint64_t, uint64_t>> ranges) {
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first)
        return formatError("parameters overlap in the weights section at "
                           "offset ",
                           ranges[i].first);
    return Status();
  }

  /// Keys follow the rules of names; values are handed out as C strings, so
  /// they must not hold a NUL byte either.
  Status validateMetadata() {
    std::set<std::string> keys;
    for (int i = 0; i < manifest.metadata_size(); ++i) {
      const bp::MetadataEntry &entry = manifest.metadata(i);
      KILN_RETURN_IF_ERROR(
          validateName(entry.key(), strCat("metadata entry ", i), keys));
      if (hasNul(entry.value()))
        return formatError("metadata entry ", i, " '", entry.key(),
                           "' has a value with a NUL byte");
    }
    return Status();
  }

  Status validateTargets() {
    if (manifest.targets_size() == 0)
      return formatError("manifest has no targets");
    std::set<std::string> names;
    for (int i = 0; i < manifest.targets_size(); ++i) {
      const bp::Target &target = manifest.targets(i);
      KILN_RETURN_IF_ERROR(
          validateName(target.name(), strCat("target ", i), names));
      KILN_RETURN_IF_ERROR(validateTarget(target).withContext(
          strCat("target '", target.name(), "'")));
    }
    return Status();
  }

  Status validateTarget(const bp::Target &target) {
    uint32_t index = target.code_section();
    if (index >= sections.size() || !isCodeSection(sections[index].kind))
      return formatError("code_section ", index,
                         " is not a code section of the ", sections.size(),
                         "-section table");
    bool cpu = isCpuTarget(target);
    if (cpu && target.images_size() > 0)
      return formatError("holds CPU code and also lists CUDA images");
    if (!cpu && target.images_size() == 0)
      return formatError("lists no code images");
    std::set<std::string> images;
    for (int i = 0; i < target.images_size(); ++i)
      KILN_RETURN_IF_ERROR(validateImage(target.images(i), images)
                               .withContext(strCat("image ", i)));
    // The CPU's code is at least the entry points; a CUDA module may define
    // no kernel at all (a model whose values all folded away).
    if (cpu && target.kernels_size() == 0)
      return formatError("lists no kernels");
    std::set<std::string> kernels;
    for (int k = 0; k < target.kernels_size(); ++k)
      KILN_RETURN_IF_ERROR(
          validateName(target.kernels(k), strCat("kernel ", k), kernels));
    return Status();
  }

  /// A CUDA image: a known format, an architecture named once per format,
  /// and a section of the matching kind.
  Status validateImage(const bp::CodeImage &image,
                       std::set<std::string> &seen) {
    SectionKind kind;
    if (image.format() == bp::CodeImage::CUBIN)
      kind = SectionKind::CudaCubin;
    else if (image.format() == bp::CodeImage::PTX)
      kind = SectionKind::CudaPtx;
    else
      return formatError("has unknown format ",
                         static_cast<int>(image.format()));
    KILN_RETURN_IF_ERROR(validateName(
        strCat(sectionKindName(static_cast<uint32_t>(kind)), " ", image.arch()),
        "its architecture", seen));
    if (image.arch().empty() || hasNul(image.arch()))
      return formatError("has an empty or malformed architecture");
    uint32_t index = image.section();
    if (index >= sections.size() ||
        sections[index].kind != static_cast<uint32_t>(kind))
      return formatError("section ", index, " is not a ",
                         sectionKindName(static_cast<uint32_t>(kind)),
                         " section of the ", sections.size(), "-section table");
    return Status();
  }

  bool isCpuTarget(const bp::Target &target) const {
    uint32_t index = target.code_section();
    return index < sections.size() &&
           sections[index].kind == static_cast<uint32_t>(SectionKind::CpuCode);
  }

  const bp::Target *findTarget(const std::string &name) const {
    for (const bp::Target &target : manifest.targets())
      if (target.name() == name)
        return &target;
    return nullptr;
  }

  static Status validateArena(uint32_t alignment, uint64_t bytes) {
    if (alignment != 0 &&
        ((alignment & (alignment - 1)) != 0 || alignment > kMaxArenaAlignment))
      return formatError("arena_alignment ", alignment,
                         " is not a power of two up to ", kMaxArenaAlignment);
    if (bytes > kMaxByteSize)
      return formatError("arena of ", bytes,
                         " bytes is larger than 2^62 bytes");
    return Status();
  }

  Status validateEntryPoint(const bp::EntryPoint &entry) {
    KILN_RETURN_IF_ERROR(
        validateArena(entry.arena_alignment(), entry.arena_bytes()));
    Buffers buffers;
    KILN_RETURN_IF_ERROR(
        validateTensors(entry.inputs(), "input", buffers.inputBytes));
    KILN_RETURN_IF_ERROR(
        validateTensors(entry.outputs(), "output", buffers.outputBytes));
    buffers.arenaBytes = entry.arena_bytes();
    for (int c = 0; c < entry.commands_size(); ++c)
      KILN_RETURN_IF_ERROR(validateCpuCommand(entry.commands(c), buffers)
                               .withContext(strCat("command ", c)));
    std::set<std::string> programs;
    for (int p = 0; p < entry.programs_size(); ++p) {
      const bp::Program &program = entry.programs(p);
      std::string what =
          strCat("program ", p, " (target '", program.target(), "')");
      const bp::Target *target = findTarget(program.target());
      if (!target || isCpuTarget(*target))
        return formatError(what, " does not name a CUDA target");
      if (!programs.insert(program.target()).second)
        return formatError(what, ": the target has two programs");
      KILN_RETURN_IF_ERROR(
          validateArena(program.arena_alignment(), program.arena_bytes())
              .withContext(what));
      buffers.arenaBytes = program.arena_bytes();
      Collectives collectives;
      for (int c = 0; c < program.commands_size(); ++c)
        KILN_RETURN_IF_ERROR(validateCudaCommand(program.commands(c), c,
                                                 *target, buffers, collectives)
                                 .withContext(strCat(what, " command ", c)));
      if (!collectives.outstanding.empty()) {
        const auto &[request, started] = *collectives.outstanding.begin();
        return formatError(what, ": request ", request, " (the ", started.what,
                           " of command ", started.command,
                           ") is still outstanding at the end of the program");
      }
    }
    for (const bp::Target &target : manifest.targets())
      if (!isCpuTarget(target) && !programs.count(target.name()))
        return formatError("has no program for target '", target.name(), "'");
    return Status();
  }

  Status validateTensors(
      const google::protobuf::RepeatedPtrField<bp::TensorSpec> &tensors,
      const char *kind, std::vector<uint64_t> &bytes) {
    std::set<std::string> names;
    for (int i = 0; i < tensors.size(); ++i) {
      uint64_t size = 0;
      KILN_RETURN_IF_ERROR(
          validateTensor(tensors[i], strCat(kind, " ", i), names, size));
      bytes.push_back(size);
    }
    return Status();
  }

  /// The sizes of what a command's buffers may refer to.
  struct Buffers {
    std::vector<uint64_t> inputBytes, outputBytes;
    uint64_t arenaBytes = 0;
  };

  /// The collectives of a CUDA program so far: the requests it used, and
  /// those not yet waited for, with what each is and the buffers it reads
  /// or writes.
  struct Collectives {
    struct Started {
      int command;
      const char *what;
      std::vector<bp::BufferRef> buffers;
    };
    std::map<uint32_t, int> used;
    std::map<uint32_t, Started> outstanding;
  };

  Status validateCpuCommand(const bp::Command &command,
                            const Buffers &buffers) {
    if (command.command_case() != bp::Command::kKernel)
      return formatError("is not a kernel call (the CPU program runs only "
                         "kernel calls)");
    const bp::KernelCall &call = command.kernel();
    if (call.symbol().empty() || hasNul(call.symbol()))
      return formatError("has an empty or malformed kernel symbol");
    bool cpuTargets = false;
    for (const bp::Target &target : manifest.targets()) {
      if (!isCpuTarget(target))
        continue;
      cpuTargets = true;
      const auto &kernels = target.kernels();
      if (std::find(kernels.begin(), kernels.end(), call.symbol()) ==
          kernels.end())
        return formatError("calls kernel '", call.symbol(), "', which target '",
                           target.name(), "' does not list");
    }
    if (!cpuTargets)
      return formatError("is a CPU kernel call, but the bundle has no CPU "
                         "target");
    for (int b = 0; b < call.buffers_size(); ++b)
      KILN_RETURN_IF_ERROR(validateBuffer(call.buffers(b), buffers)
                               .withContext(strCat("(kernel '", call.symbol(),
                                                   "') buffer ", b)));
    return Status();
  }

  /// Command `index` of a CUDA program; `collectives` tracks its
  /// all-reduces, whose buffers no command may touch while they run.
  Status validateCudaCommand(const bp::Command &command, int index,
                             const bp::Target &target, const Buffers &buffers,
                             Collectives &collectives) {
    switch (command.command_case()) {
    case bp::Command::kLaunch:
      return validateLaunch(command.launch(), target, buffers, collectives);
    case bp::Command::kGemm:
      return validateGemm(command.gemm(), buffers, collectives);
    case bp::Command::kAttention:
      return validateAttention(command.attention(), buffers, collectives);
    case bp::Command::kLayerNorm:
      return validateLayerNorm(command.layer_norm(), buffers, collectives);
    case bp::Command::kAllReduceMean:
      return validateAllReduce(command.all_reduce_mean(), index, buffers,
                               collectives);
    case bp::Command::kShard:
      return validateShard(command.shard(), index, buffers, collectives);
    case bp::Command::kCollectiveWait: {
      uint32_t request = command.collective_wait().request();
      if (!collectives.outstanding.erase(request))
        return formatError("waits for request ", request,
                           ", which is not outstanding");
      return Status();
    }
    default:
      return formatError("is not a kernel launch, a gemm, an attention, a "
                         "layer norm, an all-reduce, a shard collective or a "
                         "collective wait");
    }
  }

  /// Whether two buffers share a byte: the same input, output or
  /// parameter (the arena is one space), overlapping ranges.
  static bool overlaps(const bp::BufferRef &a, const bp::BufferRef &b) {
    if (a.kind() != b.kind() ||
        (a.kind() != bp::BufferRef::ARENA && a.index() != b.index()) ||
        a.size() == 0 || b.size() == 0)
      return false;
    return a.offset() < b.offset() + b.size() &&
           b.offset() < a.offset() + a.size();
  }

  /// `buffer` (`what` of a command) must not touch the bytes of a
  /// collective still in flight, which the communication stream is reading
  /// or rewriting; the offsets are inside their buffers, so the sums cannot
  /// wrap.
  static Status checkNotReducing(const bp::BufferRef &buffer,
                                 const std::string &what,
                                 const Collectives &collectives) {
    for (const auto &[request, started] : collectives.outstanding)
      for (const bp::BufferRef &busy : started.buffers)
        if (overlaps(buffer, busy))
          return formatError(what, " touches the buffer of request ", request,
                             " (the ", started.what, " of command ",
                             started.command, "), which is still outstanding");
    return Status();
  }

  /// A new request must be nonzero and unused in the program.
  static Status checkNewRequest(uint32_t request, const char *what,
                                const Collectives &collectives) {
    if (request == 0)
      return formatError(what, " has request 0 (requests count from 1)");
    auto outstanding = collectives.outstanding.find(request);
    if (outstanding != collectives.outstanding.end())
      return formatError(what, " starts request ", request,
                         ", which is already outstanding (command ",
                         outstanding->second.command, ")");
    auto used = collectives.used.find(request);
    if (used != collectives.used.end())
      return formatError(what, " starts request ", request, ", which command ",
                         used->second,
                         " used already (requests are unique in a program)");
    return Status();
  }

  Status validateShard(const bp::ShardCollective &shard, int index,
                       const Buffers &buffers, Collectives &collectives) {
    const char *what =
        shard.kind() == bp::ShardCollective::REDUCE_SCATTER_MEAN
            ? "reduce-scatter"
        : shard.kind() == bp::ShardCollective::ALL_GATHER  ? "all-gather"
        : shard.kind() == bp::ShardCollective::LOCAL_SHARD ? "local shard"
                                                           : nullptr;
    if (!what)
      return formatError("shard collective has unknown kind ",
                         static_cast<int>(shard.kind()));
    uint64_t count = shard.count();
    if (shard.ranks() == 0 || shard.ranks() > 65536)
      return formatError(what, " over ", shard.ranks(), " ranks (1 to 65536)");
    if (count == 0 || count > kMaxByteSize / 4 / shard.ranks())
      return formatError(what, " has count ", count,
                         " (at least 1, and all ranks' values below 2^62 "
                         "bytes)");
    bool gathers = shard.kind() == bp::ShardCollective::ALL_GATHER;
    uint64_t shardBytes = count * 4, wholeBytes = shardBytes * shard.ranks();
    const bp::BufferRef &input = shard.input(), &output = shard.output();
    KILN_RETURN_IF_ERROR(
        validateBuffer(input, buffers).withContext(strCat(what, " input")));
    KILN_RETURN_IF_ERROR(
        validateBuffer(output, buffers).withContext(strCat(what, " output")));
    if (input.size() != (gathers ? shardBytes : wholeBytes) ||
        output.size() != (gathers ? wholeBytes : shardBytes))
      return formatError(what, " of ", count, " f32 values per rank over ",
                         shard.ranks(), " ranks has an input of ", input.size(),
                         " and an output of ", output.size(), " bytes, not ",
                         gathers ? shardBytes : wholeBytes, " and ",
                         gathers ? wholeBytes : shardBytes);
    if (overlaps(input, output))
      return formatError(what, " input and output overlap");
    KILN_RETURN_IF_ERROR(
        checkNotReducing(input, strCat(what, " input"), collectives));
    KILN_RETURN_IF_ERROR(
        checkNotReducing(output, strCat(what, " output"), collectives));
    uint32_t request = shard.request();
    if (shard.kind() == bp::ShardCollective::LOCAL_SHARD) {
      if (request != 0)
        return formatError("local shard has request ", request,
                           " (a copy in stream order has none: 0)");
      return Status();
    }
    KILN_RETURN_IF_ERROR(checkNewRequest(request, what, collectives));
    collectives.used[request] = index;
    collectives.outstanding[request] = {index, what, {input, output}};
    return Status();
  }

  Status validateAllReduce(const bp::AllReduceMean &allReduce, int index,
                           const Buffers &buffers, Collectives &collectives) {
    if (allReduce.element_type() != bp::F32)
      return formatError("all-reduce has element type ",
                         allReduce.element_type(), " (f32 expected)");
    uint64_t count = allReduce.count();
    if (count == 0 || count > kMaxByteSize / 4)
      return formatError("all-reduce has count ", count, " (1 to 2^60 values)");
    const bp::BufferRef &buffer = allReduce.buffer();
    KILN_RETURN_IF_ERROR(
        validateBuffer(buffer, buffers).withContext("all-reduce buffer"));
    if (buffer.size() != count * 4)
      return formatError("all-reduce of ", count,
                         " f32 values has a buffer of ", buffer.size(),
                         " bytes, not ", count * 4);
    uint32_t request = allReduce.request();
    KILN_RETURN_IF_ERROR(checkNewRequest(request, "all-reduce", collectives));
    KILN_RETURN_IF_ERROR(
        checkNotReducing(buffer, "all-reduce buffer", collectives));
    collectives.used[request] = index;
    collectives.outstanding[request] = {index, "all-reduce", {buffer}};
    return Status();
  }

  Status validateLaunch(const bp::KernelLaunch &launch,
                        const bp::Target &target, const Buffers &buffers,
                        const Collectives &collectives) {
    if (launch.kernel() >= static_cast<uint32_t>(target.kernels_size()))
      return formatError("launches kernel ", launch.kernel(), " of ",
                         target.kernels_size());
    const std::string &name = target.kernels(static_cast<int>(launch.kernel()));
    if (launch.grid_size() != 3 || launch.block_size() != 3)
      return formatError("(kernel '", name,
                         "') needs three grid and three block dimensions");
    uint64_t threads = 1;
    for (int d = 0; d < 3; ++d) {
      if (launch.grid(d) == 0 || launch.block(d) == 0)
        return formatError("(kernel '", name, "') has an empty grid or block");
      threads *= launch.block(d);
    }
    if (threads > 1024)
      return formatError("(kernel '", name, "') has blocks of ", threads,
                         " threads, more than 1024");
    for (int b = 0; b < launch.buffers_size(); ++b) {
      std::string what = strCat("(kernel '", name, "') buffer ", b);
      KILN_RETURN_IF_ERROR(
          validateBuffer(launch.buffers(b), buffers).withContext(what));
      KILN_RETURN_IF_ERROR(
          checkNotReducing(launch.buffers(b), what, collectives));
    }
    return Status();
  }

  /// A gemm's sizes are positive and its matrices, with their leading
  /// dimensions and batch strides, lie inside the buffers they refer to.
  Status validateGemm(const bp::Gemm &gemm, const Buffers &buffers,
                      const Collectives &collectives) {
    int64_t batch = gemm.batch() == 0 ? 1 : gemm.batch();
    if (gemm.m() <= 0 || gemm.n() <= 0 || gemm.k() <= 0 || batch <= 0 ||
        gemm.m() > kMaxGemmDim || gemm.n() > kMaxGemmDim ||
        gemm.k() > kMaxGemmDim || batch > kMaxGemmDim)
      return formatError("gemm has sizes m ", gemm.m(), ", n ", gemm.n(),
                         ", k ", gemm.k(), ", batch ", batch,
                         " (each must be 1 to ", kMaxGemmDim, ")");
    struct Matrix {
      const char *name;
      int elementType;
      int64_t rows, cols, ld, stride;
      const bp::BufferRef &buffer;
    };
    Matrix matrices[] = {
        {"A", gemm.a_type(), gemm.transpose_a() ? gemm.k() : gemm.m(),
         gemm.transpose_a() ? gemm.m() : gemm.k(), gemm.lda(), gemm.stride_a(),
         gemm.a()},
        {"B", gemm.b_type(), gemm.transpose_b() ? gemm.n() : gemm.k(),
         gemm.transpose_b() ? gemm.k() : gemm.n(), gemm.ldb(), gemm.stride_b(),
         gemm.b()},
        {"C", gemm.c_type(), gemm.m(), gemm.n(), gemm.ldc(), gemm.stride_c(),
         gemm.c()}};
    for (const Matrix &matrix : matrices) {
      uint64_t elementBytes = elementTypeSize(matrix.elementType);
      if (matrix.elementType != bp::F32 && matrix.elementType != bp::F16 &&
          matrix.elementType != bp::BF16)
        return formatError("gemm matrix ", matrix.name, " has element type ",
                           matrix.elementType, " (f32, f16 or bf16 expected)");
      // Every product of a batch writes its own C.
      if (matrix.name[0] == 'C' && batch > 1 &&
          matrix.stride < matrix.rows * matrix.ld)
        return formatError("gemm matrix C has batch stride ", matrix.stride,
                           ", so the ", batch,
                           " products of the batch would overlap");
      if (matrix.ld < matrix.cols || matrix.ld > kMaxGemmDim ||
          matrix.stride < 0 || matrix.stride > kMaxGemmDim)
        return formatError("gemm matrix ", matrix.name, " (", matrix.rows,
                           " x ", matrix.cols, ") has leading dimension ",
                           matrix.ld, " and batch stride ", matrix.stride);
      // Elements from the first to one past the last the gemm touches.
      uint64_t span = static_cast<uint64_t>(batch - 1) *
                          static_cast<uint64_t>(matrix.stride) +
                      static_cast<uint64_t>(matrix.rows - 1) *
                          static_cast<uint64_t>(matrix.ld) +
                      static_cast<uint64_t>(matrix.cols);
      if (span > kMaxByteSize / elementBytes ||
          matrix.buffer.size() < span * elementBytes)
        return formatError("gemm matrix ", matrix.name, " needs ", span,
                           " elements, but its buffer has ",
                           matrix.buffer.size(), " bytes");
      std::string what = strCat("gemm matrix ", matrix.name);
      KILN_RETURN_IF_ERROR(
          validateBuffer(matrix.buffer, buffers).withContext(what));
      KILN_RETURN_IF_ERROR(checkNotReducing(matrix.buffer, what, collectives));
    }
    if (gemm.has_bias() && gemm.bias().size() > 0) {
      uint64_t bytes =
          static_cast<uint64_t>(gemm.n()) * elementTypeSize(gemm.c_type());
      if (gemm.bias().size() != bytes)
        return formatError("gemm bias has ", gemm.bias().size(),
                           " bytes, not the ", bytes, " of n = ", gemm.n(),
                           " values of C's type");
      KILN_RETURN_IF_ERROR(
          validateBuffer(gemm.bias(), buffers).withContext("gemm bias"));
      if (overlaps(gemm.bias(), gemm.c()))
        return formatError("gemm bias overlaps matrix C, which the product "
                           "writes while the epilogue reads the bias");
      KILN_RETURN_IF_ERROR(
          checkNotReducing(gemm.bias(), "gemm bias", collectives));
    }
    if (gemm.has_bias_grad() && gemm.bias_grad().size() > 0) {
      if (batch != 1 || (gemm.has_bias() && gemm.bias().size() > 0))
        return formatError(
            "gemm has a bias gradient with batch ", batch,
            gemm.has_bias() && gemm.bias().size() > 0 ? " and a bias" : "",
            " (only a single product without a bias has one)");
      // The epilogue's sums are not scaled: alpha must leave the product
      // unscaled too, or the two would disagree.
      if (gemm.alpha() != 1.0f)
        return formatError("gemm has a bias gradient with alpha ", gemm.alpha(),
                           " (only alpha 1 has one)");
      int64_t count = gemm.bias_grad_of_a() ? gemm.m() : gemm.n();
      uint64_t elementBytes = elementTypeSize(gemm.c_type());
      uint64_t bytes = static_cast<uint64_t>(count) * elementBytes;
      if (gemm.bias_grad().offset() % elementBytes != 0)
        return formatError("gemm bias gradient starts at byte offset ",
                           gemm.bias_grad().offset(),
                           ", not a multiple of its ", elementBytes,
                           "-byte elements");
      if (gemm.bias_grad().size() != bytes)
        return formatError("gemm bias gradient has ", gemm.bias_grad().size(),
                           " bytes, not the ", bytes, " of ",
                           gemm.bias_grad_of_a() ? "m" : "n", " = ", count,
                           " values of C's type");
      KILN_RETURN_IF_ERROR(validateBuffer(gemm.bias_grad(), buffers)
                               .withContext("gemm bias gradient"));
      for (const Matrix &matrix : matrices)
        if (overlaps(gemm.bias_grad(), matrix.buffer))
          return formatError("gemm bias gradient overlaps matrix ", matrix.name,
                             ", which the product reads or "
                             "writes while the epilogue writes the gradient");
      KILN_RETURN_IF_ERROR(checkNotReducing(gemm.bias_grad(),
                                            "gemm bias gradient", collectives));
    }
    return validateGeluEpilogue(gemm, batch, matrices, buffers, collectives);
  }

  /// A GELU epilogue: a single product overwriting C, without a bias
  /// gradient (nor, for the derivative, a bias), whose auxiliary matrix is
  /// dense [m, n] of C's type and overlaps none of the matrices.
  template <typename Matrices>
  Status validateGeluEpilogue(const bp::Gemm &gemm, int64_t batch,
                              const Matrices &matrices, const Buffers &buffers,
                              const Collectives &collectives) {
    bool hasAux = gemm.has_aux() && gemm.aux().size() > 0;
    if (gemm.epilogue() == bp::GEMM_NONE) {
      if (hasAux)
        return formatError("gemm has an auxiliary matrix but no GELU "
                           "epilogue");
      return Status();
    }
    if (gemm.epilogue() != bp::GEMM_GELU && gemm.epilogue() != bp::GEMM_DGELU)
      return formatError("gemm has epilogue ", gemm.epilogue(),
                         " (none, GELU or its derivative expected)");
    const char *kind = gemm.epilogue() == bp::GEMM_GELU ? "GELU" : "DGELU";
    bool hasBias = gemm.has_bias() && gemm.bias().size() > 0;
    if (batch != 1 || gemm.beta() != 0.0f ||
        (gemm.has_bias_grad() && gemm.bias_grad().size() > 0) ||
        (gemm.epilogue() == bp::GEMM_DGELU && hasBias))
      return formatError("gemm has a ", kind, " epilogue with batch ", batch,
                         ", beta ", gemm.beta(),
                         " (only a single product overwriting C, without a "
                         "bias gradient",
                         gemm.epilogue() == bp::GEMM_DGELU ? " or a bias" : "",
                         ", has one)");
    if (gemm.epilogue() == bp::GEMM_DGELU && !hasAux)
      return formatError("gemm has a DGELU epilogue without its auxiliary "
                         "matrix (the GELU's input)");
    if (!hasAux)
      return Status();
    uint64_t elementBytes = elementTypeSize(gemm.c_type());
    uint64_t bytes = static_cast<uint64_t>(gemm.m()) *
                     static_cast<uint64_t>(gemm.n()) * elementBytes;
    if (gemm.aux().size() != bytes || gemm.aux().offset() % elementBytes != 0)
      return formatError("gemm auxiliary matrix has ", gemm.aux().size(),
                         " bytes at offset ", gemm.aux().offset(), ", not the ",
                         bytes,
                         " of a dense m x n matrix of C's "
                         "type at a whole element");
    KILN_RETURN_IF_ERROR(validateBuffer(gemm.aux(), buffers)
                             .withContext("gemm auxiliary matrix"));
    for (const auto &matrix : matrices)
      if (overlaps(gemm.aux(), matrix.buffer))
        return formatError("gemm auxiliary matrix overlaps matrix ",
                           matrix.name);
    if (hasBias && overlaps(gemm.aux(), gemm.bias()))
      return formatError("gemm auxiliary matrix overlaps the bias");
    return checkNotReducing(gemm.aux(), "gemm auxiliary matrix", collectives);
  }

  /// An attention's sizes are ones the runtime's kernels take, its tensors
  /// lie inside their buffers, and what it writes overlaps nothing else it
  /// touches.
  Status validateAttention(const bp::Attention &attention,
                           const Buffers &buffers,
                           const Collectives &collectives) {
    int64_t b = attention.batch(), h = attention.heads(),
            q = attention.queries(), k = attention.keys(),
            d = attention.head_size();
    if (b <= 0 || h <= 0 || q <= 0 || k <= 0 || b > kMaxAttentionHeads ||
        h > kMaxAttentionHeads || b * h > kMaxAttentionHeads ||
        q > kMaxAttentionRows || k > kMaxAttentionRows)
      return formatError("attention has batch ", b, ", heads ", h, ", queries ",
                         q, ", keys ", k, " (each must be ",
                         "positive, queries and keys at most ",
                         kMaxAttentionRows, ", batch times heads at most ",
                         kMaxAttentionHeads, ")");
    if (d != 16 && d != 32 && d != 64 && d != 128)
      return formatError("attention has head size ", d,
                         " (the kernels take 16, 32, 64 or 128)");
    if (attention.element_type() != bp::BF16 &&
        attention.element_type() != bp::F16)
      return formatError("attention has element type ",
                         attention.element_type(), " (bf16 or f16 expected)");
    if (attention.causal() && q != k)
      return formatError("attention is causal over ", q, " queries and ", k,
                         " keys (they must match)");
    if (!std::isfinite(attention.scale()))
      return formatError("attention has scale ", attention.scale());
    // The types of out and its gradient, and of the three input gradients:
    // f32 from the runtime's kernels, the element type from cuDNN's.
    const bool cudnn = attention.engine() == bp::CUDNN;
    if (!cudnn && attention.engine() != bp::KILN_KERNELS)
      return formatError("attention has engine ", attention.engine(),
                         " (the runtime's kernels or cuDNN expected)");
    auto typeOf = [](int type) {
      return type == bp::ELEMENT_TYPE_UNSPECIFIED ? int(bp::F32) : type;
    };
    const int outType = typeOf(attention.out_type());
    const int inputGradType = typeOf(attention.input_grad_type());
    const int wanted = cudnn ? attention.element_type() : int(bp::F32);
    for (auto [name, type] : {std::pair<const char *, int>{"out", outType},
                              {"input gradient", inputGradType}})
      if (type != wanted && (attention.backward() || name[0] == 'o'))
        return formatError(
            "attention has ", name, " type ", elementTypeName(type), " (",
            cudnn ? "cuDNN reads and writes every matrix in the element type"
                  : "the runtime's kernels write f32",
            ": ", elementTypeName(wanted), " expected)");
    if (cudnn && (attention.masked_fill() || attention.causal_fill()))
      return formatError("attention on cuDNN with masked_fill or causal_fill "
                         "is not supported (cuDNN adds the mask; the "
                         "runtime's kernels take them)");
    // Grouped key and value heads (cuDNN's only): each serves heads / kh
    // query heads.
    const int64_t kh = attention.key_heads() ? attention.key_heads() : h;
    if (kh < 0 || kh > h || h % kh != 0 || (kh != h && !cudnn))
      return formatError("attention has ", attention.key_heads(),
                         " key heads for ", h, " heads (",
                         cudnn ? "a divisor of them"
                               : "as many: the runtime's kernels do not "
                                 "group heads",
                         " expected)");
    struct Tensor {
      const char *name;
      const bp::AttentionTensor *tensor;
      int64_t heads, rows, columns;
      uint64_t elementBytes;
      bool written;
    };
    uint64_t narrow = elementTypeSize(attention.element_type());
    std::vector<Tensor> tensors = {
        {"query", &attention.query(), h, q, d, narrow, false},
        {"key", &attention.key(), kh, k, d, narrow, false},
        {"value", &attention.value(), kh, k, d, narrow, false},
        {"out", &attention.out(), h, q, d, elementTypeSize(outType),
         !attention.backward()}};
    bool masked = attention.has_mask() && attention.mask().buffer().size() > 0;
    if (attention.masked_fill() && (!attention.backward() || !masked))
      return formatError("attention is masked_fill ",
                         attention.backward() ? "without a mask"
                                              : "in the forward",
                         " (only the backward with a mask takes it)");
    if (attention.causal_fill() && (!attention.backward() || q != k))
      return formatError("attention is causal_fill ",
                         attention.backward()
                             ? strCat("over ", q, " queries and ", k, " keys")
                             : std::string("in the forward"),
                         " (only the backward with as many queries as keys "
                         "takes it)");
    if (masked)
      tensors.push_back({"mask", &attention.mask(), h, q, k, 4, false});
    if (attention.backward()) {
      uint64_t gradBytes = elementTypeSize(inputGradType);
      tensors.push_back({"grad", &attention.grad(), h, q, d,
                         elementTypeSize(outType), false});
      tensors.push_back(
          {"query_grad", &attention.query_grad(), h, q, d, gradBytes, true});
      tensors.push_back(
          {"key_grad", &attention.key_grad(), kh, k, d, gradBytes, true});
      tensors.push_back(
          {"value_grad", &attention.value_grad(), kh, k, d, gradBytes, true});
    }
    // (name, buffer, written) of everything the command touches.
    std::vector<std::tuple<std::string, const bp::BufferRef *, bool>> touched;
    for (const Tensor &t : tensors) {
      const bp::AttentionTensor &tensor = *t.tensor;
      std::string what = strCat("attention ", t.name);
      int64_t strides[] = {tensor.batch_stride(), tensor.head_stride(),
                           tensor.row_stride()};
      if (std::any_of(std::begin(strides), std::end(strides),
                      [](int64_t s) { return s < 0 || s > kMaxGemmDim; }))
        return formatError(what, " has strides ", strides[0], ", ", strides[1],
                           ", ", strides[2], " (each 0 to ", kMaxGemmDim, ")");
      // Elements from the first to one past the last the kernels touch.
      uint64_t span = static_cast<uint64_t>(b - 1) * strides[0] +
                      static_cast<uint64_t>(t.heads - 1) * strides[1] +
                      static_cast<uint64_t>(t.rows - 1) * strides[2] +
                      static_cast<uint64_t>(t.columns);
      if (span > kMaxByteSize / t.elementBytes ||
          tensor.buffer().size() < span * t.elementBytes)
        return formatError(what, " needs ", span, " elements, but its buffer ",
                           "has ", tensor.buffer().size(), " bytes");
      // The kernels read and write whole elements: a misaligned one faults
      // on the GPU.
      if (tensor.buffer().offset() % t.elementBytes != 0)
        return formatError(what, " starts at byte offset ",
                           tensor.buffer().offset(), ", not a multiple of its ",
                           t.elementBytes, "-byte elements");
      if (t.written &&
          (strides[2] < t.columns || strides[1] < t.rows * strides[2] ||
           strides[0] < t.heads * strides[1]))
        return formatError(what, " is written with strides ", strides[0], ", ",
                           strides[1], ", ", strides[2],
                           ", so its elements would overlap");
      touched.emplace_back(what, &tensor.buffer(), t.written);
    }
    // Two statistics per query row (its shift and its sum), one delta.
    uint64_t rowCount = static_cast<uint64_t>(b * h * q);
    std::vector<std::tuple<const char *, const bp::BufferRef *, uint64_t>>
        rows = {{"stats", &attention.stats(), 2}};
    if (attention.backward())
      rows.emplace_back("delta", &attention.delta(), 1);
    for (auto [name, buffer, perRow] : rows) {
      if (buffer->size() != perRow * rowCount * 4)
        return formatError("attention ", name, " has ", buffer->size(),
                           " bytes, not the ", perRow * rowCount * 4, " of ",
                           perRow * rowCount, " f32 values (", perRow,
                           " per query row)");
      if (buffer->offset() % 4 != 0)
        return formatError("attention ", name, " starts at byte offset ",
                           buffer->offset(), ", not a multiple of 4");
      bool written = !attention.backward() || std::string(name) == "delta";
      touched.emplace_back(strCat("attention ", name), buffer, written);
    }
    return validateTouched(touched, "the attention", buffers, collectives);
  }

  /// A layer norm's sizes are ones the runtime's kernels take, each buffer
  /// its direction uses holds exactly the dense tensor of its shape (the
  /// partial sums at least) at whole elements, those it does not use are
  /// unset, a forward's sum is set exactly when its residual is, a
  /// backward's output (the rounded input gradient) and 16-bit output type
  /// are set together, and what it writes overlaps nothing else it touches.
  Status validateLayerNorm(const bp::LayerNorm &layerNorm,
                           const Buffers &buffers,
                           const Collectives &collectives) {
    const bool backward = layerNorm.backward();
    const char *kind = backward ? "layer norm backward" : "layer norm";
    const int64_t rows = layerNorm.rows(), cols = layerNorm.cols();
    if (rows <= 0 || cols <= 0 || rows > kMaxLayerNormDim ||
        cols > kMaxLayerNormDim || rows > kMaxLayerNormElements / cols)
      return formatError(kind, " has rows ", rows, ", cols ", cols,
                         " (each 1 to ", kMaxLayerNormDim,
                         ", rows times cols at most 2^60)");
    const float epsilon = layerNorm.epsilon();
    if (!std::isfinite(epsilon) || epsilon <= 0)
      return formatError(kind, " has epsilon ", epsilon,
                         " (finite and positive expected)");
    const int outputType = layerNorm.output_type();
    if (!backward && outputType != bp::F32 && outputType != bp::BF16 &&
        outputType != bp::F16)
      return formatError(kind, " has output type ", outputType,
                         " (f32, bf16 or f16 expected)");

    // Unset or of size 0: none.
    auto isSet = [](bool has, const bp::BufferRef &buffer) {
      return has && buffer.size() > 0;
    };
    // The backward's output is its input gradient rounded to 16 bits.
    const bool rounded =
        backward && isSet(layerNorm.has_output(), layerNorm.output());
    if (rounded && outputType != bp::BF16 && outputType != bp::F16)
      return formatError(kind, " has output type ", outputType,
                         " (bf16 or f16 expected: its output is the input ",
                         "gradient rounded to 16 bits)");
    if (backward && !rounded && outputType != bp::ELEMENT_TYPE_UNSPECIFIED)
      return formatError(kind, " has output type ", outputType,
                         " but no output (the output type is set exactly ",
                         "when the output is)");
    // A forward's copy is its f32 output rounded to 16 bits.
    const bool copied =
        !backward && isSet(layerNorm.has_copy(), layerNorm.copy());
    const int copyType = layerNorm.copy_type();
    if (copied && (outputType != bp::F32 ||
                   (copyType != bp::BF16 && copyType != bp::F16)))
      return formatError(kind, " has output type ", outputType,
                         " and copy type ", copyType,
                         " (f32 and bf16 or f16 expected: its copy is the ",
                         "output rounded to 16 bits)");
    if (!copied && copyType != bp::ELEMENT_TYPE_UNSPECIFIED)
      return formatError(kind, " has copy type ", copyType,
                         " but no copy (the copy type is set exactly when ",
                         "the copy is)");
    const bool residual = isSet(layerNorm.has_residual(), layerNorm.residual());
    if (!backward && residual != isSet(layerNorm.has_sum(), layerNorm.sum()))
      return formatError(kind,
                         residual ? " has a residual but no sum"
                                  : " sets sum without a residual",
                         " (the sum is set exactly when the residual is)");
    // The types of what it reads: unset is f32; 16 bits where a product
    // stored it so, and the command reads it.
    int readTypes[4];
    const struct {
      const char *name;
      int type;
      bool narrowable;
    } reads[] = {
        {"input", layerNorm.input_type(), !backward && residual},
        {"residual", layerNorm.residual_type(), !backward && residual},
        {"grad", layerNorm.grad_type(), backward},
        {"accumulate", layerNorm.accumulate_type(), backward},
    };
    for (int i = 0; i < 4; ++i) {
      int type = reads[i].type == bp::ELEMENT_TYPE_UNSPECIFIED ? bp::F32
                                                               : reads[i].type;
      if (type != bp::F32 &&
          (!reads[i].narrowable || (type != bp::BF16 && type != bp::F16)))
        return formatError(kind, " has ", reads[i].name, " type ", type,
                           " (f32 expected",
                           reads[i].narrowable ? ", or bf16 or f16" : "",
                           backward || reads[i].narrowable
                               ? ")"
                               : ": 16 bits only with a residual)");
      readTypes[i] = type;
    }

    enum class Use { None, Read, MaybeRead, Written, MaybeWritten };
    /// [rows, cols], [cols], or the backward's scratch [ceil(rows / 32), 2,
    /// cols], which may be larger than the kernels need.
    enum class Shape { Matrix, Vector, Partials };
    struct Tensor {
      const char *name;
      bool has;
      const bp::BufferRef &buffer;
      Use use;
      int elementType;
      Shape shape;
    };
    const Use backwardOnly = backward ? Use::Written : Use::None;
    const Tensor tensors[] = {
        {"input", layerNorm.has_input(), layerNorm.input(), Use::Read,
         readTypes[0], Shape::Matrix},
        {"scale", layerNorm.has_scale(), layerNorm.scale(), Use::Read, bp::F32,
         Shape::Vector},
        {"bias", layerNorm.has_bias(), layerNorm.bias(),
         backward ? Use::None : Use::MaybeRead, bp::F32, Shape::Vector},
        {"output", layerNorm.has_output(), layerNorm.output(),
         backward ? Use::MaybeWritten : Use::Written, outputType,
         Shape::Matrix},
        {"grad", layerNorm.has_grad(), layerNorm.grad(),
         backward ? Use::Read : Use::None, readTypes[2], Shape::Matrix},
        {"input_grad", layerNorm.has_input_grad(), layerNorm.input_grad(),
         backwardOnly, bp::F32, Shape::Matrix},
        {"scale_grad", layerNorm.has_scale_grad(), layerNorm.scale_grad(),
         backwardOnly, bp::F32, Shape::Vector},
        {"bias_grad", layerNorm.has_bias_grad(), layerNorm.bias_grad(),
         backwardOnly, bp::F32, Shape::Vector},
        {"partials", layerNorm.has_partials(), layerNorm.partials(),
         backwardOnly, bp::F32, Shape::Partials},
        {"residual", layerNorm.has_residual(), layerNorm.residual(),
         backward ? Use::None : Use::MaybeRead, readTypes[1], Shape::Matrix},
        {"sum", layerNorm.has_sum(), layerNorm.sum(),
         !backward && residual ? Use::Written : Use::None, bp::F32,
         Shape::Matrix},
        {"accumulate", layerNorm.has_accumulate(), layerNorm.accumulate(),
         backward ? Use::MaybeRead : Use::None, readTypes[3], Shape::Matrix},
        {"copy", layerNorm.has_copy(), layerNorm.copy(),
         backward ? Use::None : Use::MaybeWritten, copyType, Shape::Matrix}};
    const int64_t partialBlocks = (rows + KILN_LAYER_NORM_PARTIAL_ROWS - 1) /
                                  KILN_LAYER_NORM_PARTIAL_ROWS;
    const std::vector<int64_t> matrix{rows, cols}, vector{cols},
        partials{partialBlocks, 2, cols};
    // (name, buffer, written) of everything the command touches.
    std::vector<std::tuple<std::string, const bp::BufferRef *, bool>> touched;
    for (const Tensor &t : tensors) {
      std::string what = strCat(kind, " ", t.name);
      bool set = isSet(t.has, t.buffer);
      if (t.use == Use::None) {
        if (set)
          return formatError(kind, " sets ", t.name, ", which it does not use");
        continue;
      }
      if (!set) {
        if (t.use == Use::MaybeRead || t.use == Use::MaybeWritten)
          continue;
        return formatError(kind, " has no ", t.name);
      }
      const std::vector<int64_t> &shape = t.shape == Shape::Matrix   ? matrix
                                          : t.shape == Shape::Vector ? vector
                                                                     : partials;
      uint64_t elementBytes = elementTypeSize(t.elementType);
      uint64_t bytes = elementBytes;
      for (int64_t dim : shape)
        bytes *= static_cast<uint64_t>(dim);
      bool scratch = t.shape == Shape::Partials;
      if (scratch ? t.buffer.size() < bytes : t.buffer.size() != bytes)
        return formatError(
            what, " has ", t.buffer.size(), " bytes, ",
            scratch ? "fewer than" : "not", " the ", bytes, " of ",
            describeTensorType(t.elementType, shape.data(), shape.size()));
      // The kernels read and write whole elements: a misaligned one faults
      // on the GPU.
      if (t.buffer.offset() % elementBytes != 0)
        return formatError(what, " starts at byte offset ", t.buffer.offset(),
                           ", not a multiple of its ", elementBytes,
                           "-byte elements");
      touched.emplace_back(what, &t.buffer,
                           t.use == Use::Written || t.use == Use::MaybeWritten);
    }
    return validateTouched(touched, "the layer norm", buffers, collectives);
  }

  /// The buffers a library command touches, each (what, buffer, whether
  /// it writes it): each lies in what it points into and on no collective
  /// in flight, and none it writes overlaps another it touches.
  Status validateTouched(
      const std::vector<std::tuple<std::string, const bp::BufferRef *, bool>>
          &touched,
      const char *command, const Buffers &buffers,
      const Collectives &collectives) {
    for (size_t i = 0; i < touched.size(); ++i) {
      const auto &[what, buffer, written] = touched[i];
      KILN_RETURN_IF_ERROR(validateBuffer(*buffer, buffers).withContext(what));
      KILN_RETURN_IF_ERROR(checkNotReducing(*buffer, what, collectives));
      for (size_t j = 0; j < touched.size(); ++j)
        if (j != i && written && overlaps(*buffer, *std::get<1>(touched[j])))
          return formatError(what, ", which ", command, " writes, overlaps ",
                             std::get<0>(touched[j]));
    }
    return Status();
  }

  /// The extent of what `buffer` points into: an input, an output, a
  /// parameter or the arena.
  Status bufferExtent(const bp::BufferRef &buffer, const Buffers &buffers,
                      uint64_t &extent) {
    const std::vector<uint64_t> &inputBytes = buffers.inputBytes;
    const std::vector<uint64_t> &outputBytes = buffers.outputBytes;
    uint32_t index = buffer.index();
    switch (buffer.kind()) {
    case bp::BufferRef::INPUT:
      if (index >= inputBytes.size())
        return formatError("refers to input ", index, " of ",
                           inputBytes.size());
      extent = inputBytes[index];
      return Status();
    case bp::BufferRef::OUTPUT:
      if (index >= outputBytes.size())
        return formatError("refers to output ", index, " of ",
                           outputBytes.size());
      extent = outputBytes[index];
      return Status();
    case bp::BufferRef::PARAM:
      if (index >= static_cast<uint32_t>(manifest.parameters_size()))
        return formatError("refers to parameter ", index, " of ",
                           manifest.parameters_size());
      extent = manifest.parameters(static_cast<int>(index)).size_bytes();
      return Status();
    case bp::BufferRef::ARENA:
      extent = buffers.arenaBytes;
      return Status();
    default:
      return formatError("has unknown kind ", static_cast<int>(buffer.kind()));
    }
  }

  Status validateBuffer(const bp::BufferRef &buffer, const Buffers &buffers) {
    uint64_t extent = 0;
    KILN_RETURN_IF_ERROR(bufferExtent(buffer, buffers, extent));
    if (!rangeInside(buffer.offset(), buffer.size(), extent))
      return formatError("bytes [", buffer.offset(), ", +", buffer.size(),
                         ") lie outside the ", extent, " bytes it refers to");
    return Status();
  }

  const bp::Manifest &manifest;
  const std::vector<SectionEntry> &sections;
};

} // namespace

Status validateManifest(const bp::Manifest &manifest,
                        const std::vector<SectionEntry> &sections) {
  return ManifestValidator(manifest, sections).validate();
}

} // namespace kiln::runtime
