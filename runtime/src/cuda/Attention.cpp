//===- Attention.cpp - the attention kernels, loaded and launched ---------===//

#include "Attention.h"

#include "CudaErrors.h"

// The fatbin FlashAttention.cu compiles to (FlashAttentionImage.cpp).
extern "C" const unsigned char kiln_flash_attention_fatbin[];

namespace kiln::runtime::cuda {

namespace bp = kiln::bundle;

Status AttentionKernels::load(std::unique_ptr<AttentionKernels> &out) {
  std::unique_ptr<AttentionKernels> kernels(new AttentionKernels());
  KILN_RETURN_IF_ERROR(
      checkCu(cuModuleLoadData(&kernels->module, kiln_flash_attention_fatbin),
              "cuModuleLoadData")
          .withContext("loading the attention kernels"));
  out = std::move(kernels);
  return Status();
}

AttentionKernels::~AttentionKernels() {
  if (module)
    cuModuleUnload(module);
}

Status AttentionKernels::function(const std::string &name, int sharedBytes,
                                  CUfunction &out) const {
  std::string what = strCat("attention kernel '", name, "'");
  KILN_RETURN_IF_ERROR(checkCu(cuModuleGetFunction(&out, module, name.c_str()),
                               "cuModuleGetFunction")
                           .withContext(what));
  return checkCu(cuFuncSetAttribute(
                     out, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     sharedBytes),
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
      .withContext(what);
}

Status AttentionPlan::create(
    const AttentionKernels &kernels, const bp::Attention &attention,
    const std::function<CUdeviceptr(const bp::BufferRef &)> &address,
    std::unique_ptr<AttentionPlan> &out) {
  std::unique_ptr<AttentionPlan> plan(new AttentionPlan());
  flash::Params &p = plan->params;
  p.batch = static_cast<int>(attention.batch());
  p.heads = static_cast<int>(attention.heads());
  p.queries = static_cast<int>(attention.queries());
  p.keys = static_cast<int>(attention.keys());
  p.scale = attention.scale();
  p.causal = attention.causal();
  auto tensor = [&](const bp::AttentionTensor &t) {
    flash::TensorRef ref;
    ref.data = reinterpret_cast<void *>(address(t.buffer()));
    ref.batch = t.batch_stride();
    ref.head = t.head_stride();
    ref.row = t.row_stride();
    return ref;
  };
  p.q = tensor(attention.query());
  p.k = tensor(attention.key());
  p.v = tensor(attention.value());
  p.o = tensor(attention.out());
  if (attention.has_mask() && attention.mask().buffer().size() > 0)
    p.mask = tensor(attention.mask());
  p.stats = reinterpret_cast<float *>(address(attention.stats()));
  p.maskedFill = attention.masked_fill() ? 1 : 0;
  p.causalFill = attention.causal_fill() ? 1 : 0;
  if (attention.backward()) {
    p.dout = tensor(attention.grad());
    p.dq = tensor(attention.query_grad());
    p.dk = tensor(attention.key_grad());
    p.dv = tensor(attention.value_grad());
    p.delta = reinterpret_cast<float *>(address(attention.delta()));
  }
  int d = static_cast<int>(attention.head_size());
  std::string type = attention.element_type() == bp::BF16 ? "bf16" : "f16";
  std::string suffix = strCat("_", type, "_d", d);
  unsigned heads = static_cast<unsigned>(p.batch * p.heads);
  auto blocks = [](int rows) {
    return static_cast<unsigned>((rows + flash::kBlockRows - 1) /
                                 flash::kBlockRows);
  };
  auto add = [&](const std::string &kernel, unsigned rowBlocks,
                 int sharedBytes) {
    Launch &launch = plan->launches[plan->count++];
    launch.kernel = kernel;
    launch.grid[0] = rowBlocks;
    launch.grid[1] = heads;
    launch.sharedBytes = sharedBytes;
    return kernels.function(kernel, sharedBytes, launch.function);
  };
  if (!attention.backward()) {
    KILN_RETURN_IF_ERROR(add("kiln_flash_forward" + suffix, blocks(p.queries),
                             flash::forwardSharedBytes(d)));
  } else {
    KILN_RETURN_IF_ERROR(add("kiln_flash_dq" + suffix, blocks(p.queries),
                             flash::dqSharedBytes(d)));
    KILN_RETURN_IF_ERROR(add("kiln_flash_dkdv" + suffix, blocks(p.keys),
                             flash::dkdvSharedBytes(d)));
  }
  plan->text =
      strCat("attention ", attention.backward() ? "backward" : "forward", " (",
             type, ", ", p.batch, " x ", p.heads, " heads, ", p.queries,
             " queries, ", p.keys, " keys, head size ", d,
             p.causal ? ", causal" : "", p.mask.data ? ", masked" : "", ")");
  out = std::move(plan);
  return Status();
}

Status AttentionPlan::enqueue(CUstream stream) const {
  void *arguments[] = {const_cast<flash::Params *>(&params)};
  for (int i = 0; i < count; ++i) {
    const Launch &launch = launches[i];
    KILN_RETURN_IF_ERROR(
        checkCu(cuLaunchKernel(launch.function, launch.grid[0], launch.grid[1],
                               1, flash::kThreads, 1, 1,
                               static_cast<unsigned>(launch.sharedBytes),
                               stream, arguments, nullptr),
                "cuLaunchKernel")
            .withContext(strCat("kernel '", launch.kernel, "'")));
  }
  return Status();
}

} // namespace kiln::runtime::cuda
