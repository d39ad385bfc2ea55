//===- Parameters.h - parameter values in and out of sessions ---*- C++ -*-===//
//
// --params (an .npz of values), --save-params and checkpoints (safetensors:
// an 8-byte little-endian header length, a JSON header of names, dtypes,
// shapes and data offsets, then the data), and the atomic file writes they
// use.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_PARAMETERS_H
#define KILN_TOOLS_KILN_RUN_PARAMETERS_H

#include "Driver.h"

#include <string>
#include <vector>

namespace kiln::run {

/// Sets each of `arrays` as the value of the parameter of its name, each
/// checked against the parameter's declared type and shape; `source` names
/// the file in errors. A sharded optimizer state is expected whole (every
/// rank's shard, as encodeSafetensors stores it); this rank takes its
/// shard. With `requireAll`, every parameter of the bundle must be among
/// them.
bool setParameters(const kiln_bundle_t *bundle, kiln_session_t *session,
                   const std::vector<NamedArray> &arrays,
                   const std::string &source, bool requireAll);

/// Replaces parameter values with the arrays of --params, if given.
bool loadParameters(const Options &options, const kiln_bundle_t *bundle,
                    kiln_session_t *session);

/// Every parameter and optimizer state tensor of the session, in the
/// bundle's order, as the bytes of a safetensors file. Optimizer state
/// sharded over the ranks (kilnc --shard-optimizer) is gathered and stored
/// whole, so every rank must call it then (hasShardedState).
bool encodeSafetensors(const kiln_bundle_t *bundle, kiln_session_t *session,
                       std::string &bytes);

/// Whether the bundle holds optimizer state sharded over the ranks.
bool hasShardedState(const kiln_bundle_t *bundle);

/// The tensors of the safetensors file `bytes` (read from `path`, which
/// errors name), in header order.
bool decodeSafetensors(const std::string &bytes, const std::string &path,
                       std::vector<NamedArray> &arrays);

/// Writes the session's parameters to --save-params, if given (rank 0; with
/// sharded state every rank must call it).
bool saveParameters(const Options &options, const kiln_bundle_t *bundle,
                    kiln_session_t *session);

/// Writes `bytes` to a new file next to `path`, flushes it to disk, renames
/// it over `path` and flushes the directory, so that `path` holds either its
/// old content or all of `bytes`, whenever the process or machine stops.
bool writeFileAtomically(const std::string &path, const std::string &bytes);

/// Checks, before any work that writing it at the end would lose, that the
/// file `path` given by `flag` can be written: it is not a directory, its
/// directory exists, and a file can be created there (a probe file is
/// created and removed). An error names the flag, the path and the cause.
bool checkWritable(const std::string &flag, const std::string &path);

/// Reads the whole file at `path`.
bool readWholeFile(const std::string &path, std::string &bytes);

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_PARAMETERS_H
