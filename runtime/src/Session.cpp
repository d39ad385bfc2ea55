//===- Session.cpp - a bundle made ready to run on the CPU ----------------===//

#include "Session.h"

#include "kiln/runtime/Manifest.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime {

namespace bp = kiln::bundle;

namespace {

/// "a, b, c": the names of `items`, for messages.
template <typename Range, typename NameOf>
std::string joinNames(const Range &items, NameOf nameOf) {
  std::string text;
  for (const auto &item : items) {
    if (!text.empty())
      text += ", ";
    text += nameOf(item);
  }
  return text;
}

std::string
tensorNames(const google::protobuf::RepeatedPtrField<bp::TensorSpec> &specs) {
  std::string names = joinNames(specs, [](const bp::TensorSpec &spec) {
    return "'" + spec.name() + "'";
  });
  return names.empty() ? "none" : names;
}

bool sameShape(const kiln_tensor_t &tensor, const bp::TensorSpec &spec) {
  return tensor.rank == spec.shape_size() &&
         std::equal(spec.shape().begin(), spec.shape().end(), tensor.shape);
}

/// Checks one caller tensor against the spec it names.
Status checkTensor(const char *kind, const kiln_tensor_t &tensor,
                   const bp::TensorSpec &spec) {
  std::string what = strCat(kind, " '", spec.name(), "'");
  std::string expected = describeTensorType(spec);
  if (tensor.rank < 0 || tensor.rank > kMaxRank ||
      (tensor.rank > 0 && !tensor.shape))
    return invalidArgument(what, " has an invalid rank ", tensor.rank,
                           " or no shape; expected ", expected);
  std::string given = describeTensorType(tensor.element_type, tensor.shape,
                                         static_cast<size_t>(tensor.rank));
  if (static_cast<int>(tensor.element_type) != spec.element_type())
    return invalidArgument(what, " has element type ",
                           elementTypeName(tensor.element_type), ", expected ",
                           expected);
  if (!sameShape(tensor, spec))
    return invalidArgument(what, " has type ", given, ", expected ", expected);
  uint64_t bytes = 0;
  tensorByteSize(spec, bytes);
  if (tensor.byte_size != bytes)
    return invalidArgument(what, " has byte_size ", tensor.byte_size, ", but ",
                           expected, " needs ", bytes);
  if (bytes > 0 && !tensor.data)
    return invalidArgument(what, " has no data");
  if (reinterpret_cast<uintptr_t>(tensor.data) %
          elementTypeSize(spec.element_type()) !=
      0)
    return invalidArgument(what, ": data is not aligned to its ",
                           elementTypeSize(spec.element_type()),
                           "-byte elements");
  return Status();
}

} // namespace

Status Session::create(std::shared_ptr<const BundleReader> bundle,
                       const std::string &targetName,
                       std::unique_ptr<Session> &out) {
  std::unique_ptr<Session> session(new Session());
  session->bundle = std::move(bundle);
  const BundleReader &reader = *session->bundle;
  KILN_RETURN_IF_ERROR(
      session->loadCode(targetName).withContext(reader.name()));
  KILN_RETURN_IF_ERROR(session->allocateArena().withContext(reader.name()));
  KILN_RETURN_IF_ERROR(session->mapParameters().withContext(reader.name()));
  const bp::Manifest &manifest = reader.manifest();
  session->plans.resize(static_cast<size_t>(manifest.entry_points_size()));
  for (int i = 0; i < manifest.entry_points_size(); ++i) {
    const bp::EntryPoint &entry = manifest.entry_points(i);
    KILN_RETURN_IF_ERROR(
        session->planEntryPoint(entry, session->plans[static_cast<size_t>(i)])
            .withContext(
                strCat(reader.name(), ": entry point '", entry.name(), "'")));
    session->planIndex[entry.name()] = static_cast<size_t>(i);
  }
  out = std::move(session);
  return Status();
}

Status Session::loadCode(const std::string &targetName) {
  const bp::Manifest &manifest = bundle->manifest();
  int targetIndex = bundle->findTarget(targetName);
  if (targetIndex < 0)
    return notFound(
        "no target '", targetName, "' (targets: ",
        joinNames(manifest.targets(),
                  [](const bp::Target &t) { return "'" + t.name() + "'"; }),
        ")");
  const bp::Target &target = manifest.targets(targetIndex);
  uint32_t sectionIndex = target.code_section();
  if (bundle->sections()[sectionIndex].kind !=
      static_cast<uint32_t>(SectionKind::CpuCode))
    return unsupported("target '", targetName,
                       "' is not CPU code; this runtime runs only CPU code");
  KILN_RETURN_IF_ERROR(CpuCode::load(bundle->sectionBytes(sectionIndex),
                                     strCat("the code of target '", targetName,
                                            "' (section ", sectionIndex, ")"),
                                     code));
  for (const std::string &symbol : target.kernels())
    KILN_RETURN_IF_ERROR(code->lookup(symbol, kernels[symbol]));
  return Status();
}

