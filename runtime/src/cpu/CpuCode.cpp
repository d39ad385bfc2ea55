//===- CpuCode.cpp - a target's ELF shared object, loaded -----------------===//

#include "cpu/CpuCode.h"
#include "cpu/CpuProfile.h"

#include "bundle/MappedFile.h"
#include "kiln/abi/collectives.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <sched.h>
#include <string>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

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
/// (kiln/abi/collectives.h) by name, and the loader resolves them only against
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
/// recent Xeons; OPENBLAS_CORETYPE overrides its choice. Kiln names the
/// kernel family the CPU's instruction set supports, before the kernels'
/// code, which links OpenBLAS, is loaded, and it does so even where
/// OPENBLAS_CORETYPE is set already: machines set that variable system-wide
/// as a safe fallback for every OpenBLAS build (Haswell's AVX2 kernels on an
/// AVX-512 AMD EPYC, where SkylakeX's run Kiln's training steps 1.6 times as
/// fast; docs/performance.md). KILN_OPENBLAS_CORETYPE chooses the family for
/// Kiln's code instead (docs/runtime.md, Threads).
void chooseOpenBlasKernels() {
  if (const char *chosen = std::getenv("KILN_OPENBLAS_CORETYPE");
      chosen && *chosen) {
    setenv("OPENBLAS_CORETYPE", chosen, /*overwrite=*/1);
    return;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", /*overwrite=*/1);
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    setenv("OPENBLAS_CORETYPE", "Haswell", /*overwrite=*/1);
#endif
}

/// What OpenBLAS's `symbol` (openblas_get_config, openblas_get_corename)
/// returns where the code links OpenBLAS; null otherwise.
const char *openBlasText(void *handle, const char *symbol) {
  using Text = const char *(*)();
  auto text = reinterpret_cast<Text>(dlsym(handle, symbol));
  return text ? text() : nullptr;
}

/// OpenBLAS ignores a kernel family it does not know (or whose instructions
/// the CPU lacks) and picks its own: a KILN_OPENBLAS_CORETYPE it did not
/// follow is a warning, once per process, naming the kernels it runs.
void checkChosenBlasKernels(void *handle) {
  const char *chosen = std::getenv("KILN_OPENBLAS_CORETYPE");
  if (!chosen || !*chosen)
    return;
  const char *running = openBlasText(handle, "openblas_get_corename");
  if (!running || strcasecmp(chosen, running) == 0)
    return;
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "kiln: warning: KILN_OPENBLAS_CORETYPE=%s: OpenBLAS runs its "
                 "%s kernels (it has no such kernel family, the CPU lacks "
                 "its instructions, or OpenBLAS was loaded before)\n",
                 chosen, running);
  });
}

/// What the profile says multiplies: OpenBLAS's configuration, which names
/// the kernel family it runs, where the code links OpenBLAS.
std::string blasConfiguration(void *handle) {
  const char *text = openBlasText(handle, "openblas_get_config");
  return text ? strCat("matrix products: ", text, "\n") : std::string();
}

/// OpenBLAS (0.3.21, Debian 12's) gives each of its threads a work buffer
/// of this many bytes, mapped when the thread starts or first multiplies,
/// and when the mapping fails it retries forever at full CPU instead of
/// failing (fixed in later releases). Its threads' stacks come on top.
constexpr uint64_t kOpenBlasBuffer = 128ull << 20;
constexpr uint64_t kThreadStack = 8ull << 20;
/// What loading the code maps besides: the libraries it links (OpenBLAS,
/// libgfortran, the OpenMP runtime), about 50 MiB here, with room to spare.
constexpr uint64_t kLibraries = 64ull << 20;

/// The threads that multiply at once: the kernels' OpenMP team, which calls
/// OpenBLAS from each of its threads (OMP_NUM_THREADS, at most the CPUs this
/// process may run on, which mpirun's binding or a batch system's cpuset
/// limit; those CPUs by default). Each calling thread takes a work buffer.
uint64_t multiplyingThreads() {
  cpu_set_t allowed;
  long cpus = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                  ? CPU_COUNT(&allowed)
                  : sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t limit = cpus > 0 ? static_cast<uint64_t>(cpus) : 1;
  const char *value = std::getenv("OMP_NUM_THREADS");
  if (value && std::atoi(value) > 0)
    return std::min(limit, static_cast<uint64_t>(std::atoi(value)));
  return limit;
}

