//===- TestBundles.cpp - bundles the runtime tests run --------------------===//

#include "TestBundles.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <sys/wait.h>

namespace kiln::runtime::testing {

namespace bp = kiln::bundle;

namespace {

bp::TensorSpec tensor(const std::string &name, bp::ElementType type,
                      const std::vector<int64_t> &shape) {
  bp::TensorSpec spec;
  spec.set_name(name);
  spec.set_element_type(type);
  for (int64_t dim : shape)
    spec.add_shape(dim);
  return spec;
}

bp::BufferRef buffer(bp::BufferRef::Kind kind, uint32_t index, uint64_t offset,
                     uint64_t size) {
  bp::BufferRef ref;
  ref.set_kind(kind);
  ref.set_index(index);
  ref.set_offset(offset);
  ref.set_size(size);
  return ref;
}

void addKernelCall(bp::EntryPoint &entry, const std::string &symbol,
                   std::initializer_list<bp::BufferRef> buffers) {
  bp::KernelCall *call = entry.add_commands()->mutable_kernel();
  call->set_symbol(symbol);
  for (const bp::BufferRef &ref : buffers)
    *call->add_buffers() = ref;
}

void addAddOne(bp::Manifest &manifest) {
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("add_one");
  *entry.add_inputs() = tensor("x", bp::F32, {4});
  *entry.add_outputs() = tensor("y", bp::F32, {4});
  addKernelCall(entry, "add_one",
                {buffer(bp::BufferRef::INPUT, 0, 0, 16),
                 buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});
}

void addAffine(bp::Manifest &manifest, uint32_t w, uint32_t b) {
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("affine");
  *entry.add_inputs() = tensor("x", bp::F32, {2, 2});
  *entry.add_outputs() = tensor("y", bp::F32, {2, 2});
  // The temporary sits at offset 64 of a 128-byte arena, so a wrong arena
  // base would show.
  entry.set_arena_bytes(128);
  entry.set_arena_alignment(64);
  addKernelCall(entry, "mul_param",
                {buffer(bp::BufferRef::INPUT, 0, 0, 16),
                 buffer(bp::BufferRef::PARAM, w, 0, 16),
                 buffer(bp::BufferRef::ARENA, 0, 64, 16)});
  addKernelCall(entry, "add_param",
                {buffer(bp::BufferRef::ARENA, 0, 64, 16),
                 buffer(bp::BufferRef::PARAM, b, 0, 16),
                 buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});
}

void addMixed(bp::Manifest &manifest) {
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("mixed");
  *entry.add_inputs() = tensor("n", bp::I64, {3});
  *entry.add_inputs() = tensor("flag", bp::BOOL, {3});
  *entry.add_outputs() = tensor("out", bp::F64, {3});
  addKernelCall(entry, "select_scale",
                {buffer(bp::BufferRef::INPUT, 0, 0, 24),
                 buffer(bp::BufferRef::INPUT, 1, 0, 3),
                 buffer(bp::BufferRef::OUTPUT, 0, 0, 24)});
}

void addAccumulate(bp::Manifest &manifest, uint32_t acc) {
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("accumulate");
  *entry.add_inputs() = tensor("x", bp::F32, {4});
  *entry.add_outputs() = tensor("y", bp::F32, {4});
  addKernelCall(entry, "accumulate",
                {buffer(bp::BufferRef::INPUT, 0, 0, 16),
                 buffer(bp::BufferRef::PARAM, acc, 0, 16),
                 buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});
}

/// train_step of the toy; without `withLr` its lr and grad_norm go to the
/// arena instead of outputs.
void addToyTrainStep(bp::Manifest &manifest, uint32_t w, uint32_t step,
                     uint32_t acc, bool withLr) {
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("train_step");
  *entry.add_inputs() = tensor("x", bp::F32, {3});
  *entry.add_outputs() = tensor("loss", bp::F32, {});
  bp::BufferRef lr = buffer(bp::BufferRef::ARENA, 0, 0, 4);
  bp::BufferRef gradNorm = buffer(bp::BufferRef::ARENA, 0, 4, 4);
  if (withLr) {
    *entry.add_outputs() = tensor("lr", bp::F32, {});
    *entry.add_outputs() = tensor("grad_norm", bp::F32, {});
    lr = buffer(bp::BufferRef::OUTPUT, 1, 0, 4);
    gradNorm = buffer(bp::BufferRef::OUTPUT, 2, 0, 4);
  } else {
    entry.set_arena_bytes(64);
  }
  addKernelCall(entry, "toy_train_step",
                {buffer(bp::BufferRef::INPUT, 0, 0, 12),
                 buffer(bp::BufferRef::PARAM, w, 0, 4),
                 buffer(bp::BufferRef::PARAM, step, 0, 4),
                 buffer(bp::BufferRef::PARAM, acc, 0, 4),
                 buffer(bp::BufferRef::OUTPUT, 0, 0, 4), lr, gradNorm});
}

void addToyAccumulateStep(bp::Manifest &manifest, uint32_t acc) {
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("accumulate_step");
  *entry.add_inputs() = tensor("x", bp::F32, {3});
  *entry.add_outputs() = tensor("loss", bp::F32, {});
  addKernelCall(entry, "toy_accumulate_step",
                {buffer(bp::BufferRef::INPUT, 0, 0, 12),
                 buffer(bp::BufferRef::PARAM, acc, 0, 4),
                 buffer(bp::BufferRef::OUTPUT, 0, 0, 4)});
}

void addCpuTarget(BundleWriter &writer, std::string code,
                  std::initializer_list<const char *> kernels) {
  bp::Target target;
  target.set_name("cpu");
  target.set_triple("x86_64-unknown-linux-gnu");
  target.set_cpu("generic");
  for (const char *kernel : kernels)
    target.add_kernels(kernel);
  writer.addTarget(target, std::move(code));
}

void addLaunch(bp::Program &program, uint32_t kernel, uint32_t threads,
               std::initializer_list<bp::BufferRef> buffers) {
  bp::KernelLaunch *launch = program.add_commands()->mutable_launch();
  launch->set_kernel(kernel);
  for (uint32_t size : {1u, 1u, 1u})
    launch->add_grid(size);
  for (uint32_t size : {threads, 1u, 1u})
    launch->add_block(size);
  for (const bp::BufferRef &ref : buffers)
    *launch->add_buffers() = ref;
}

bp::Program &addProgram(bp::EntryPoint &entry, uint64_t arenaBytes = 0) {
  bp::Program &program = *entry.add_programs();
  program.set_target("cuda");
  program.set_arena_bytes(arenaBytes);
  return program;
}

/// The kernels of kernels.ptx, in the order launches index them.
enum CudaKernel : uint32_t { AddOne, AddBias, Accumulate, Copy24, Fault };

void addCudaTarget(BundleWriter &writer,
                   std::vector<BundleWriter::Image> images) {
  bp::Target target;
  target.set_name("cuda");
  target.set_triple("nvptx64-nvidia-cuda");
  for (const char *kernel :
       {"add_one", "add_bias", "accumulate", "copy24", "fault"})
    target.add_kernels(kernel);
  writer.addTarget(target, std::move(images));
}

void addCudaAddOne(bp::EntryPoint &entry) {
  addLaunch(addProgram(entry), AddOne, 32,
            {buffer(bp::BufferRef::INPUT, 0, 0, 16),
             buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});
}

/// A row-major f32 gemm without batches: C = A B, leading dimensions the
/// widths.
bp::Gemm &addGemm(bp::Program &program, int64_t m, int64_t n, int64_t k) {
  bp::Gemm &gemm = *program.add_commands()->mutable_gemm();
  gemm.set_a_type(bp::F32);
  gemm.set_b_type(bp::F32);
  gemm.set_c_type(bp::F32);
  gemm.set_m(m);
  gemm.set_n(n);
  gemm.set_k(k);
  gemm.set_lda(k);
  gemm.set_ldb(n);
  gemm.set_ldc(n);
  gemm.set_alpha(1);
  gemm.set_beta(0);
  return gemm;
}

void addAllReduceMean(bp::Program &program, const bp::BufferRef &ref,
                      uint32_t request) {
  bp::AllReduceMean &allReduce =
      *program.add_commands()->mutable_all_reduce_mean();
  allReduce.set_element_type(bp::F32);
  allReduce.set_count(ref.size() / 4);
  *allReduce.mutable_buffer() = ref;
  allReduce.set_request(request);
}

void addCollectiveWait(bp::Program &program, uint32_t request) {
  program.add_commands()->mutable_collective_wait()->set_request(request);
}

} // namespace

void buildHybridBundle(BundleWriter &writer, std::string code,
                       std::string ptx) {
  buildSingleBundle(writer, std::move(code));
  writer.manifest().set_model_name("hybrid");
  addCudaAddOne(*writer.manifest().mutable_entry_points(0));
  addCudaTarget(writer, {{bp::CodeImage::PTX, "compute_80", std::move(ptx)}});
}

void buildCudaBundle(BundleWriter &writer,
                     std::vector<BundleWriter::Image> images) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("cuda");
  uint32_t w = writer.addParameter(tensor("w", bp::F32, {4, 3}), kCudaW,
                                   sizeof(kCudaW), true);
  uint32_t bias = writer.addParameter(tensor("bias", bp::F32, {3}), kCudaBias,
                                      sizeof(kCudaBias), true);
  uint32_t acc = writer.addParameter(tensor("acc", bp::F32, {4}), kWeightAcc,
                                     sizeof(kWeightAcc), false);
  std::vector<float> g(24, kCudaG);
  uint32_t gIndex =
      writer.addParameter(tensor("g", bp::F32, {2, 3, 4}), g.data(),
                          g.size() * sizeof(float), false);

