//===- LayerNormPlan.cpp - the layer-norm kernels, loaded and launched ----===//

#include "LayerNormPlan.h"

#include "CudaErrors.h"

// The fatbin LayerNorm.cu compiles to (LayerNormImage.cpp).
extern "C" const unsigned char kiln_layer_norm_fatbin[];

namespace kiln::runtime::cuda {

namespace bp = kiln::bundle;
namespace ln = kiln::layer_norm;

Status LayerNormKernels::load(std::unique_ptr<LayerNormKernels> &out) {
  std::unique_ptr<LayerNormKernels> kernels(new LayerNormKernels());
  KILN_RETURN_IF_ERROR(
      checkCu(cuModuleLoadData(&kernels->module, kiln_layer_norm_fatbin),
              "cuModuleLoadData")
          .withContext("loading the layer-norm kernels"));
  out = std::move(kernels);
  return Status();
}

LayerNormKernels::~LayerNormKernels() {
  if (module)
    cuModuleUnload(module);
}

Status LayerNormKernels::function(const std::string &name,
                                  CUfunction &out) const {
  return checkCu(cuModuleGetFunction(&out, module, name.c_str()),
                 "cuModuleGetFunction")
      .withContext(strCat("layer-norm kernel '", name, "'"));
}

/// The forward kernel's name suffix for an output type the bundle reader
/// accepted, and the backward's 16-bit ones.
static const char *outputTypeName(int elementType) {
  switch (elementType) {
  case bp::BF16:
    return ln::BF16Output::name;
  case bp::F16:
    return ln::F16Output::name;
  default:
    return ln::F32Output::name;
  }
}

Status LayerNormPlan::create(
    const LayerNormKernels &kernels, const bp::LayerNorm &layerNorm,
    const std::function<CUdeviceptr(const bp::BufferRef &)> &address,
    std::unique_ptr<LayerNormPlan> &out) {
  std::unique_ptr<LayerNormPlan> plan(new LayerNormPlan());
  ln::Params &p = plan->params;
  p.rows = layerNorm.rows();
  p.cols = layerNorm.cols();
  p.epsilon = layerNorm.epsilon();
  auto floats = [&](const bp::BufferRef &buffer) {
    return reinterpret_cast<float *>(address(buffer));
  };
  // An optional tensor, unset or of size 0: none (null).
  auto optional = [&](bool has, const bp::BufferRef &buffer) -> float * {
    return has && buffer.size() > 0 ? floats(buffer) : nullptr;
  };
  // The bundle reader checked the types of what it reads (unset: f32).
  auto element = [](int type) {
    return type == bp::BF16 ? ln::kBF16 : type == bp::F16 ? ln::kF16 : ln::kF32;
  };
  p.input = floats(layerNorm.input());
  p.inputType = element(layerNorm.input_type());
  p.scale = floats(layerNorm.scale());
  // The bundle reader checked the grid sizes against the driver's limits.
  auto add = [&](const std::string &kernel, int64_t blocks,
                 unsigned sharedBytes) {
    Launch &launch = plan->launches[plan->count++];
    launch.kernel = kernel;
    launch.blocks = static_cast<unsigned>(blocks);
    launch.sharedBytes = sharedBytes;
    return kernels.function(kernel, launch.function);
  };
  std::string shape = strCat(p.rows, "x", p.cols);
  if (!layerNorm.backward()) {
    p.bias = optional(layerNorm.has_bias(), layerNorm.bias());
    p.output = reinterpret_cast<void *>(address(layerNorm.output()));
    // The bundle reader checked that `sum` is set exactly when `residual`
    // is.
    p.residual = optional(layerNorm.has_residual(), layerNorm.residual());
    p.residualType = element(layerNorm.residual_type());
    if (p.residual)
      p.sum = floats(layerNorm.sum());
    std::string type = outputTypeName(layerNorm.output_type());
    // The rounded copy, if any: the bundle reader checked that the output
    // is f32 and the copy's type BF16 or F16 when it is set.
    if (layerNorm.has_copy() && layerNorm.copy().size() > 0) {
      p.copy = reinterpret_cast<void *>(address(layerNorm.copy()));
      type = strCat(type, "_", outputTypeName(layerNorm.copy_type()));
    }
    KILN_RETURN_IF_ERROR(add(strCat("kiln_layer_norm_forward_", type),
                             ln::forwardBlocks(p.rows), 0));
    plan->text = strCat("layer norm ", shape, p.residual ? " + residual" : "",
                        " -> ", type);
  } else {
    p.grad = floats(layerNorm.grad());
    p.gradType = element(layerNorm.grad_type());
    p.accumulate = optional(layerNorm.has_accumulate(), layerNorm.accumulate());
    p.accumulateType = element(layerNorm.accumulate_type());
    p.inputGrad = floats(layerNorm.input_grad());
    p.scaleGrad = floats(layerNorm.scale_grad());
    p.biasGrad = floats(layerNorm.bias_grad());
    p.partials = floats(layerNorm.partials());
    // The rounded input gradient, if any: the bundle reader checked that
    // its type is BF16 or F16 exactly when it is set.
    const bool rounded =
        layerNorm.has_output() && layerNorm.output().size() > 0;
    std::string rowsKernel = "kiln_layer_norm_backward_rows", suffix;
    if (rounded) {
      p.output = reinterpret_cast<void *>(address(layerNorm.output()));
      const char *type = outputTypeName(layerNorm.output_type());
      rowsKernel = strCat(rowsKernel, "_", type);
      suffix = strCat(" -> ", type);
    }
    KILN_RETURN_IF_ERROR(
        add(rowsKernel, ln::partialBlocks(p.rows), ln::kBackwardSharedBytes));
    KILN_RETURN_IF_ERROR(
        add("kiln_layer_norm_backward_columns", ln::columnBlocks(p.cols), 0));
    plan->text = strCat("layer norm backward ", shape,
                        p.accumulate ? " + accumulate" : "", suffix);
  }
  out = std::move(plan);
  return Status();
}

Status LayerNormPlan::enqueue(CUstream stream) const {
  void *arguments[] = {const_cast<ln::Params *>(&params)};
  for (int i = 0; i < count; ++i) {
    const Launch &launch = launches[i];
    KILN_RETURN_IF_ERROR(
        checkCu(cuLaunchKernel(launch.function, launch.blocks, 1, 1,
                               ln::kThreads, 1, 1, launch.sharedBytes, stream,
                               arguments, nullptr),
                "cuLaunchKernel")
            .withContext(strCat("kernel '", launch.kernel, "'")));
  }
  return Status();
}

} // namespace kiln::runtime::cuda