/// The kernels share one pool of threads, OpenMP's: the generated loops run
/// on it, and so do the matrix products, cut into blocks that each thread
/// hands to OpenBLAS (kiln-lower-gemm-to-blas). OpenBLAS must then not start
/// threads of its own, which would wait for the OpenMP team's (and it for
/// them) in sched_yield loops. Before OpenBLAS is loaded, its thread count
/// is set to one; a library loaded already (by the process, or an earlier
/// bundle) is told so through its API once the code is loaded.
void useOneBlasThread() {
  setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/1);
}

void setOneBlasThread(void *handle) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(
          dlsym(handle, "openblas_set_num_threads")))
    set(1);
}

/// Whether the ELF shared object `image` (checked by checkElf) names a BLAS
/// library (libopenblas, libblas) among the libraries it needs. The image
/// may be corrupt: every read is bounds-checked and the walk is bounded.
bool linksBlas(ByteSpan image) {
  auto read = [&](uint64_t offset, void *out, size_t size) {
    if (offset > image.size || size > image.size - offset)
      return false;
    std::memcpy(out, image.data + offset, size);
    return true;
  };
  Elf64_Ehdr header;
  if (!read(0, &header, sizeof(header)) ||
      header.e_phentsize != sizeof(Elf64_Phdr))
    return false;
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  for (size_t i = 0; i < segments.size(); ++i)
    if (!read(header.e_phoff + i * sizeof(Elf64_Phdr), &segments[i],
              sizeof(Elf64_Phdr)))
      return false;
  // File offset of a virtual address, through the loadable segments.
  auto fileOffset = [&](uint64_t address, uint64_t &offset) {
    for (const Elf64_Phdr &segment : segments)
      if (segment.p_type == PT_LOAD && address >= segment.p_vaddr &&
          address - segment.p_vaddr < segment.p_filesz) {
        offset = segment.p_offset + (address - segment.p_vaddr);
        return true;
      }
    return false;
  };
  auto dynamic = std::find_if(
      segments.begin(), segments.end(),
      [](const Elf64_Phdr &segment) { return segment.p_type == PT_DYNAMIC; });
  if (dynamic == segments.end())
    return false;
  // A linker writes a few dozen entries; a corrupt count stops here.
  constexpr uint64_t kMaxEntries = 4096;
  std::vector<uint64_t> needed;
  uint64_t strtab = 0, strsz = 0;
  for (uint64_t i = 0;
       i < kMaxEntries && (i + 1) * sizeof(Elf64_Dyn) <= dynamic->p_filesz;
       ++i) {
    Elf64_Dyn entry;
    if (!read(dynamic->p_offset + i * sizeof(Elf64_Dyn), &entry,
              sizeof(entry)) ||
        entry.d_tag == DT_NULL)
      break;
    if (entry.d_tag == DT_NEEDED)
      needed.push_back(entry.d_un.d_val);
    else if (entry.d_tag == DT_STRTAB)
      strtab = entry.d_un.d_ptr;
    else if (entry.d_tag == DT_STRSZ)
      strsz = entry.d_un.d_val;
  }
  uint64_t strings = 0;
  if (!fileOffset(strtab, strings) || strings >= image.size)
    return false;
  uint64_t table = std::min<uint64_t>(strsz, image.size - strings);
  for (uint64_t name : needed) {
    if (name >= table)
      continue;
    const char *text =
        reinterpret_cast<const char *>(image.data + strings) + name;
    size_t length = strnlen(text, std::min<uint64_t>(table - name, 4096));
    if (std::string(text, length).find("blas") != std::string::npos)
      return true;
  }
  return false;
}

