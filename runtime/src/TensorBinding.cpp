//===- TensorBinding.cpp - a run's tensors against its entry point --------===//

#include "TensorBinding.h"

#include "kiln/runtime/Manifest.h"

#include <algorithm>

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
  std::string context = strCat("entry point '", entry->name(), "'");
  KILN_RETURN_IF_ERROR(
      bindSide("input", inputs, inputTensors, inputCount).withContext(context));
  return bindSide("output", outputs, outputTensors, outputCount)
      .withContext(context);
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
