//===- CudnnAttention.cpp - attention as cuDNN's fused SDPA ---------------===//

#include "CudnnAttention.h"

#include "kiln/runtime/ElementType.h"

#if KILN_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>
#endif

#include <unordered_map>

namespace kiln::runtime::cuda {

namespace bp = kiln::bundle;

/// Whether `attention` adds a mask to its scores.
static bool hasMask(const bp::Attention &attention) {
  return attention.has_mask() && attention.mask().buffer().size() > 0;
}

std::string describeCudnnAttention(const bp::Attention &attention) {
  return strCat("attention ", attention.backward() ? "backward" : "forward",
                " on cuDNN (", elementTypeName(attention.element_type()), ", ",
                attention.batch(), " x ", attention.heads(), " heads",
                attention.key_heads() &&
                        attention.key_heads() != attention.heads()
                    ? strCat(" (", attention.key_heads(), " key heads)")
                    : std::string(),
                ", ", attention.queries(), " queries, ", attention.keys(),
                " keys, head size ", attention.head_size(),
                attention.causal() ? ", causal" : "",
                hasMask(attention) ? ", masked" : "", ")");
}

#if KILN_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

namespace {

/// The tensors' ids in the graph and its variant pack.
enum Uid : int64_t {
  kQuery = 1,
  kKey,
  kValue,
  kOut,
  kStats,
  kGrad,
  kQueryGrad,
  kKeyGrad,
  kValueGrad,
  kBias,
};

/// Success, or the frontend's refusal, named.
Status checkFrontend(fe::error_t error, const char *step) {
  if (error.is_good())
    return Status();
  return unsupported("cuDNN's ", step,
                     " refused the graph: ", error.get_message());
}

} // namespace

class CudnnAttentionGraph {
public:
  fe::graph::Graph graph;
  /// Where each tensor of the variant pack lives, by id.
  std::unordered_map<int64_t, void *> pack;
  int64_t workspaceBytes = 0;
};

bool haveCudnnAttention() { return true; }

void CudnnAttentionGraphDeleter::operator()(CudnnAttentionGraph *graph) const {
  delete graph;
}

Status buildCudnnAttentionGraph(const bp::Attention &attention, int smVersion,
                                CudnnAttentionGraphPtr &out) {
  if (attention.element_type() != bp::BF16 &&
      attention.element_type() != bp::F16)
    return unsupported("attention on cuDNN of ",
                       elementTypeName(attention.element_type()),
                       " (bf16 or f16 expected)");
  CudnnAttentionGraphPtr made(new CudnnAttentionGraph());
  fe::graph::Graph &graph = made->graph;
  fe::DataType_t io = attention.element_type() == bp::BF16
                          ? fe::DataType_t::BFLOAT16
                          : fe::DataType_t::HALF;
  graph.set_sm_version(smVersion)
      .set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = attention.batch(), h = attention.heads(),
                q = attention.queries(), k = attention.keys(),
                d = attention.head_size(),
                kh = attention.key_heads() ? attention.key_heads() : h;
  // [batch, heads, rows, head size] at the command's strides, columns
  // dense; the key's, the value's and their gradients' have the key heads.
  auto matrix = [&](const char *name, Uid uid, int64_t rows,
                    const bp::AttentionTensor &tensor) {
    bool keyed =
        uid == kKey || uid == kValue || uid == kKeyGrad || uid == kValueGrad;
    return fe::graph::Tensor_attributes()
        .set_name(name)
        .set_uid(uid)
        .set_dim({b, keyed ? kh : h, rows, d})
        .set_stride({tensor.batch_stride(), tensor.head_stride(),
                     tensor.row_stride(), 1});
  };
  // One f32 per query row, packed.
  auto asStats = [&](fe::graph::Tensor_attributes &tensor) -> auto & {
    return tensor.set_uid(kStats)
        .set_dim({b, h, q, 1})
        .set_stride({h * q, q, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  };
  // An output the graph made, as `matrix` describes it.
  auto asMatrix = [&](fe::graph::Tensor_attributes &tensor, const char *name,
                      Uid uid, int64_t rows, const bp::AttentionTensor &ref) {
    fe::graph::Tensor_attributes shape = matrix(name, uid, rows, ref);
    tensor.set_output(true)
        .set_uid(uid)
        .set_dim(shape.get_dim())
        .set_stride(shape.get_stride());
  };
  auto query = graph.tensor(matrix("query", kQuery, q, attention.query()));
  auto key = graph.tensor(matrix("key", kKey, k, attention.key()));
  auto value = graph.tensor(matrix("value", kValue, k, attention.value()));
  // The mask, f32, added to the scores as cuDNN's bias: [batch, heads or
  // 1, queries, keys], a stride of 0 broadcasting (the runtime kernels'
  // layout of it).
  std::shared_ptr<fe::graph::Tensor_attributes> bias;
  if (hasMask(attention)) {
    const bp::AttentionTensor &mask = attention.mask();
    bool perHead = mask.head_stride() != 0;
    bias = graph.tensor(fe::graph::Tensor_attributes()
                            .set_name("mask")
                            .set_uid(kBias)
                            .set_dim({b, perHead ? h : 1, q, k})
                            .set_stride({mask.batch_stride(),
                                         perHead ? mask.head_stride() : q * k,
                                         mask.row_stride(), 1})
                            .set_data_type(fe::DataType_t::FLOAT));
  }
  // The causal mask keeps the keys up to each query's position (top left:
  // queries == keys).
  if (!attention.backward()) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_generate_stats(true)
                       .set_attn_scale(attention.scale())
                       .set_causal_mask(attention.causal());
    if (bias)
      options.set_bias(bias);
    auto [output, statistics] = graph.sdpa(query, key, value, options);
    asMatrix(*output, "out", kOut, q, attention.out());
    asStats(statistics->set_output(true));
  } else {
    auto output = graph.tensor(matrix("out", kOut, q, attention.out()));
    auto grad = graph.tensor(matrix("grad", kGrad, q, attention.grad()));
    fe::graph::Tensor_attributes stats;
    auto statistics = graph.tensor(asStats(stats.set_name("stats")));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_backward")
                       .set_attn_scale(attention.scale())
                       .set_causal_mask(attention.causal());
    if (bias)
      options.set_bias(bias);
    auto [queryGrad, keyGrad, valueGrad] = graph.sdpa_backward(
        query, key, value, output, grad, statistics, options);
    asMatrix(*queryGrad, "query_grad", kQueryGrad, q, attention.query_grad());
    asMatrix(*keyGrad, "key_grad", kKeyGrad, k, attention.key_grad());
    asMatrix(*valueGrad, "value_grad", kValueGrad, k, attention.value_grad());
  }
  KILN_RETURN_IF_ERROR(checkFrontend(graph.validate(), "validation"));
  out = std::move(made);
  return Status();
}

Status CudnnAttentionPlan::create(
    cudnnHandle_t handle, const bp::Attention &attention, int smVersion,
    const std::function<CUdeviceptr(const bp::BufferRef &)> &address,
    uint64_t &workspaceBytes, std::unique_ptr<CudnnAttentionPlan> &out) {
  std::unique_ptr<CudnnAttentionPlan> plan(new CudnnAttentionPlan());
  plan->text = describeCudnnAttention(attention);
  CudnnAttentionGraphPtr built;
  KILN_RETURN_IF_ERROR(buildCudnnAttentionGraph(attention, smVersion, built)
                           .withContext(plan->text));
  fe::graph::Graph &graph = built->graph;
  // The heuristic's engines for this GPU, the first it supports built.
  KILN_RETURN_IF_ERROR(
      checkFrontend(graph.build_operation_graph(handle), "operation graph")
          .withContext(plan->text));
  KILN_RETURN_IF_ERROR(
      checkFrontend(graph.create_execution_plans({fe::HeurMode_t::A}),
                    "heuristic")
          .withContext(plan->text));
  KILN_RETURN_IF_ERROR(
      checkFrontend(graph.check_support(handle), "support check")
          .withContext(plan->text));
  KILN_RETURN_IF_ERROR(
      checkFrontend(
          graph.build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE),
          "plan build")
          .withContext(plan->text));
  KILN_RETURN_IF_ERROR(
      checkFrontend(graph.get_workspace_size(built->workspaceBytes),
                    "workspace query")
          .withContext(plan->text));
  workspaceBytes = std::max<uint64_t>(
      workspaceBytes, static_cast<uint64_t>(built->workspaceBytes));
  auto at = [&](const bp::BufferRef &buffer) {
    return reinterpret_cast<void *>(address(buffer));
  };
  auto &pack = built->pack;
  pack[kQuery] = at(attention.query().buffer());
  pack[kKey] = at(attention.key().buffer());
  pack[kValue] = at(attention.value().buffer());
  pack[kOut] = at(attention.out().buffer());
  pack[kStats] = at(attention.stats());
  if (hasMask(attention))
    pack[kBias] = at(attention.mask().buffer());
  if (attention.backward()) {
    pack[kGrad] = at(attention.grad().buffer());
    pack[kQueryGrad] = at(attention.query_grad().buffer());
    pack[kKeyGrad] = at(attention.key_grad().buffer());
    pack[kValueGrad] = at(attention.value_grad().buffer());
  }
  plan->graph = std::move(built);
  out = std::move(plan);
  return Status();
}

Status CudnnAttentionPlan::enqueue(cudnnHandle_t handle, CUdeviceptr workspace,
                                   CUstream stream) const {
  cudnnStatus_t status = cudnnSetStream(handle, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    return internalError("cudnnSetStream: ", cudnnGetErrorString(status));
  return checkFrontend(
      graph->graph.execute(handle, graph->pack,
                           reinterpret_cast<void *>(workspace)),
      "execution");
}

#else // !KILN_HAVE_CUDNN_FRONTEND

class CudnnAttentionGraph {};

bool haveCudnnAttention() { return false; }

void CudnnAttentionGraphDeleter::operator()(CudnnAttentionGraph *graph) const {
  delete graph;
}

static Status noFrontend() {
  return unsupported("attention on cuDNN: this runtime was built without "
                     "cuDNN's frontend headers (scripts/cudnn-frontend.sh "
                     "fetches them; then configure the build again)");
}

Status buildCudnnAttentionGraph(const bp::Attention &, int,
                                CudnnAttentionGraphPtr &) {
  return noFrontend();
}

Status CudnnAttentionPlan::create(
    cudnnHandle_t, const bp::Attention &attention, int,
    const std::function<CUdeviceptr(const bp::BufferRef &)> &, uint64_t &,
    std::unique_ptr<CudnnAttentionPlan> &) {
  return noFrontend().withContext(describeCudnnAttention(attention));
}

Status CudnnAttentionPlan::enqueue(cudnnHandle_t, CUdeviceptr, CUstream) const {
  return noFrontend();
}

#endif // KILN_HAVE_CUDNN_FRONTEND

CudnnAttentionPlan::~CudnnAttentionPlan() = default;

} // namespace kiln::runtime::cuda