  bp::EntryPoint &affine = *manifest.add_entry_points();
  affine.set_name("affine");
  *affine.add_inputs() = tensor("x", bp::F32, {2, 4});
  *affine.add_outputs() = tensor("y", bp::F32, {2, 3});
  // The product sits at offset 256 of the arena, so a wrong arena base
  // would show.
  bp::Program &affineProgram = addProgram(affine, 512);
  bp::Gemm &product = addGemm(affineProgram, 2, 3, 4);
  *product.mutable_a() = buffer(bp::BufferRef::INPUT, 0, 0, 32);
  *product.mutable_b() = buffer(bp::BufferRef::PARAM, w, 0, 48);
  *product.mutable_c() = buffer(bp::BufferRef::ARENA, 0, 256, 24);
  addLaunch(affineProgram, AddBias, 64,
            {buffer(bp::BufferRef::ARENA, 0, 256, 24),
             buffer(bp::BufferRef::PARAM, bias, 0, 12),
             buffer(bp::BufferRef::OUTPUT, 0, 0, 24)});

  bp::EntryPoint &accumulate = *manifest.add_entry_points();
  accumulate.set_name("accumulate");
  *accumulate.add_inputs() = tensor("x", bp::F32, {4});
  *accumulate.add_outputs() = tensor("y", bp::F32, {4});
  addLaunch(addProgram(accumulate), Accumulate, 4,
            {buffer(bp::BufferRef::INPUT, 0, 0, 16),
             buffer(bp::BufferRef::PARAM, acc, 0, 16),
             buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});

