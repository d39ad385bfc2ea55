//===- RuntimeApi.cpp - the C API of libkilnrt ----------------------------===//
//
// Thin wrappers: check the arguments, call the C++ runtime, turn its Status
// into a kiln_status_t and the thread's last message. No exception leaves
// this file.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include "bundle/CudaImages.h"
#include "collectives/Collectives.h"
#include "core/BackendLoader.h"
#include "core/IndexChecks.h"
#include "core/Session.h"
#include "kiln/runtime/BundleReader.h"
#include "kiln/runtime/Manifest.h"

#include <exception>
#include <new>
#include <string>
#include <vector>

using namespace kiln::runtime;
namespace bp = kiln::bundle;

struct kiln_bundle_t {
  std::shared_ptr<const BundleReader> reader;
  /// kiln_target_info_t.images of each target, kept as long as the bundle.
  std::vector<std::string> targetImages;
};

struct kiln_session_t {
  std::unique_ptr<Backend> session;
  /// The index counts each entry point returns, read after every run.
  IndexChecks indexChecks;
};

constexpr bool sameValue(int a, int b) { return a == b; }
static_assert(sameValue(KILN_ELEMENT_TYPE_F32, bp::F32) &&
                  sameValue(KILN_ELEMENT_TYPE_F16, bp::F16) &&
                  sameValue(KILN_ELEMENT_TYPE_BF16, bp::BF16) &&
                  sameValue(KILN_ELEMENT_TYPE_F64, bp::F64) &&
                  sameValue(KILN_ELEMENT_TYPE_I64, bp::I64) &&
                  sameValue(KILN_ELEMENT_TYPE_I32, bp::I32) &&
                  sameValue(KILN_ELEMENT_TYPE_I8, bp::I8) &&
                  sameValue(KILN_ELEMENT_TYPE_BOOL, bp::BOOL) &&
                  sameValue(KILN_ELEMENT_TYPE_U8, bp::U8) &&
                  sameValue(KILN_ELEMENT_TYPE_U16, bp::U16) &&
                  sameValue(KILN_ELEMENT_TYPE_U32, bp::U32) &&
                  sameValue(KILN_ELEMENT_TYPE_U64, bp::U64) &&
                  sameValue(KILN_ELEMENT_TYPE_I16, bp::I16) &&
                  sameValue(KILN_ELEMENT_TYPE_F8E4M3FN, bp::F8E4M3FN) &&
                  sameValue(KILN_ELEMENT_TYPE_F8E4M3FNUZ, bp::F8E4M3FNUZ) &&
                  sameValue(KILN_ELEMENT_TYPE_F8E5M2, bp::F8E5M2) &&
                  sameValue(KILN_ELEMENT_TYPE_F8E5M2FNUZ, bp::F8E5M2FNUZ) &&
                  sameValue(KILN_ELEMENT_TYPE_F8E8M0, bp::F8E8M0) &&
                  sameValue(KILN_ELEMENT_TYPE_F4E2M1, bp::F4E2M1) &&
                  sameValue(KILN_ELEMENT_TYPE_I4, bp::I4) &&
                  sameValue(KILN_ELEMENT_TYPE_U4, bp::U4) &&
                  sameValue(KILN_ELEMENT_TYPE_I2, bp::I2) &&
                  sameValue(KILN_ELEMENT_TYPE_U2, bp::U2),
              "kiln_element_type_t must mirror kiln.bundle.ElementType");
static_assert(KILN_STATUS_INTERNAL == static_cast<int>(StatusCode::Internal) &&
                  KILN_STATUS_COLLECTIVE_ERROR ==
                      static_cast<int>(StatusCode::Collective),
              "kiln_status_t must mirror StatusCode");

