//===- CpuCode.cpp - a target's ELF shared object, loaded -----------------===//

#include "CpuCode.h"

#include "MappedFile.h"
#include "kiln/collectives.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln::runtime {

namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
constexpr const char *kHostArch = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
constexpr const char *kHostArch = "aarch64";
#else
#error "the Kiln CPU runtime supports x86-64 and aarch64 hosts"
#endif

/// Checks the ELF header: a little-endian 64-bit shared object for the host.
Status checkElf(ByteSpan image, const std::string &what) {
  if (image.size < sizeof(Elf64_Ehdr) ||
      std::memcmp(image.data, ELFMAG, SELFMAG) != 0)
    return formatError(what, " is not an ELF file");
  Elf64_Ehdr header;
  std::memcpy(&header, image.data, sizeof(header));
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB)
    return unsupported(what, " is not a little-endian 64-bit ELF object");
  if (header.e_type != ET_DYN)
    return formatError(what, " is not an ELF shared object (e_type ",
                       header.e_type, ")");
  if (header.e_machine != kHostMachine)
    return unsupported(what, " is code for ELF machine ", header.e_machine,
                       ", not for this ", kHostArch, " host");
  return Status();
}

/// Steps compiled with kilnc --data-parallel call libkilnrt's collectives
/// (kiln/collectives.h) by name, and the loader resolves them only against
/// libraries in the global scope. A program linked with libkilnrt has it
/// there; one that loaded it with dlopen(RTLD_LOCAL), as Python's ctypes
/// does, has not: promote it once. The handle is kept, so it stays loaded.
void makeCollectivesVisible() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&kiln_collective_wait), &info) &&
        info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  });
}

Status dlopenPath(const std::string &path, void *&handle) {
  makeCollectivesVisible();
  // RTLD_LOCAL: kernels of two sessions or bundles never see each other.
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    return ioError("cannot load it: ", error ? error : "unknown error");
  }
  return Status();
}

/// OpenBLAS picks its kernels from the CPU model it recognises and falls back
/// to slow generic (SSE3) ones on models newer than its release, such as
/// recent Xeons. Unless the user chose (OPENBLAS_CORETYPE is set), name the
/// kernel family the CPU's instruction set supports before the kernels' code,
/// which links OpenBLAS, is loaded.
void chooseOpenBlasKernels() {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", /*overwrite=*/0);
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    setenv("OPENBLAS_CORETYPE", "Haswell", /*overwrite=*/0);
#endif
}

/// Loads the image from an anonymous in-memory file.
Status loadFromMemfd(ByteSpan image, void *&handle) {
  int fd = memfd_create("kiln-cpu-code", MFD_CLOEXEC);
  if (fd < 0)
    return ioError("memfd_create failed: ", std::strerror(errno));
  Status status = writeAll(fd, image, "the in-memory file");
  if (status.ok())
    status = dlopenPath(strCat("/proc/self/fd/", fd), handle);
  close(fd);
  return status;
}

/// Loads the image from a temporary file that is removed right away.
Status loadFromTempFile(ByteSpan image, void *&handle) {
  const char *dir = std::getenv("TMPDIR");
  std::string path = strCat(dir && *dir ? dir : "/tmp", "/kiln-code-XXXXXX");
  int fd = mkstemp(path.data());
  if (fd < 0)
    return ioError("cannot create ", path, ": ", std::strerror(errno));
  Status status = writeAll(fd, image, path);
  close(fd);
  if (status.ok())
    status = dlopenPath(path, handle);
  unlink(path.c_str());
  return status;
}

} // namespace

CpuCode::~CpuCode() {
  if (handle)
    dlclose(handle);
}

Status CpuCode::load(ByteSpan image, const std::string &what,
                     std::unique_ptr<CpuCode> &out) {
  KILN_RETURN_IF_ERROR(checkElf(image, what));
  std::unique_ptr<CpuCode> code(new CpuCode());
  code->name = what;
  chooseOpenBlasKernels();
  Status viaMemfd = loadFromMemfd(image, code->handle);
  if (!viaMemfd.ok()) {
    Status viaFile = loadFromTempFile(image, code->handle);
    if (!viaFile.ok())
      return Status(viaFile.code(),
                    strCat(what, ": ", viaMemfd.message(),
                           "; from a temporary file: ", viaFile.message()));
  }
  out = std::move(code);
  return Status();
}

Status CpuCode::lookup(const std::string &symbol, KernelFunction &out) const {
  dlerror();
  void *address = dlsym(handle, symbol.c_str());
  if (!address)
    return notFound(name, " does not export kernel '", symbol, "'");
  out = reinterpret_cast<KernelFunction>(address);
  return Status();
}

} // namespace kiln::runtime