  bp::EntryPoint &batched = *manifest.add_entry_points();
  batched.set_name("batched");
  *batched.add_inputs() = tensor("a", bp::F32, {2, 5, 3});
  *batched.add_inputs() = tensor("b", bp::F32, {2, 4, 5});
  *batched.add_outputs() = tensor("c", bp::F32, {2, 3, 4});
  bp::Program &batchedProgram = addProgram(batched);
  bp::Gemm &gemm = addGemm(batchedProgram, 3, 4, 5);
  gemm.set_transpose_a(true);
  gemm.set_transpose_b(true);
  gemm.set_batch(2);
  gemm.set_lda(3);
  gemm.set_ldb(5);
  gemm.set_ldc(4);
  gemm.set_stride_a(15);
  gemm.set_stride_b(20);
  gemm.set_stride_c(12);
  gemm.set_alpha(0.5f);
  gemm.set_beta(1);
  *gemm.mutable_a() = buffer(bp::BufferRef::INPUT, 0, 0, 120);
  *gemm.mutable_b() = buffer(bp::BufferRef::INPUT, 1, 0, 160);
  *gemm.mutable_c() = buffer(bp::BufferRef::PARAM, gIndex, 0, 96);
  addLaunch(batchedProgram, Copy24, 32,
            {buffer(bp::BufferRef::PARAM, gIndex, 0, 96),
             buffer(bp::BufferRef::OUTPUT, 0, 0, 96)});

  bp::EntryPoint &addOne = *manifest.add_entry_points();
  addOne.set_name("add_one");
  *addOne.add_inputs() = tensor("x", bp::F32, {4});
  *addOne.add_outputs() = tensor("y", bp::F32, {4});
  addCudaAddOne(addOne);