namespace {

thread_local std::string lastMessage;

kiln_status_t report(const Status &status) noexcept {
  if (status.ok())
    return KILN_OK;
  try {
    lastMessage = status.message();
  } catch (...) {
    lastMessage.clear();
  }
  return static_cast<kiln_status_t>(status.code());
}

/// Runs `body` and reports its Status; exceptions (allocation failures in
/// the standard library) become statuses instead of escaping.
template <typename Body> kiln_status_t guarded(Body &&body) {
  try {
    return report(body());
  } catch (const std::bad_alloc &) {
    return report(outOfMemory("out of memory"));
  } catch (const std::exception &error) {
    return report(internalError("unexpected error: ", error.what()));
  } catch (...) {
    return report(internalError("unexpected error"));
  }
}

/// Fails the calling API function when `pointer` is NULL.
#define KILN_REQUIRE(pointer)                                                  \
  do {                                                                         \
    if (!(pointer)) {                                                          \
      const char *function = __func__;                                         \
      return guarded([&]() -> Status {                                         \
        return invalidArgument(function, ": " #pointer " is NULL");            \
      });                                                                      \
    }                                                                          \
  } while (false)

kiln_tensor_info_t tensorInfo(const bp::TensorSpec &spec) {
  kiln_tensor_info_t info;
  info.name = spec.name().c_str();
  info.element_type = static_cast<kiln_element_type_t>(spec.element_type());
  info.rank = spec.shape_size();
  info.shape = spec.shape().data();
  uint64_t bytes = 0;
  tensorByteSize(spec, bytes);
  info.byte_size = static_cast<size_t>(bytes);
  return info;
}

/// NotFound unless `index` is below `count`; `where` names the bundle (and
/// entry point) in the message.
Status checkIndex(size_t index, int count, const char *what,
                  const std::string &where) {
  if (index >= static_cast<size_t>(count))
    return notFound(where, ": no ", what, " ", index, " (there are ", count,
                    ")");
  return Status();
}

const bp::Manifest &manifestOf(const kiln_bundle_t *bundle) {
  return bundle->reader->manifest();
}

kiln_status_t getEntryPointTensor(const kiln_bundle_t *bundle,
                                  size_t entryIndex, size_t index, bool output,
                                  kiln_tensor_info_t *out_info) {
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    KILN_RETURN_IF_ERROR(checkIndex(entryIndex, manifest.entry_points_size(),
                                    "entry point", bundle->reader->name()));
    const bp::EntryPoint &entry =
        manifest.entry_points(static_cast<int>(entryIndex));
    const auto &tensors = output ? entry.outputs() : entry.inputs();
    KILN_RETURN_IF_ERROR(checkIndex(
        index, tensors.size(), output ? "output" : "input",
        strCat(bundle->reader->name(), ": entry point '", entry.name(), "'")));
    *out_info = tensorInfo(tensors[static_cast<int>(index)]);
    return Status();
  });
}

/// FNV-1a, 64-bit, continuing from `hash`.
uint64_t fnv1a(uint64_t hash, const uint8_t *bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/// FNV-1a over the manifest's bytes, then every section's CRC-32 (little
/// endian, in table order); see kiln_bundle_get_fingerprint.
uint64_t bundleFingerprint(const BundleReader &reader) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const std::vector<SectionEntry> &sections = reader.sections();
  for (uint32_t i = 0; i < sections.size(); ++i) {
    if (sections[i].kind != static_cast<uint32_t>(SectionKind::Manifest))
      continue;
    ByteSpan manifest = reader.sectionBytes(i);
    hash = fnv1a(hash, manifest.data, manifest.size);
  }
  for (const SectionEntry &section : sections) {
    uint8_t crc[4];
    storeLE32(crc, section.crc);
    hash = fnv1a(hash, crc, sizeof(crc));
  }
  return hash;
}

/// Bytes of a target's code: the shared object, or all CUDA images.
uint64_t codeBytes(const BundleReader &reader, const bp::Target &target) {
  if (target.images_size() == 0)
    return reader.sections()[target.code_section()].size;
  uint64_t bytes = 0;
  for (const bp::CodeImage &image : target.images())
    bytes += reader.sections()[image.section()].size;
  return bytes;
}

