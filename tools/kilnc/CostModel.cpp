//===- CostModel.cpp - kilnc --report=cost
//---------------------------------===//

#include "CostModel.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>
#include <variant>

using namespace kilnc;

namespace {

// NVIDIA's datasheet figures: H100 and H200 SXM, A100 SXM 80 GB.
const GpuModel kGpus[] = {
    {"h100", "NVIDIA H100 SXM", 989.4e12, 66.9e12, 3.35e12},
    {"h200", "NVIDIA H200 SXM", 989.4e12, 66.9e12, 4.8e12},
    {"a100", "NVIDIA A100 SXM 80GB", 312e12, 19.5e12, 2.039e12},
};

std::string typeName(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (type)
    type.print(os);
  return text;
}

/// Seconds of `flops` at `rate` or of `bytes` at `bandwidth`, whichever is
/// longer; `computeBound` says which.
double roofline(double flops, double rate, double bytes, double bandwidth,
                bool &computeBound) {
  double compute = rate > 0 ? flops / rate : 0;
  double memory = bandwidth > 0 ? bytes / bandwidth : 0;
  computeBound = compute > memory;
  return std::max(compute, memory);
}

std::string dims(int64_t batch, int64_t m, int64_t n, int64_t k) {
  std::string text = batch > 1 ? std::to_string(batch) + " x " : "";
  return text + std::to_string(m) + "x" + std::to_string(n) + "x" +
         std::to_string(k);
}

} // namespace

const GpuModel *kilnc::findGpu(llvm::StringRef name) {
  for (const GpuModel &gpu : kGpus)
    if (name == gpu.name)
      return &gpu;
  return nullptr;
}

std::string kilnc::gpuNames() {
  std::string names;
  for (const GpuModel &gpu : kGpus)
    names += (names.empty() ? "" : ", ") + std::string(gpu.name);
  return names;
}

std::vector<CommandCost> kilnc::costProgram(const kiln::CudaProgram &program,
                                            const kiln::CUDACode &code,
                                            const GpuModel &gpu,
                                            const Efficiency &efficiency) {
  std::vector<CommandCost> costs;
  for (const kiln::CudaCommand &command : program.commands) {
    CommandCost cost;
    double rate = 0, computeEfficiency = 1;
    if (auto *launch = std::get_if<kiln::CudaLaunch>(&command)) {
      // Generated kernels: elementwise work and reductions, memory-bound;
      // each buffer is read or written once.
      cost.kind = "kernel";
      cost.what = launch->kernel < code.kernels.size()
                      ? code.kernels[launch->kernel]
                      : "kernel " + std::to_string(launch->kernel);
      for (const kiln::CudaBuffer &buffer : launch->buffers)
        cost.bytes += buffer.size;
    } else if (auto *gemm = std::get_if<kiln::CudaGemm>(&command)) {
      cost.kind = "gemm";
      int64_t batch = std::max<int64_t>(1, gemm->batch);
      cost.flops = 2.0 * batch * gemm->m * gemm->n * gemm->k;
      cost.bytes = gemm->a.size + gemm->b.size +
                   gemm->c.size * (gemm->beta != 0 ? 2.0 : 1.0) +
                   gemm->bias.size + gemm->biasGrad.size + gemm->aux.size;
      bool f32 = gemm->inputElement && gemm->inputElement.isF32();
      rate = f32 ? gpu.f32Flops : gpu.tensorFlops;
      computeEfficiency = efficiency.gemm;
      cost.what =
          typeName(gemm->inputElement) + " " +
          dims(batch, gemm->m, gemm->n, gemm->k) + " -> " +
          typeName(gemm->element) + (gemm->transposeA ? " A^T" : "") +
          (gemm->transposeB ? " B^T" : "") + (gemm->beta != 0 ? " C+=" : "") +
          (gemm->bias.size ? " +bias" : "") +
          (gemm->biasGrad.size ? " +bias grad" : "") +
          (gemm->epilogue == kiln::CudaGemm::Epilogue::Gelu
               ? (gemm->aux.size ? " +gelu aux" : " +gelu")
           : gemm->epilogue == kiln::CudaGemm::Epilogue::GeluGrad ? " +dgelu"
                                                                  : "");
    } else if (auto *attention = std::get_if<kiln::CudaAttention>(&command)) {
      cost.kind = "attention";
      // Forward: S = Q K^T and O = P V; backward (flash): S again, dP,
      // dV, dQ and dK, five products. Causal: about half the scores.
      double product = 2.0 * attention->batch * attention->heads *
                       attention->queries * attention->keys *
                       attention->headSize;
      double kept = attention->causal && attention->keys > 0
                        ? (attention->keys + 1) / (2.0 * attention->keys)
                        : 1.0;
      cost.flops = product * (attention->backward ? 5 : 2) * kept;
      for (const kiln::CudaBuffer *buffer :
           {&attention->query, &attention->key, &attention->value,
            &attention->mask, &attention->out, &attention->stats,
            &attention->grad, &attention->queryGrad, &attention->keyGrad,
            &attention->valueGrad, &attention->delta})
        cost.bytes += buffer->size;
      rate = gpu.tensorFlops;
      computeEfficiency = efficiency.attention;
      cost.what =
          std::string("attention ") +
          (attention->backward ? "backward" : "forward") + " (" +
          typeName(attention->element) + ", " +
          std::to_string(attention->batch) + " x " +
          std::to_string(attention->heads) + " heads, " +
          (attention->keyHeads && attention->keyHeads != attention->heads
               ? std::to_string(attention->keyHeads) + " key heads, "
               : std::string()) +
          std::to_string(attention->queries) + " queries, " +
          std::to_string(attention->keys) + " keys, head size " +
          std::to_string(attention->headSize) +
          (attention->causal ? ", causal" : "") +
          (attention->cudnn ? ", cuDNN)" : ")");
    } else if (auto *norm = std::get_if<kiln::CudaLayerNorm>(&command)) {
      cost.kind = "layer_norm";
      for (const kiln::CudaBuffer *buffer :
           {&norm->input, &norm->scale, &norm->bias, &norm->residual,
            &norm->output, &norm->sum, &norm->grad, &norm->accumulate,
            &norm->inputGrad, &norm->scaleGrad, &norm->biasGrad,
            &norm->partials, &norm->copy})
        cost.bytes += buffer->size;
      cost.what = std::string("layer_norm ") +
                  (norm->backward ? "backward " : "forward ") +
                  std::to_string(norm->rows) + "x" + std::to_string(norm->cols);
    } else {
      // All-reduces, their waits and the sharded optimizer's collectives:
      // communication, which one GPU's roofline does not cover.
      cost.kind = "collective";
      cost.what = std::holds_alternative<kiln::CudaWait>(command)
                      ? "wait"
                      : "collective";
      costs.push_back(cost);
      continue;
    }
    cost.boundSeconds = roofline(cost.flops, rate, cost.bytes, gpu.bandwidth,
                                 cost.computeBound);
    bool computeBound = false;
    cost.seconds = roofline(cost.flops, rate * computeEfficiency, cost.bytes,
                            gpu.bandwidth * efficiency.memory, computeBound) +
                   efficiency.commandSeconds;
    costs.push_back(cost);
  }
  return costs;
}