  // The leading dimensions of kiln-pad-matrix-rows: a's rows padded to 6
  // elements (the last 2 never read), c's to 4 (the last never written).
  bp::EntryPoint &padded = *manifest.add_entry_points();
  padded.set_name("padded");
  *padded.add_inputs() = tensor("a", bp::F32, {2, 6});
  *padded.add_outputs() = tensor("c", bp::F32, {2, 4});
  bp::Gemm &paddedGemm = addGemm(addProgram(padded), 2, 3, 4);
  paddedGemm.set_lda(6);
  paddedGemm.set_ldc(4);
  *paddedGemm.mutable_a() = buffer(bp::BufferRef::INPUT, 0, 0, 48);
  *paddedGemm.mutable_b() = buffer(bp::BufferRef::PARAM, w, 0, 48);
  *paddedGemm.mutable_c() = buffer(bp::BufferRef::OUTPUT, 0, 0, 32);

  bp::EntryPoint &fault = *manifest.add_entry_points();
  fault.set_name("fault");
  *fault.add_inputs() = tensor("x", bp::F32, {4});
  *fault.add_outputs() = tensor("y", bp::F32, {4});
  bp::Program &faultProgram = addProgram(fault);
  for (uint32_t kernel : {AddOne, Fault, AddOne})
    addLaunch(faultProgram, kernel, 32,
              {buffer(bp::BufferRef::INPUT, 0, 0, 16),
               buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});

  addCudaTarget(writer, std::move(images));
}

void buildCudaAllReduceBundle(BundleWriter &writer,
                              std::vector<BundleWriter::Image> images) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("cuda-all-reduce");
  uint32_t acc = writer.addParameter(tensor("acc", bp::F32, {4}), kWeightAcc,
                                     sizeof(kWeightAcc), true);
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("mean_step");
  *entry.add_inputs() = tensor("x", bp::F32, {4});
  *entry.add_outputs() = tensor("y", bp::F32, {4});
  *entry.add_outputs() = tensor("total", bp::F32, {4});
  bp::Program &program = addProgram(entry, 128);
  bp::BufferRef shifted = buffer(bp::BufferRef::ARENA, 0, 64, 16);
  addLaunch(program, AddOne, 32,
            {buffer(bp::BufferRef::INPUT, 0, 0, 16), shifted});
  addAllReduceMean(program, shifted, 1);
  // Runs while request 1 is in flight, on other bytes.
  addLaunch(program, Accumulate, 4,
            {buffer(bp::BufferRef::INPUT, 0, 0, 16),
             buffer(bp::BufferRef::PARAM, acc, 0, 16),
             buffer(bp::BufferRef::OUTPUT, 1, 0, 16)});
  addAllReduceMean(program, buffer(bp::BufferRef::PARAM, acc, 0, 16), 2);
  addCollectiveWait(program, 1);
  addLaunch(program, AddOne, 32,
            {shifted, buffer(bp::BufferRef::OUTPUT, 0, 0, 16)});
  addCollectiveWait(program, 2);
  addCudaTarget(writer, std::move(images));
}