/// A session of the backend that runs target `targetName`: CUDA targets
/// (those with code images) in libkilnrt-cuda, everything else here.
Status createSession(const std::shared_ptr<const BundleReader> &reader,
                     const std::string &targetName,
                     std::unique_ptr<Backend> &out) {
  int index = reader->findTarget(targetName);
  if (index >= 0 && reader->manifest().targets(index).images_size() > 0)
    return createCudaSession(*reader, targetName, out)
        .withContext(reader->name());
  std::unique_ptr<CpuSession> session;
  KILN_RETURN_IF_ERROR(CpuSession::create(reader, targetName, session));
  out = std::move(session);
  return Status();
}

} // namespace

extern "C" {

const char *kiln_status_name(kiln_status_t status) {
  switch (status) {
  case KILN_OK:
    return "ok";
  case KILN_STATUS_IO_ERROR:
    return "io error";
  case KILN_STATUS_FORMAT_ERROR:
    return "format error";
  case KILN_STATUS_INVALID_ARGUMENT:
    return "invalid argument";
  case KILN_STATUS_NOT_FOUND:
    return "not found";
  case KILN_STATUS_UNSUPPORTED:
    return "unsupported";
  case KILN_STATUS_OUT_OF_MEMORY:
    return "out of memory";
  case KILN_STATUS_INTERNAL:
    return "internal error";
  case KILN_STATUS_COLLECTIVE_ERROR:
    return "collective error";
  }
  return "unknown status";
}

const char *kiln_status_message(void) { return lastMessage.c_str(); }

const char *kiln_element_type_name(kiln_element_type_t type) {
  return elementTypeName(type);
}

size_t kiln_element_type_size(kiln_element_type_t type) {
  return static_cast<size_t>(elementTypeSize(type));
}

kiln_status_t kiln_bundle_open(const char *path, kiln_bundle_t **out_bundle) {
  KILN_REQUIRE(path);
  KILN_REQUIRE(out_bundle);
  return guarded([&]() -> Status {
    std::unique_ptr<BundleReader> reader;
    KILN_RETURN_IF_ERROR(BundleReader::open(path, reader));
    std::vector<std::string> images;
    for (const bp::Target &target : reader->manifest().targets())
      images.push_back(describeCudaImages(target));
    *out_bundle = new kiln_bundle_t{std::move(reader), std::move(images)};
    return Status();
  });
}

void kiln_bundle_release(kiln_bundle_t *bundle) { delete bundle; }

kiln_status_t kiln_bundle_get_info(const kiln_bundle_t *bundle,
                                   kiln_bundle_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_info);
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    kiln_bundle_info_t info;
    info.producer = manifest.producer().c_str();
    info.model_name = manifest.model_name().c_str();
    info.entry_point_count = static_cast<size_t>(manifest.entry_points_size());
    info.target_count = static_cast<size_t>(manifest.targets_size());
    info.parameter_count = static_cast<size_t>(manifest.parameters_size());
    info.parameter_bytes = 0;
    for (const bp::Parameter &parameter : manifest.parameters())
      info.parameter_bytes += parameter.size_bytes();
    info.metadata_count = static_cast<size_t>(manifest.metadata_size());
    *out_info = info;
    return Status();
  });
}

kiln_status_t kiln_bundle_get_entry_point(const kiln_bundle_t *bundle,
                                          size_t index,
                                          kiln_entry_point_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_info);
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    KILN_RETURN_IF_ERROR(checkIndex(index, manifest.entry_points_size(),
                                    "entry point", bundle->reader->name()));
    const bp::EntryPoint &entry =
        manifest.entry_points(static_cast<int>(index));
    kiln_entry_point_info_t info;
    info.name = entry.name().c_str();
    info.input_count = static_cast<size_t>(entry.inputs_size());
    info.output_count = static_cast<size_t>(entry.outputs_size());
    info.command_count = static_cast<size_t>(entry.commands_size());
    info.arena_bytes = entry.arena_bytes();
    *out_info = info;
    return Status();
  });
}