Status Session::allocateArena() {
  uint64_t bytes = 0;
  uint32_t alignment = static_cast<uint32_t>(kTensorAlignment);
  for (const bp::EntryPoint &entry : bundle->manifest().entry_points()) {
    bytes = std::max<uint64_t>(bytes, entry.arena_bytes());
    alignment = std::max(alignment, arenaAlignment(entry));
  }
  if (bytes > SIZE_MAX)
    return outOfMemory("the arena of ", bytes, " bytes does not fit in memory");
  return AlignedBuffer::allocate(static_cast<size_t>(bytes), arena, alignment)
      .withContext("arena");
}

Status Session::mapParameters() {
  const bp::Manifest &manifest = bundle->manifest();
  if (manifest.parameters_size() == 0)
    return Status();
  uint32_t weightsIndex = manifest.weights_section();
  const SectionEntry &weights = bundle->sections()[weightsIndex];
  uint8_t *base = nullptr;
  if (bundle->fileDescriptor() >= 0 && weights.size > 0) {
    KILN_RETURN_IF_ERROR(weightsMapping.map(bundle->fileDescriptor(),
                                            weights.offset, weights.size,
                                            "weights section"));
    base = weightsMapping.data();
  } else {
    KILN_RETURN_IF_ERROR(AlignedBuffer::allocate(weights.size, weightsCopy)
                             .withContext("weights section"));
    if (weights.size > 0)
      std::memcpy(weightsCopy.data(), bundle->sectionBytes(weightsIndex).data,
                  weights.size);
    base = weightsCopy.data();
  }
  for (int i = 0; i < manifest.parameters_size(); ++i) {
    const bp::Parameter &parameter = manifest.parameters(i);
    parameterData.push_back(base ? base + parameter.weights_offset() : nullptr);
    parameterIndex[parameter.tensor().name()] = static_cast<uint32_t>(i);
  }
  return Status();
}

Status Session::planEntryPoint(const bp::EntryPoint &entry, EntryPlan &plan) {
  plan.entry = &entry;
  for (int i = 0; i < entry.inputs_size(); ++i)
    plan.inputIndex[entry.inputs(i).name()] = static_cast<uint32_t>(i);
  for (int i = 0; i < entry.outputs_size(); ++i)
    plan.outputIndex[entry.outputs(i).name()] = static_cast<uint32_t>(i);
  plan.inputData.resize(static_cast<size_t>(entry.inputs_size()));
  plan.outputData.resize(static_cast<size_t>(entry.outputs_size()));
  plan.inputSeen.resize(plan.inputData.size());
  plan.outputSeen.resize(plan.outputData.size());
  for (const bp::Command &command : entry.commands()) {
    const bp::KernelCall &call = command.kernel();
    // The reader checked that the target lists every kernel a command calls.
    auto kernel = kernels.find(call.symbol());
    if (kernel == kernels.end())
      return internalError("kernel '", call.symbol(), "' was not looked up");
    KernelInvocation invocation;
    invocation.function = kernel->second;
    for (int b = 0; b < call.buffers_size(); ++b) {
      const bp::BufferRef &buffer = call.buffers(b);
      void *pointer = nullptr;
      switch (buffer.kind()) {
      case bp::BufferRef::INPUT:
      case bp::BufferRef::OUTPUT:
        invocation.callerBuffers.push_back(
            {static_cast<uint32_t>(b), buffer.kind() == bp::BufferRef::OUTPUT,
             buffer.index(), buffer.offset()});
        break;
      case bp::BufferRef::PARAM:
        pointer = parameterData[buffer.index()] + buffer.offset();
        break;
      default:
        pointer = arena.data() + buffer.offset();
        break;
      }
      invocation.buffers.push_back(pointer);
    }
    plan.invocations.push_back(std::move(invocation));
  }
  return Status();
}