void buildCudaAttentionBundle(BundleWriter &writer,
                              std::vector<BundleWriter::Image> images) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("cuda-attention");
  const int64_t b = kAttentionBatch, h = kAttentionHeads, s = kAttentionSeq,
                d = kAttentionHeadSize;
  const std::vector<int64_t> rows{b, h, s, d}, stats{b, h, s, 2},
      delta{b, h, s}, mask{b, 1, 1, s};
  const uint64_t narrowBytes = b * h * s * d * 2, wideBytes = narrowBytes * 2,
                 statsBytes = b * h * s * 2 * 4, deltaBytes = b * h * s * 4,
                 maskBytes = b * s * 4;
  auto dense = [&](bp::AttentionTensor *t, bp::BufferRef ref) {
    *t->mutable_buffer() = ref;
    t->set_batch_stride(h * s * d);
    t->set_head_stride(s * d);
    t->set_row_stride(d);
  };
  auto command = [&](bp::EntryPoint &entry, bool backward, bool causal) {
    bp::Attention &a = *addProgram(entry).add_commands()->mutable_attention();
    a.set_backward(backward);
    a.set_element_type(bp::BF16);
    a.set_batch(b);
    a.set_heads(h);
    a.set_queries(s);
    a.set_keys(s);
    a.set_head_size(d);
    a.set_scale(0.125f);
    a.set_causal(causal);
    dense(a.mutable_query(), buffer(bp::BufferRef::INPUT, 0, 0, narrowBytes));
    dense(a.mutable_key(), buffer(bp::BufferRef::INPUT, 1, 0, narrowBytes));
    dense(a.mutable_value(), buffer(bp::BufferRef::INPUT, 2, 0, narrowBytes));
    return &a;
  };
  auto addMask = [&](bp::Attention &a, uint32_t input) {
    bp::AttentionTensor *m = a.mutable_mask();
    *m->mutable_buffer() = buffer(bp::BufferRef::INPUT, input, 0, maskBytes);
    m->set_batch_stride(s);
  };

  bp::EntryPoint &forward = *manifest.add_entry_points();
  forward.set_name("attention");
  for (const char *name : {"q", "k", "v"})
    *forward.add_inputs() = tensor(name, bp::BF16, rows);
  *forward.add_inputs() = tensor("mask", bp::F32, mask);
  *forward.add_outputs() = tensor("out", bp::F32, rows);
  *forward.add_outputs() = tensor("stats", bp::F32, stats);
  bp::Attention *a = command(forward, false, false);
  addMask(*a, 3);
  dense(a->mutable_out(), buffer(bp::BufferRef::OUTPUT, 0, 0, wideBytes));
  *a->mutable_stats() = buffer(bp::BufferRef::OUTPUT, 1, 0, statsBytes);

  bp::EntryPoint &backward = *manifest.add_entry_points();
  backward.set_name("attention_grad");
  for (const char *name : {"q", "k", "v"})
    *backward.add_inputs() = tensor(name, bp::BF16, rows);
  *backward.add_inputs() = tensor("out", bp::F32, rows);
  *backward.add_inputs() = tensor("grad", bp::F32, rows);
  *backward.add_inputs() = tensor("stats", bp::F32, stats);
  *backward.add_inputs() = tensor("mask", bp::F32, mask);
  for (const char *name : {"dq", "dk", "dv"})
    *backward.add_outputs() = tensor(name, bp::F32, rows);
  *backward.add_outputs() = tensor("delta", bp::F32, delta);
  a = command(backward, true, false);
  dense(a->mutable_out(), buffer(bp::BufferRef::INPUT, 3, 0, wideBytes));
  dense(a->mutable_grad(), buffer(bp::BufferRef::INPUT, 4, 0, wideBytes));
  *a->mutable_stats() = buffer(bp::BufferRef::INPUT, 5, 0, statsBytes);
  addMask(*a, 6);
  dense(a->mutable_query_grad(),
        buffer(bp::BufferRef::OUTPUT, 0, 0, wideBytes));
  dense(a->mutable_key_grad(), buffer(bp::BufferRef::OUTPUT, 1, 0, wideBytes));
  dense(a->mutable_value_grad(),
        buffer(bp::BufferRef::OUTPUT, 2, 0, wideBytes));
  *a->mutable_delta() = buffer(bp::BufferRef::OUTPUT, 3, 0, deltaBytes);

  bp::EntryPoint &causal = *manifest.add_entry_points();
  causal.set_name("causal");
  for (const char *name : {"q", "k", "v"})
    *causal.add_inputs() = tensor(name, bp::BF16, rows);
  *causal.add_outputs() = tensor("out", bp::F32, rows);
  *causal.add_outputs() = tensor("stats", bp::F32, stats);
  a = command(causal, false, true);
  dense(a->mutable_out(), buffer(bp::BufferRef::OUTPUT, 0, 0, wideBytes));
  *a->mutable_stats() = buffer(bp::BufferRef::OUTPUT, 1, 0, statsBytes);

  addCudaTarget(writer, std::move(images));
}

LayerNormInputs::LayerNormInputs(int64_t rows, int64_t cols)
    : rows(rows), cols(cols), x(rows * cols), residual(rows * cols),
      grad(rows * cols), accumulate(rows * cols), scale(cols), bias(cols) {
  for (int64_t i = 0; i < rows * cols; ++i) {
    x[i] = 3 + std::sin(0.37f * i) * static_cast<float>(1 + i / cols % 3);
    residual[i] = std::cos(0.23f * i) * 0.75f - 1;
    grad[i] = std::cos(0.05f * i) + 0.125f;
    accumulate[i] = std::sin(0.13f * i) * 2;
  }
  for (int64_t c = 0; c < cols; ++c) {
    scale[c] = 0.5f + std::cos(0.11f * c);
    bias[c] = 0.25f * std::sin(0.7f * c);
  }
}