kiln_status_t kiln_bundle_get_program(const kiln_bundle_t *bundle,
                                      size_t entry_index,
                                      const char *target_name,
                                      kiln_program_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(target_name);
  KILN_REQUIRE(out_info);
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    KILN_RETURN_IF_ERROR(checkIndex(entry_index, manifest.entry_points_size(),
                                    "entry point", bundle->reader->name()));
    const bp::EntryPoint &entry =
        manifest.entry_points(static_cast<int>(entry_index));
    for (const bp::Program &program : entry.programs()) {
      if (program.target() != target_name)
        continue;
      kiln_program_info_t info{};
      info.command_count = static_cast<size_t>(program.commands_size());
      for (const bp::Command &command : program.commands()) {
        info.launch_count += command.has_launch();
        info.gemm_count += command.has_gemm();
        info.collective_count += command.has_all_reduce_mean();
        info.shard_collective_count += command.has_shard();
        info.attention_count += command.has_attention();
        info.layer_norm_count += command.has_layer_norm();
      }
      info.arena_bytes = program.arena_bytes();
      *out_info = info;
      return Status();
    }
    return notFound(bundle->reader->name(), ": entry point '", entry.name(),
                    "' has no program for target '", target_name, "'");
  });
}

kiln_status_t kiln_bundle_find_entry_point(const kiln_bundle_t *bundle,
                                           const char *name,
                                           size_t *out_index) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(name);
  KILN_REQUIRE(out_index);
  return guarded([&]() -> Status {
    int index = bundle->reader->findEntryPoint(name);
    if (index < 0) {
      std::string names;
      for (const bp::EntryPoint &entry : manifestOf(bundle).entry_points())
        names += (names.empty() ? "'" : ", '") + entry.name() + "'";
      return notFound(bundle->reader->name(), ": no entry point '", name,
                      "' (entry points: ", names, ")");
    }
    *out_index = static_cast<size_t>(index);
    return Status();
  });
}

kiln_status_t kiln_bundle_get_entry_point_input(const kiln_bundle_t *bundle,
                                                size_t entry_index,
                                                size_t input_index,
                                                kiln_tensor_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_info);
  return getEntryPointTensor(bundle, entry_index, input_index, false, out_info);
}

kiln_status_t kiln_bundle_get_entry_point_output(const kiln_bundle_t *bundle,
                                                 size_t entry_index,
                                                 size_t output_index,
                                                 kiln_tensor_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_info);
  return getEntryPointTensor(bundle, entry_index, output_index, true, out_info);
}

kiln_status_t kiln_bundle_get_target(const kiln_bundle_t *bundle, size_t index,
                                     kiln_target_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_info);
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    KILN_RETURN_IF_ERROR(checkIndex(index, manifest.targets_size(), "target",
                                    bundle->reader->name()));
    const bp::Target &target = manifest.targets(static_cast<int>(index));
    kiln_target_info_t info;
    info.name = target.name().c_str();
    info.triple = target.triple().c_str();
    info.cpu = target.cpu().c_str();
    info.kernel_count = static_cast<size_t>(target.kernels_size());
    info.code_bytes = codeBytes(*bundle->reader, target);
    info.images = bundle->targetImages[index].c_str();
    *out_info = info;
    return Status();
  });
}

