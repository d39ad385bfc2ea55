//===- TensorBinding.cpp - a run's tensors against its entry point --------===//

#include "core/TensorBinding.h"

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

EntryTensors::EntryTensors(const bp::EntryPoint &entry) : entry(&entry) {
  prepare(entry.inputs(), inputs);
  prepare(entry.outputs(), outputs);
}

void EntryTensors::prepare(
    const google::protobuf::RepeatedPtrField<bp::TensorSpec> &specs,
    Side &side) {
  side.specs = &specs;
  for (int i = 0; i < specs.size(); ++i)
    side.index[specs[i].name()] = static_cast<uint32_t>(i);
  side.data.resize(static_cast<size_t>(specs.size()));
  side.seen.resize(side.data.size());
}

Status EntryTensors::bind(const kiln_tensor_t *inputTensors, size_t inputCount,
                          const kiln_tensor_t *outputTensors,
                          size_t outputCount) {
  KILN_RETURN_IF_ERROR(bindInputs(inputTensors, inputCount));
  return bindOutputs(outputTensors, outputCount);
}

Status EntryTensors::bindInputs(const kiln_tensor_t *inputTensors,
                                size_t inputCount) {
  return bindSide("input", inputs, inputTensors, inputCount)
      .withContext(strCat("entry point '", entry->name(), "'"));
}

Status EntryTensors::bindOutputs(const kiln_tensor_t *outputTensors,
                                 size_t outputCount) {
  return bindSide("output", outputs, outputTensors, outputCount)
      .withContext(strCat("entry point '", entry->name(), "'"));
}

Status EntryTensors::bindSide(const char *kind, Side &side,
                              const kiln_tensor_t *tensors, size_t count) {
  const auto &specs = *side.specs;
  std::fill(side.seen.begin(), side.seen.end(), 0);
  if (count > 0 && !tensors)
    return invalidArgument("the ", kind, " array is NULL but its count is ",
                           count);
  for (size_t i = 0; i < count; ++i) {
    const kiln_tensor_t &tensor = tensors[i];
    if (!tensor.name)
      return invalidArgument(kind, " ", i, " has no name");
    auto found = side.index.find(tensor.name);
    if (found == side.index.end())
      return invalidArgument("unexpected ", kind, " '", tensor.name, "' (",
                             kind, "s: ", tensorNames(specs), ")");
    uint32_t k = found->second;
    if (side.seen[k])
      return invalidArgument(kind, " '", tensor.name, "' is given twice");
    KILN_RETURN_IF_ERROR(checkTensor(kind, tensor, specs[static_cast<int>(k)]));
    side.seen[k] = 1;
    side.data[k] = tensor.data;
  }
  for (size_t k = 0; k < side.seen.size(); ++k)
    if (!side.seen[k])
      return invalidArgument(
          "missing ", kind, " '", specs[static_cast<int>(k)].name(), "' (",
          describeTensorType(specs[static_cast<int>(k)]), ")");
  return Status();
}

TensorLayout::TensorLayout(
    const google::protobuf::RepeatedPtrField<bp::TensorSpec> &specs,
    uint64_t begin, uint64_t alignment)
    : begin(begin), end(begin) {
  for (const bp::TensorSpec &spec : specs) {
    uint64_t size = 0;
    tensorByteSize(spec, size);
    end = alignUp(end, alignment);
    offsets.push_back(end);
    bytes.push_back(size);
    end += size;
  }
}

void TensorLayout::gather(const std::vector<void *> &data,
                          uint8_t *area) const {
  for (size_t i = 0; i < data.size(); ++i)
    if (bytes[i] > 0)
      std::memcpy(area + offsets[i], data[i], bytes[i]);
}

void TensorLayout::scatter(const uint8_t *area,
                           const std::vector<void *> &data) const {
  for (size_t i = 0; i < data.size(); ++i)
    if (bytes[i] > 0)
      std::memcpy(data[i], area + offsets[i], bytes[i]);
}

Status InputStager::freeSlot(size_t &slot) const {
  if (waiting.size() >= kMaxWaiting)
    return invalidArgument(kMaxWaiting,
                           " staged sets of inputs wait for runs already; "
                           "run the entry point before staging more");
  for (slot = 0; slot < slots; ++slot)
    if (slot != held &&
        std::find(waiting.begin(), waiting.end(), slot) == waiting.end())
      return Status();
  return internalError("no free staging slot of ", slots);
}

Status InputStager::take(size_t &slot) {
  if (waiting.empty())
    return invalidArgument("no inputs are staged for this run "
                           "(kiln_session_stage_inputs stages them; each "
                           "staged set serves one run)");
  slot = held = waiting.front();
  waiting.pop_front();
  return Status();
}

Status InputStager::copy(const kiln_tensor_t *inputs, size_t inputCount,
                         uint8_t *destination) {
  KILN_RETURN_IF_ERROR(tensors.bindInputs(inputs, inputCount));
  layout.gather(tensors.inputData(), destination);
  return Status();
}

Status entryPointNotFound(const std::string &bundleName,
                          const bp::Manifest &manifest,
                          const std::string &entryName) {
  return notFound(
      bundleName, ": no entry point '", entryName, "' (entry points: ",
      joinNames(manifest.entry_points(),
                [](const bp::EntryPoint &e) { return "'" + e.name() + "'"; }),
      ")");
}

std::string targetNames(const bp::Manifest &manifest) {
  return joinNames(manifest.targets(),
                   [](const bp::Target &t) { return "'" + t.name() + "'"; });
}

} // namespace kiln::runtime