void buildCudaLayerNormBundle(BundleWriter &writer,
                              std::vector<BundleWriter::Image> images) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("cuda-layer-norm");
  const int64_t rows = kLayerNormRows, cols = kLayerNormCols;
  const int64_t blocks = (rows + 31) / 32;
  const uint64_t matrixBytes = rows * cols * 4, vectorBytes = cols * 4;
  auto command = [&](bp::EntryPoint &entry, bool backward) {
    bp::LayerNorm &l = *addProgram(entry).add_commands()->mutable_layer_norm();
    l.set_backward(backward);
    l.set_rows(rows);
    l.set_cols(cols);
    l.set_epsilon(kLayerNormEpsilon);
    *l.mutable_input() = buffer(bp::BufferRef::INPUT, 0, 0, matrixBytes);
    *l.mutable_scale() = buffer(bp::BufferRef::INPUT, 1, 0, vectorBytes);
    return &l;
  };
  // `copy` BF16 or F16 (with an f32 output): also the output rounded to
  // it, the last output.
  auto forward = [&](const char *name, bp::ElementType type, bool bias,
                     bool residual,
                     bp::ElementType copy = bp::ELEMENT_TYPE_UNSPECIFIED) {
    bp::EntryPoint &entry = *manifest.add_entry_points();
    entry.set_name(name);
    *entry.add_inputs() = tensor("x", bp::F32, {rows, cols});
    *entry.add_inputs() = tensor("scale", bp::F32, {cols});
    if (bias)
      *entry.add_inputs() = tensor("bias", bp::F32, {cols});
    if (residual)
      *entry.add_inputs() = tensor("residual", bp::F32, {rows, cols});
    *entry.add_outputs() = tensor("y", type, {rows, cols});
    if (residual)
      *entry.add_outputs() = tensor("sum", bp::F32, {rows, cols});
    if (copy != bp::ELEMENT_TYPE_UNSPECIFIED)
      *entry.add_outputs() = tensor("y_rounded", copy, {rows, cols});
    bp::LayerNorm *l = command(entry, false);
    l->set_output_type(type);
    if (bias)
      *l->mutable_bias() = buffer(bp::BufferRef::INPUT, 2, 0, vectorBytes);
    *l->mutable_output() = buffer(bp::BufferRef::OUTPUT, 0, 0,
                                  rows * cols * (type == bp::F32 ? 4 : 2));
    if (residual) {
      *l->mutable_residual() =
          buffer(bp::BufferRef::INPUT, bias ? 3 : 2, 0, matrixBytes);
      *l->mutable_sum() = buffer(bp::BufferRef::OUTPUT, 1, 0, matrixBytes);
    }
    if (copy != bp::ELEMENT_TYPE_UNSPECIFIED) {
      l->set_copy_type(copy);
      *l->mutable_copy() =
          buffer(bp::BufferRef::OUTPUT, residual ? 2 : 1, 0, rows * cols * 2);
    }
  };
  // `rounded` BF16 or F16: also the input gradient rounded to it, the
  // fifth output.
  auto backward = [&](const char *name, bool accumulate,
                      bp::ElementType rounded = bp::ELEMENT_TYPE_UNSPECIFIED) {
    bp::EntryPoint &entry = *manifest.add_entry_points();
    entry.set_name(name);
    *entry.add_inputs() = tensor("x", bp::F32, {rows, cols});
    *entry.add_inputs() = tensor("scale", bp::F32, {cols});
    *entry.add_inputs() = tensor("grad", bp::F32, {rows, cols});
    if (accumulate)
      *entry.add_inputs() = tensor("accumulate", bp::F32, {rows, cols});
    *entry.add_outputs() = tensor("dx", bp::F32, {rows, cols});
    *entry.add_outputs() = tensor("dscale", bp::F32, {cols});
    *entry.add_outputs() = tensor("dbias", bp::F32, {cols});
    *entry.add_outputs() = tensor("partials", bp::F32, {blocks, 2, cols});
    if (rounded != bp::ELEMENT_TYPE_UNSPECIFIED)
      *entry.add_outputs() = tensor("dx_rounded", rounded, {rows, cols});
    bp::LayerNorm *l = command(entry, true);
    *l->mutable_grad() = buffer(bp::BufferRef::INPUT, 2, 0, matrixBytes);
    if (accumulate)
      *l->mutable_accumulate() =
          buffer(bp::BufferRef::INPUT, 3, 0, matrixBytes);
    *l->mutable_input_grad() = buffer(bp::BufferRef::OUTPUT, 0, 0, matrixBytes);
    *l->mutable_scale_grad() = buffer(bp::BufferRef::OUTPUT, 1, 0, vectorBytes);
    *l->mutable_bias_grad() = buffer(bp::BufferRef::OUTPUT, 2, 0, vectorBytes);
    *l->mutable_partials() =
        buffer(bp::BufferRef::OUTPUT, 3, 0, blocks * 2 * vectorBytes);
    if (rounded != bp::ELEMENT_TYPE_UNSPECIFIED) {
      l->set_output_type(rounded);
      *l->mutable_output() =
          buffer(bp::BufferRef::OUTPUT, 4, 0, rows * cols * 2);
    }
  };
  forward("layer_norm", bp::BF16, true, false);
  forward("layer_norm_f32", bp::F32, false, false);
  backward("layer_norm_grad", false);
  forward("layer_norm_f16", bp::F16, true, false);
  forward("layer_norm_residual", bp::BF16, true, true);
  backward("layer_norm_grad_accumulate", true);
  backward("layer_norm_grad_accumulate_bf16", true, bp::BF16);
  backward("layer_norm_grad_f16", false, bp::F16);
  forward("layer_norm_copy", bp::F32, true, true, bp::BF16);
  addCudaTarget(writer, std::move(images));
}