kiln_status_t kiln_bundle_get_parameter(const kiln_bundle_t *bundle,
                                        size_t index,
                                        kiln_parameter_info_t *out_info) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_info);
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    KILN_RETURN_IF_ERROR(checkIndex(index, manifest.parameters_size(),
                                    "parameter", bundle->reader->name()));
    const bp::Parameter &parameter =
        manifest.parameters(static_cast<int>(index));
    kiln_parameter_info_t info;
    info.tensor = tensorInfo(parameter.tensor());
    info.trainable = parameter.trainable() ? 1 : 0;
    info.shard_ranks = static_cast<int>(parameter.shard_ranks());
    info.fixed = parameter.fixed() ? 1 : 0;
    *out_info = info;
    return Status();
  });
}

kiln_status_t kiln_bundle_get_metadata(const kiln_bundle_t *bundle,
                                       const char *key,
                                       const char **out_value) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(key);
  KILN_REQUIRE(out_value);
  return guarded([&]() -> Status {
    for (const bp::MetadataEntry &entry : manifestOf(bundle).metadata()) {
      if (entry.key() == key) {
        *out_value = entry.value().c_str();
        return Status();
      }
    }
    return notFound(bundle->reader->name(), ": no metadata entry '", key, "'");
  });
}

kiln_status_t kiln_bundle_get_metadata_entry(const kiln_bundle_t *bundle,
                                             size_t index, const char **out_key,
                                             const char **out_value) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_key);
  KILN_REQUIRE(out_value);
  return guarded([&]() -> Status {
    const bp::Manifest &manifest = manifestOf(bundle);
    KILN_RETURN_IF_ERROR(checkIndex(index, manifest.metadata_size(),
                                    "metadata entry", bundle->reader->name()));
    const bp::MetadataEntry &entry = manifest.metadata(static_cast<int>(index));
    *out_key = entry.key().c_str();
    *out_value = entry.value().c_str();
    return Status();
  });
}

kiln_status_t kiln_bundle_get_fingerprint(const kiln_bundle_t *bundle,
                                          uint64_t *out_fingerprint) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_fingerprint);
  return guarded([&]() -> Status {
    *out_fingerprint = bundleFingerprint(*bundle->reader);
    return Status();
  });
}

kiln_status_t kiln_session_create(const kiln_bundle_t *bundle,
                                  const char *target_name,
                                  kiln_session_t **out_session) {
  KILN_REQUIRE(bundle);
  KILN_REQUIRE(out_session);
  return guarded([&]() -> Status {
    // Sharded optimizer state has a size for one number of ranks.
    int worldSize = distributedInfo().worldSize;
    for (const bp::Parameter &parameter : manifestOf(bundle).parameters())
      if (parameter.shard_ranks() != 0 &&
          parameter.shard_ranks() != static_cast<uint32_t>(worldSize))
        return invalidArgument(
            bundle->reader->name(), ": its optimizer state is sharded over ",
            parameter.shard_ranks(),
            " ranks (kilnc --shard-optimizer), so it "
            "runs only with ",
            parameter.shard_ranks(), " ranks, not ", worldSize,
            "; launch it with mpirun -np ", parameter.shard_ranks(),
            " or recompile it with --shard-optimizer=", worldSize);
    std::unique_ptr<Backend> session;
    KILN_RETURN_IF_ERROR(createSession(
        bundle->reader, target_name ? target_name : "cpu", session));
    *out_session =
        new kiln_session_t{std::move(session), IndexChecks(manifestOf(bundle))};
    return Status();
  });
}

void kiln_session_release(kiln_session_t *session) { delete session; }

kiln_status_t kiln_session_run(kiln_session_t *session, const char *entry_point,
                               const kiln_tensor_t *inputs, size_t input_count,
                               const kiln_tensor_t *outputs,
                               size_t output_count) {
  KILN_REQUIRE(session);
  KILN_REQUIRE(entry_point);
  return guarded([&]() -> Status {
    KILN_RETURN_IF_ERROR(session->session->run(entry_point, inputs, input_count,
                                               outputs, output_count));
    return session->indexChecks.check(entry_point, outputs, output_count);
  });
}

