//===- Session.cpp - a bundle made ready to run on the CPU ----------------===//

#include "core/Session.h"

#include "kiln/runtime/Manifest.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime {

namespace bp = kiln::bundle;

Status CpuSession::create(std::shared_ptr<const BundleReader> bundle,
                          const std::string &targetName,
                          std::unique_ptr<CpuSession> &out) {
  std::unique_ptr<CpuSession> session(new CpuSession());
  session->bundle = std::move(bundle);
  const BundleReader &reader = *session->bundle;
  KILN_RETURN_IF_ERROR(
      session->loadCode(targetName).withContext(reader.name()));
  KILN_RETURN_IF_ERROR(session->allocateArena().withContext(reader.name()));
  KILN_RETURN_IF_ERROR(session->mapParameters().withContext(reader.name()));
  const bp::Manifest &manifest = reader.manifest();
  session->plans.reserve(static_cast<size_t>(manifest.entry_points_size()));
  for (int i = 0; i < manifest.entry_points_size(); ++i) {
    const bp::EntryPoint &entry = manifest.entry_points(i);
    session->plans.emplace_back(entry);
    KILN_RETURN_IF_ERROR(
        session->planEntryPoint(entry, session->plans.back())
            .withContext(
                strCat(reader.name(), ": entry point '", entry.name(), "'")));
    session->planIndex[entry.name()] = static_cast<size_t>(i);
  }
  out = std::move(session);
  return Status();
}

Status CpuSession::loadCode(const std::string &targetName) {
  const bp::Manifest &manifest = bundle->manifest();
  int targetIndex = bundle->findTarget(targetName);
  if (targetIndex < 0)
    return notFound("no target '", targetName,
                    "' (targets: ", targetNames(manifest), ")");
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

Status CpuSession::allocateArena() {
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

Status CpuSession::mapParameters() {
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
  // The parameter space past the weights section: zeros, for the
  // parameters the bundle stores no value of.
  uint64_t unstoredStart = alignUp(weights.size, kSectionAlignment);
  if (manifest.parameter_bytes() > unstoredStart) {
    uint64_t bytes = manifest.parameter_bytes() - unstoredStart;
    if (bytes > SIZE_MAX)
      return outOfMemory("the parameters' ", bytes,
                         " bytes do not fit in memory");
    KILN_RETURN_IF_ERROR(
        AlignedBuffer::allocate(static_cast<size_t>(bytes), unstored)
            .withContext("parameters without a stored value"));
  }
  for (int i = 0; i < manifest.parameters_size(); ++i) {
    const bp::Parameter &parameter = manifest.parameters(i);
    uint64_t offset = parameter.weights_offset();
    parameterData.push_back(parameter.init() == bp::Parameter::WEIGHTS
                                ? (base ? base + offset : nullptr)
                                : unstored.data() + (offset - unstoredStart));
    parameterIndex[parameter.tensor().name()] = static_cast<uint32_t>(i);
  }
  external = std::make_unique<ExternalParameters>(manifest);
  fixed = std::make_unique<FixedParameters>(manifest, base);
  return Status();
}

Status CpuSession::planEntryPoint(const bp::EntryPoint &entry,
                                  EntryPlan &plan) {
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

CpuSession::EntryPlan *CpuSession::findPlan(const std::string &entryName) {
  auto found = planIndex.find(entryName);
  return found == planIndex.end() ? nullptr : &plans[found->second];
}

Status CpuSession::stageInputs(const std::string &entryName,
                               const kiln_tensor_t *inputs, size_t inputCount) {
  EntryPlan *plan = findPlan(entryName);
  if (!plan)
    return entryPointNotFound(bundle->name(), bundle->manifest(), entryName);
  std::string where = strCat("entry point '", entryName, "'");
  std::lock_guard<std::mutex> lock(stageMutex);
  StagedInputs &stage = plan->stage;
  InputStager &stager = stage.stager;
  if (!stage.buffers) {
    auto buffers = std::make_unique<AlignedBuffer[]>(stager.slotCount());
    for (size_t i = 0; i < stager.slotCount(); ++i)
      KILN_RETURN_IF_ERROR(
          AlignedBuffer::allocate(stager.getLayout().end, buffers[i])
              .withContext(where + ": staged inputs"));
    stage.buffers = std::move(buffers);
  }
  size_t slot = 0;
  KILN_RETURN_IF_ERROR(stager.freeSlot(slot).withContext(where));
  KILN_RETURN_IF_ERROR(
      stager.copy(inputs, inputCount, stage.buffers[slot].data()));
  stager.push(slot);
  return Status();
}

Status CpuSession::runEntry(const std::string &entryName,
                            const kiln_tensor_t *inputs, size_t inputCount,
                            bool staged, const kiln_tensor_t *outputs,
                            size_t outputCount) {
  EntryPlan *plan = findPlan(entryName);
  if (!plan)
    return entryPointNotFound(bundle->name(), bundle->manifest(), entryName);
  std::lock_guard<std::mutex> lock(mutex);
  if (external)
    KILN_RETURN_IF_ERROR(external->checkAllSet(bundle->name()));
  if (!staged) {
    KILN_RETURN_IF_ERROR(
        plan->tensors.bind(inputs, inputCount, outputs, outputCount));
    execute(*plan, plan->tensors.inputData(), plan->tensors.outputData());
    return Status();
  }
  KILN_RETURN_IF_ERROR(plan->tensors.bindOutputs(outputs, outputCount));
  StagedInputs &stage = plan->stage;
  size_t slot = 0;
  {
    std::lock_guard<std::mutex> stageLock(stageMutex);
    KILN_RETURN_IF_ERROR(stage.stager.take(slot).withContext(
        strCat("entry point '", entryName, "'")));
  }
  const TensorLayout &layout = stage.stager.getLayout();
  stage.runningData.resize(layout.offsets.size());
  for (size_t i = 0; i < layout.offsets.size(); ++i)
    stage.runningData[i] = stage.buffers[slot].data() + layout.offsets[i];
  execute(*plan, stage.runningData, plan->tensors.outputData());
  std::lock_guard<std::mutex> stageLock(stageMutex);
  stage.stager.release();
  return Status();
}

void CpuSession::execute(EntryPlan &plan, const std::vector<void *> &inputData,
                         const std::vector<void *> &outputData) {
  for (KernelInvocation &invocation : plan.invocations) {
    for (const CallerBuffer &buffer : invocation.callerBuffers) {
      void *base =
          buffer.isOutput ? outputData[buffer.index] : inputData[buffer.index];
      invocation.buffers[buffer.slot] =
          static_cast<uint8_t *>(base) + buffer.offset;
    }
    invocation.function(invocation.buffers.data());
  }
}

Status CpuSession::findParameter(const std::string &name, size_t byteSize,
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

Status CpuSession::getParameter(const std::string &name, void *data,
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

Status CpuSession::setParameter(const std::string &name, const void *data,
                                size_t byteSize) {
  std::lock_guard<std::mutex> lock(mutex);
  uint8_t *storage = nullptr;
  KILN_RETURN_IF_ERROR(findParameter(name, byteSize, storage));
  if (byteSize > 0 && !data)
    return invalidArgument("parameter '", name, "': data is NULL");
  if (fixed)
    KILN_RETURN_IF_ERROR(fixed->check(bundle->manifest(),
                                      static_cast<int>(parameterIndex[name]),
                                      data, byteSize));
  if (byteSize > 0)
    std::memcpy(storage, data, byteSize);
  if (external)
    external->markSet(static_cast<int>(parameterIndex[name]));
  return Status();
}

} // namespace kiln::runtime
