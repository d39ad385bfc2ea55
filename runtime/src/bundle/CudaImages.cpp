//===- CudaImages.cpp - which CUDA code image a device runs ---------------===//

#include "bundle/CudaImages.h"

#include <cctype>

namespace kiln::runtime {

namespace bp = kiln::bundle;

namespace {

/// An architecture name taken apart: "sm_90a" is 9.0 with suffix 'a'.
struct Arch {
  int major = 0;
  int minor = 0;
  char suffix = 0; // 0, 'a' (arch-specific) or 'f' (family)
};

/// Parses `prefix` followed by two or more digits (major, then one minor
/// digit) and an optional 'a' or 'f'.
bool parseArch(const std::string &name, const std::string &prefix, Arch &arch) {
  if (name.compare(0, prefix.size(), prefix) != 0)
    return false;
  std::string rest = name.substr(prefix.size());
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    arch.suffix = rest.back();
    rest.pop_back();
  }
  if (rest.size() < 2 || rest.size() > 4)
    return false;
  for (char c : rest)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  arch.major = std::stoi(rest.substr(0, rest.size() - 1));
  arch.minor = rest.back() - '0';
  return true;
}

/// Whether code for `arch` runs on a device of major.minor; `anyNewer` is
/// what plain PTX allows on top of that: any later version.
bool runsOn(const Arch &arch, int major, int minor, bool anyNewer) {
  if (arch.suffix == 'a')
    return arch.major == major && arch.minor == minor;
  if (anyNewer && arch.suffix == 0)
    return arch.major < major || (arch.major == major && arch.minor <= minor);
  return arch.major == major && arch.minor <= minor;
}

/// Orders runnable images: newer first, then arch-specific before family
/// before plain code, which is the most specialised first.
int rank(const Arch &arch) {
  int suffixRank = arch.suffix == 'a' ? 2 : arch.suffix == 'f' ? 1 : 0;
  return (arch.major * 10 + arch.minor) * 4 + suffixRank;
}

int bestImage(const bp::Target &target, bp::CodeImage::Format format, int major,
              int minor) {
  bool cubin = format == bp::CodeImage::CUBIN;
  int best = -1, bestRank = -1;
  for (int i = 0; i < target.images_size(); ++i) {
    const bp::CodeImage &image = target.images(i);
    Arch arch;
    if (image.format() != format ||
        !parseArch(image.arch(), cubin ? "sm_" : "compute_", arch) ||
        !runsOn(arch, major, minor, /*anyNewer=*/!cubin))
      continue;
    if (rank(arch) > bestRank) {
      best = i;
      bestRank = rank(arch);
    }
  }
  return best;
}

} // namespace

std::string describeCudaImages(const bp::Target &target) {
  std::string cubins, ptx;
  for (const bp::CodeImage &image : target.images()) {
    std::string &list = image.format() == bp::CodeImage::CUBIN ? cubins : ptx;
    list += (list.empty() ? "" : " ") + image.arch();
  }
  std::string text;
  if (!cubins.empty())
    text = cubins + " cubin";
  if (!ptx.empty())
    text += (text.empty() ? "" : ", ") + ptx + " ptx";
  return text;
}

int selectCudaImage(const bp::Target &target, int major, int minor) {
  int cubin = bestImage(target, bp::CodeImage::CUBIN, major, minor);
  if (cubin >= 0)
    return cubin;
  return bestImage(target, bp::CodeImage::PTX, major, minor);
}

} // namespace kiln::runtime