/// Under an address-space or data limit (ulimit -v, ulimit -d), makes sure
/// the BLAS library's buffers will fit before it is loaded and first used,
/// since it would spin, not fail, where they do not: reserves their bytes
/// (mapped, never touched) and releases them. Without a limit the mapping
/// always succeeds and costs nothing.
Status checkRoomForBlas(const std::string &what) {
  struct rlimit space, data;
  bool limited =
      (getrlimit(RLIMIT_AS, &space) == 0 && space.rlim_cur != RLIM_INFINITY) ||
      (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
  if (!limited)
    return Status();
  // A library loaded already has its threads' buffers: only the calling
  // thread's is still to come.
  void *loaded = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
  uint64_t threads = multiplyingThreads();
  uint64_t bytes =
      loaded ? threads * kOpenBlasBuffer
             : threads * (kOpenBlasBuffer + kThreadStack) + kLibraries;
  if (loaded)
    dlclose(loaded);
  void *room = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (room == MAP_FAILED)
    return outOfMemory(
        what,
        ": out of memory: loading it and the BLAS library's buffers "
        "for its ",
        threads, " thread(s) need ", bytes >> 20,
        " MiB, which the process's memory limit (ulimit -v or -d) does not "
        "leave; raise the limit, or use fewer threads (OMP_NUM_THREADS; "
        "136 MiB each)");
  munmap(room, bytes);
  return Status();
}

/// Has the BLAS library, when the code links one, map the buffers of the
/// threads that will multiply now, while checkRoomForBlas's room is free,
/// rather than in the first step's first products: OpenBLAS keeps its
/// buffers in one pool, a buffer for each call in flight, so as many
/// threads as the OpenMP team has each make one product big enough to take
/// the buffered path, at the same time (a start line lets them go together).
void warmUpBlas(void *handle) {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float *,
                         int, const float *, int, float, float *, int);
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(handle, "cblas_sgemm"));
  if (!sgemm)
    return;
  constexpr int n = 512;
  uint64_t threads = multiplyingThreads();
  // The matrices are allocated here: a thread's first malloc reserves a
  // heap of its own (128 MiB of address space with glibc), which a memory
  // limit would count against the room the buffers were promised.
  std::vector<float> a(n * n, 0.0f);
  std::vector<std::vector<float>> products(threads, std::vector<float>(n * n));
  std::mutex mutex;
  std::condition_variable ready;
  uint64_t waiting = threads;
  auto multiply = [&](std::vector<float> &c) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (--waiting == 0)
        ready.notify_all();
      else
        ready.wait(lock, [&] { return waiting == 0; });
    }
    // CblasRowMajor = 101, CblasNoTrans = 111.
    sgemm(101, 111, 111, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f,
          c.data(), n);
  };
  std::vector<std::thread> helpers;
  for (uint64_t i = 1; i < threads; ++i)
    helpers.emplace_back(multiply, std::ref(products[i]));
  multiply(products[0]);
  for (std::thread &helper : helpers)
    helper.join();
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
  if (!handle)
    return;
  if (cpuProfileEnabled()) {
    auto *table =
        static_cast<const char *>(dlsym(handle, "kiln_cpu_profile_table"));
    auto *slots =
        static_cast<const int64_t *>(dlsym(handle, "kiln_cpu_profile_slots"));
    std::string report;
    // Code compiled before kiln-profile-marks has no table.
    if (table && slots) {
      Status status = cpuProfileReport(name, table, slots, report);
      if (status.ok())
        writeCpuProfile("Kiln CPU profile of " + name + "\n" +
                        blasConfiguration(handle) + report);
      else
        std::fprintf(stderr, "kiln: %s\n", status.message().c_str());
    }
  }
  dlclose(handle);
}

Status CpuCode::load(ByteSpan image, const std::string &what,
                     std::unique_ptr<CpuCode> &out) {
  KILN_RETURN_IF_ERROR(checkElf(image, what));
  std::unique_ptr<CpuCode> code(new CpuCode());
  code->name = what;
  chooseOpenBlasKernels();
  useOneBlasThread();
  if (linksBlas(image))
    KILN_RETURN_IF_ERROR(checkRoomForBlas(what));
  Status viaMemfd = loadFromMemfd(image, code->handle);
  if (!viaMemfd.ok()) {
    Status viaFile = loadFromTempFile(image, code->handle);
    if (!viaFile.ok())
      return Status(viaFile.code(),
                    strCat(what, ": ", viaMemfd.message(),
                           "; from a temporary file: ", viaFile.message()));
  }
  setOneBlasThread(code->handle);
  checkChosenBlasKernels(code->handle);
  warmUpBlas(code->handle);
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
