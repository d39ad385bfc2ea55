//===- CudaImages.h - which CUDA code image a device runs -------*- C++ -*-===//
//
// A CUDA target holds cubins for real architectures and PTX for virtual
// ones. Which of them a device can load follows from its compute
// capability: the rules are here, apart from any CUDA library, so libkilnrt
// can describe them and the CPU tests can check them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDAIMAGES_H
#define KILN_RUNTIME_SRC_CUDAIMAGES_H

#include "kiln/runtime/bundle.pb.h"

#include <string>

namespace kiln::runtime {

/// "sm_80 sm_90a cubin, compute_90a ptx": the architectures of a target's
/// images by format; "" when it has none (the CPU).
std::string describeCudaImages(const bundle::Target &target);

/// The index into target.images() of the image to load on a device of
/// compute capability major.minor, or -1 when none runs there.
///
/// A cubin runs on its own major version at an equal or higher minor one
/// (sm_80 on 8.0 and 8.6, not on 9.0), except that an arch-specific cubin
/// ("sm_90a") runs only on exactly its version. The best cubin is the newest
/// that runs, an arch-specific one before a plain one of the same version.
/// Without a cubin that runs, the newest PTX the driver can compile for the
/// device is chosen: plain PTX ("compute_80") for any device of that
/// capability or higher, arch-specific PTX ("compute_90a") only for exactly
/// its version, family PTX ("compute_100f") within its major version.
int selectCudaImage(const bundle::Target &target, int major, int minor);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_CUDAIMAGES_H