void buildCudaBiasGradBundle(BundleWriter &writer,
                             std::vector<BundleWriter::Image> images) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("cuda-bias-grad");
  const int64_t rows = kBiasGradRows, in = kBiasGradIn, out = kBiasGradOut;
  auto product = [&](const char *name, bool outIn) {
    bp::EntryPoint &entry = *manifest.add_entry_points();
    entry.set_name(name);
    const char *first = outIn ? "dy" : "x", *second = outIn ? "x" : "dy";
    int64_t firstCols = outIn ? out : in, secondCols = outIn ? in : out;
    *entry.add_inputs() = tensor(first, bp::BF16, {rows, firstCols});
    *entry.add_inputs() = tensor(second, bp::BF16, {rows, secondCols});
    *entry.add_outputs() = tensor("dw", bp::F32, {firstCols, secondCols});
    *entry.add_outputs() = tensor("db", bp::F32, {out});
    bp::Gemm &gemm = addGemm(addProgram(entry), firstCols, secondCols, rows);
    gemm.set_a_type(bp::BF16);
    gemm.set_b_type(bp::BF16);
    gemm.set_transpose_a(true);
    gemm.set_lda(firstCols);
    *gemm.mutable_a() =
        buffer(bp::BufferRef::INPUT, 0, 0, rows * firstCols * 2);
    *gemm.mutable_b() =
        buffer(bp::BufferRef::INPUT, 1, 0, rows * secondCols * 2);
    *gemm.mutable_c() =
        buffer(bp::BufferRef::OUTPUT, 0, 0, firstCols * secondCols * 4);
    *gemm.mutable_bias_grad() = buffer(bp::BufferRef::OUTPUT, 1, 0, out * 4);
    gemm.set_bias_grad_of_a(outIn);
  };
  product("weight_out_in", true);
  product("weight_in_out", false);
  addCudaTarget(writer, std::move(images));
}

/// The multi bundle's entry points and CPU target over parameters w, b and
/// acc (added by the caller).
void addMultiEntryPoints(BundleWriter &writer, std::string code, uint32_t w,
                         uint32_t b, uint32_t acc) {
  bp::Manifest &manifest = writer.manifest();
  addAddOne(manifest);
  addAffine(manifest, w, b);
  addMixed(manifest);
  addAccumulate(manifest, acc);
  addCpuTarget(
      writer, std::move(code),
      {"add_one", "mul_param", "add_param", "select_scale", "accumulate"});
}

void buildMultiBundle(BundleWriter &writer, std::string code) {
  writer.manifest().set_producer("kiln runtime tests");
  writer.manifest().set_model_name("multi");
  uint32_t w = writer.addParameter(tensor("w", bp::F32, {2, 2}), kWeightW,
                                   sizeof(kWeightW), true);
  uint32_t b = writer.addParameter(tensor("b", bp::F32, {2, 2}), kWeightB,
                                   sizeof(kWeightB), false);
  uint32_t acc = writer.addParameter(tensor("acc", bp::F32, {4}), kWeightAcc,
                                     sizeof(kWeightAcc), true);
  addMultiEntryPoints(writer, std::move(code), w, b, acc);
}