void kilnc::printCostReport(const kiln::CompiledModel &model,
                            const GpuModel &gpu, llvm::raw_ostream &os) {
  Efficiency efficiency;
  os << "cost report: " << gpu.description << " ("
     << llvm::format("%.0f", gpu.tensorFlops / 1e12)
     << " TFLOP/s bf16/f16 tensor cores, "
     << llvm::format("%.1f", gpu.f32Flops / 1e12) << " TFLOP/s f32, "
     << llvm::format("%.2f", gpu.bandwidth / 1e12) << " TB/s)\n"
     << "predicted: products at " << llvm::format("%.0f", efficiency.gemm * 100)
     << "% of the peak, attention at "
     << llvm::format("%.0f", efficiency.attention * 100) << "%, memory at "
     << llvm::format("%.0f", efficiency.memory * 100) << "% of the bandwidth, "
     << llvm::format("%.1f", efficiency.commandSeconds * 1e6)
     << " us per command; lower bound: the peaks, nothing per command\n";
  for (const kiln::CudaProgram &program : model.cuda->programs) {
    std::vector<CommandCost> costs =
        costProgram(program, *model.cuda, gpu, efficiency);
    double predicted = 0, bound = 0;
    struct Sum {
      int64_t commands = 0;
      double flops = 0, bytes = 0, seconds = 0, boundSeconds = 0;
    };
    std::map<std::string, Sum> kinds;
    for (const CommandCost &cost : costs) {
      predicted += cost.seconds;
      bound += cost.boundSeconds;
      Sum &sum = kinds[cost.kind];
      ++sum.commands;
      sum.flops += cost.flops;
      sum.bytes += cost.bytes;
      sum.seconds += cost.seconds;
      sum.boundSeconds += cost.boundSeconds;
    }
    os << "entry point '" << program.entry << "': " << costs.size()
       << " commands, predicted " << llvm::format("%.3f", predicted * 1e3)
       << " ms, lower bound " << llvm::format("%.3f", bound * 1e3) << " ms\n";
    os << "  kind         commands      GFLOP         GB  predicted ms   "
          "share  bound ms\n";
    std::vector<std::pair<std::string, Sum>> byKind(kinds.begin(), kinds.end());
    std::sort(byKind.begin(), byKind.end(), [](const auto &a, const auto &b) {
      return a.second.seconds != b.second.seconds
                 ? a.second.seconds > b.second.seconds
                 : a.first < b.first;
    });
    for (const auto &[kind, sum] : byKind)
      os << "  " << llvm::left_justify(kind, 11)
         << llvm::format("%9lld %10.2f %10.3f %13.3f %6.1f%% %9.3f\n",
                         static_cast<long long>(sum.commands), sum.flops / 1e9,
                         sum.bytes / 1e9, sum.seconds * 1e3,
                         predicted > 0 ? 100 * sum.seconds / predicted : 0.0,
                         sum.boundSeconds * 1e3);
    std::vector<size_t> order(costs.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return costs[a].seconds != costs[b].seconds
                 ? costs[a].seconds > costs[b].seconds
                 : a < b;
    });
    os << "  the 20 costliest commands:\n"
       << "   command  predicted ms      GFLOP         MB  bound    kind  "
          "        what\n";
    for (size_t i = 0; i < order.size() && i < 20; ++i) {
      const CommandCost &cost = costs[order[i]];
      os << llvm::format("  %8zu %13.4f %10.4f %10.3f  %-7s  ", order[i],
                         cost.seconds * 1e3, cost.flops / 1e9, cost.bytes / 1e6,
                         cost.kind == "collective" ? "-"
                         : cost.computeBound       ? "compute"
                                                   : "memory")
         << llvm::left_justify(cost.kind, 12) << cost.what << "\n";
    }
  }
}