Status Session::bindTensors(
    const char *kind,
    const google::protobuf::RepeatedPtrField<bp::TensorSpec> &specs,
    const std::unordered_map<std::string, uint32_t> &index,
    const kiln_tensor_t *tensors, size_t count, std::vector<void *> &data,
    std::vector<char> &seen) {
  std::fill(seen.begin(), seen.end(), 0);
  if (count > 0 && !tensors)
    return invalidArgument("the ", kind, " array is NULL but its count is ",
                           count);
  for (size_t i = 0; i < count; ++i) {
    const kiln_tensor_t &tensor = tensors[i];
    if (!tensor.name)
      return invalidArgument(kind, " ", i, " has no name");
    auto found = index.find(tensor.name);
    if (found == index.end())
      return invalidArgument("unexpected ", kind, " '", tensor.name, "' (",
                             kind, "s: ", tensorNames(specs), ")");
    uint32_t k = found->second;
    if (seen[k])
      return invalidArgument(kind, " '", tensor.name, "' is given twice");
    KILN_RETURN_IF_ERROR(checkTensor(kind, tensor, specs[static_cast<int>(k)]));
    seen[k] = 1;
    data[k] = tensor.data;
  }
  for (size_t k = 0; k < seen.size(); ++k)
    if (!seen[k])
      return invalidArgument(
          "missing ", kind, " '", specs[static_cast<int>(k)].name(), "' (",
          describeTensorType(specs[static_cast<int>(k)]), ")");
  return Status();
}

Status Session::run(const std::string &entryName, const kiln_tensor_t *inputs,
                    size_t inputCount, const kiln_tensor_t *outputs,
                    size_t outputCount) {
  auto found = planIndex.find(entryName);
  if (found == planIndex.end())
    return notFound(
        bundle->name(), ": no entry point '", entryName, "' (entry points: ",
        joinNames(bundle->manifest().entry_points(),
                  [](const bp::EntryPoint &e) { return "'" + e.name() + "'"; }),
        ")");
  std::lock_guard<std::mutex> lock(mutex);
  EntryPlan &plan = plans[found->second];
  std::string context = strCat("entry point '", entryName, "'");
  KILN_RETURN_IF_ERROR(bindTensors("input", plan.entry->inputs(),
                                   plan.inputIndex, inputs, inputCount,
                                   plan.inputData, plan.inputSeen)
                           .withContext(context));
  KILN_RETURN_IF_ERROR(bindTensors("output", plan.entry->outputs(),
                                   plan.outputIndex, outputs, outputCount,
                                   plan.outputData, plan.outputSeen)
                           .withContext(context));
  for (KernelInvocation &invocation : plan.invocations) {
    for (const CallerBuffer &buffer : invocation.callerBuffers) {
      void *base = buffer.isOutput ? plan.outputData[buffer.index]
                                   : plan.inputData[buffer.index];
      invocation.buffers[buffer.slot] =
          static_cast<uint8_t *>(base) + buffer.offset;
    }
    invocation.function(invocation.buffers.data());
  }
  return Status();
}

Status Session::findParameter(const std::string &name, size_t byteSize,
                              uint8_t *&storage) {
  auto found = parameterIndex.find(name);
  if (found == parameterIndex.end())
    return notFound(bundle->name(), ": no parameter '", name, "'");
  const bp::Parameter &parameter =
      bundle->manifest().parameters(static_cast<int>(found->second));
  if (byteSize != parameter.size_bytes())
    return invalidArgument("parameter '", name, "' (",
                           describeTensorType(parameter.tensor()), ") has ",
                           parameter.size_bytes(), " bytes, not ", byteSize);
  storage = parameterData[found->second];
  return Status();
}

Status Session::getParameter(const std::string &name, void *data,
                             size_t byteSize) {
  std::lock_guard<std::mutex> lock(mutex);
  uint8_t *storage = nullptr;
  KILN_RETURN_IF_ERROR(findParameter(name, byteSize, storage));
  if (byteSize > 0 && !data)
    return invalidArgument("parameter '", name, "': data is NULL");
  if (byteSize > 0)
    std::memcpy(data, storage, byteSize);
  return Status();
}

Status Session::setParameter(const std::string &name, const void *data,
                             size_t byteSize) {
  std::lock_guard<std::mutex> lock(mutex);
  uint8_t *storage = nullptr;
  KILN_RETURN_IF_ERROR(findParameter(name, byteSize, storage));
  if (byteSize > 0 && !data)
    return invalidArgument("parameter '", name, "': data is NULL");
  if (byteSize > 0)
    std::memcpy(storage, data, byteSize);
  return Status();
}

} // namespace kiln::runtime