kiln_status_t kiln_session_stage_inputs(kiln_session_t *session,
                                        const char *entry_point,
                                        const kiln_tensor_t *inputs,
                                        size_t input_count) {
  KILN_REQUIRE(session);
  KILN_REQUIRE(entry_point);
  return guarded([&]() -> Status {
    return session->session->stageInputs(entry_point, inputs, input_count);
  });
}

kiln_status_t kiln_session_run_staged(kiln_session_t *session,
                                      const char *entry_point,
                                      const kiln_tensor_t *outputs,
                                      size_t output_count) {
  KILN_REQUIRE(session);
  KILN_REQUIRE(entry_point);
  return guarded([&]() -> Status {
    KILN_RETURN_IF_ERROR(
        session->session->runStaged(entry_point, outputs, output_count));
    return session->indexChecks.check(entry_point, outputs, output_count);
  });
}

kiln_status_t kiln_session_get_arena_bytes(const kiln_session_t *session,
                                           uint64_t *out_bytes) {
  KILN_REQUIRE(session);
  KILN_REQUIRE(out_bytes);
  return guarded([&]() -> Status {
    *out_bytes = session->session->arenaBytes();
    return Status();
  });
}

kiln_status_t kiln_session_get_parameter(kiln_session_t *session,
                                         const char *name, void *data,
                                         size_t byte_size) {
  KILN_REQUIRE(session);
  KILN_REQUIRE(name);
  return guarded([&]() -> Status {
    return session->session->getParameter(name, data, byte_size);
  });
}

kiln_status_t kiln_session_set_parameter(kiln_session_t *session,
                                         const char *name, const void *data,
                                         size_t byte_size) {
  KILN_REQUIRE(session);
  KILN_REQUIRE(name);
  return guarded([&]() -> Status {
    return session->session->setParameter(name, data, byte_size);
  });
}

kiln_status_t kiln_distributed_init(const kiln_distributed_options_t *options,
                                    kiln_distributed_info_t *out_info) {
  KILN_REQUIRE(out_info);
  return guarded([&]() -> Status {
    DistributedInfo info;
    KILN_RETURN_IF_ERROR(initDistributed(
        options ? options->collective_timeout_seconds : 0, info));
    out_info->rank = info.rank;
    out_info->world_size = info.worldSize;
    out_info->local_rank = info.localRank;
    out_info->local_size = info.localSize;
    out_info->backend = info.backend;
    return Status();
  });
}

kiln_status_t kiln_distributed_finalize(void) {
  return guarded([&]() -> Status { return finalizeDistributed(); });
}

void kiln_distributed_abort(int exit_code) { abortDistributed(exit_code); }

kiln_status_t kiln_distributed_barrier(void) {
  return guarded([&]() -> Status { return kiln::runtime::barrier(); });
}

kiln_status_t kiln_distributed_all_reduce_f64(double *values, size_t count,
                                              kiln_reduce_op_t op) {
  if (count > 0)
    KILN_REQUIRE(values);
  return guarded([&]() -> Status {
    if (op != KILN_REDUCE_SUM && op != KILN_REDUCE_MIN && op != KILN_REDUCE_MAX)
      return invalidArgument("kiln_distributed_all_reduce_f64: unknown "
                             "reduction ",
                             static_cast<int>(op));
    return kiln::runtime::allReduce(values, count,
                                    op == KILN_REDUCE_SUM   ? ReduceOp::Sum
                                    : op == KILN_REDUCE_MIN ? ReduceOp::Min
                                                            : ReduceOp::Max);
  });
}

kiln_status_t kiln_distributed_all_gather(const void *input, void *output,
                                          size_t bytes) {
  if (bytes > 0) {
    KILN_REQUIRE(input);
    KILN_REQUIRE(output);
  }
  return guarded([&]() -> Status {
    return kiln::runtime::allGather(input, output, bytes);
  });
}

} // extern "C"