void buildUnstoredBundle(BundleWriter &writer, std::string code) {
  writer.manifest().set_producer("kiln runtime tests");
  writer.manifest().set_model_name("unstored");
  uint32_t w = writer.addParameter(tensor("w", bp::F32, {2, 2}),
                                   bp::Parameter::EXTERNAL, true);
  uint32_t b = writer.addParameter(tensor("b", bp::F32, {2, 2}), kWeightB,
                                   sizeof(kWeightB), false);
  uint32_t acc = writer.addParameter(tensor("acc", bp::F32, {4}),
                                     bp::Parameter::ZEROS, true);
  addMultiEntryPoints(writer, std::move(code), w, b, acc);
}

void buildSingleBundle(BundleWriter &writer, std::string code) {
  writer.manifest().set_producer("kiln runtime tests");
  writer.manifest().set_model_name("single");
  addAddOne(writer.manifest());
  addCpuTarget(writer, std::move(code), {"add_one"});
}

void buildTrainBundle(BundleWriter &writer, std::string code,
                      ToyTraining kind) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("train");
  const float zero = 0;
  uint32_t w =
      writer.addParameter(tensor("w", bp::F32, {}), &zero, sizeof(zero), true);
  uint32_t step = writer.addParameter(tensor("optimizer.step", bp::F32, {}),
                                      &zero, sizeof(zero), false);
  uint32_t acc = writer.addParameter(tensor("acc", bp::F32, {}), &zero,
                                     sizeof(zero), false);
  addToyTrainStep(manifest, w, step, acc, kind != ToyTraining::TrainLossOnly);
  if (kind != ToyTraining::TrainAccumulating) {
    addCpuTarget(writer, std::move(code), {"toy_train_step"});
    return;
  }
  addToyAccumulateStep(manifest, acc);
  bp::MetadataEntry *gradAccum = manifest.add_metadata();
  gradAccum->set_key("training.grad_accum");
  gradAccum->set_value("3");
  addCpuTarget(writer, std::move(code),
               {"toy_train_step", "toy_accumulate_step"});
}

void buildDataParallelTrainBundle(BundleWriter &writer, std::string code,
                                  int batch) {
  bp::Manifest &manifest = writer.manifest();
  manifest.set_producer("kiln runtime tests");
  manifest.set_model_name("train-dp");
  const float zeros[2] = {0, 0};
  uint32_t w = writer.addParameter(tensor("w", bp::F32, {2}), zeros,
                                   sizeof(zeros), true);
  uint32_t step = writer.addParameter(tensor("optimizer.step", bp::F32, {}),
                                      zeros, sizeof(float), false);
  bp::EntryPoint &entry = *manifest.add_entry_points();
  entry.set_name("train_step");
  *entry.add_inputs() = tensor("x", bp::F32, {batch});
  *entry.add_outputs() = tensor("loss", bp::F32, {});
  *entry.add_outputs() = tensor("lr", bp::F32, {});
  *entry.add_outputs() = tensor("grad_norm", bp::F32, {});
  std::string kernel = "toy_dp_train_step_" + std::to_string(batch);
  addKernelCall(
      entry, kernel,
      {buffer(bp::BufferRef::INPUT, 0, 0, 4 * static_cast<uint64_t>(batch)),
       buffer(bp::BufferRef::PARAM, w, 0, 8),
       buffer(bp::BufferRef::PARAM, step, 0, 4),
       buffer(bp::BufferRef::OUTPUT, 0, 0, 4),
       buffer(bp::BufferRef::OUTPUT, 1, 0, 4),
       buffer(bp::BufferRef::OUTPUT, 2, 0, 4)});
  bp::MetadataEntry *dataParallel = manifest.add_metadata();
  dataParallel->set_key("training.data_parallel");
  dataParallel->set_value("1");
  addCpuTarget(writer, std::move(code), {kernel.c_str()});
}

std::vector<BundleWriter::Image> standInPtxImages() {
  return {{bp::CodeImage::PTX, "compute_80", "// stand-in PTX"}};
}

std::string standInCode() {
  std::string code = "\x7f"
                     "ELF";
  code.resize(200, '\x5a');
  return code;
}

Status readFile(const std::string &path, std::string &out) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return ioError(path, ": cannot open");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  out = bytes.str();
  return Status();
}

Status compileSharedObject(const std::string &cc, const std::string &source,
                           const std::string &output) {
  std::string command =
      "'" + cc + "' -shared -fPIC -O2 -o '" + output + "' '" + source + "'";
  int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return internalError("'", command, "' failed with status ", status);
  return Status();
}

} // namespace kiln::runtime::testing
