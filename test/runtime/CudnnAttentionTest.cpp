//===- CudnnAttentionTest.cpp - attention commands as cuDNN graphs --------===//
//
// What can be checked of cuDNN attention without a GPU: the graph a CUDNN
// Attention command builds, validated by cuDNN's frontend for a Hopper and
// an Ampere GPU (its shapes, strides, types, the causal mask, the additive
// mask as cuDNN's bias, grouped key and value heads, the statistics the
// backward reads). Finalizing and running the graphs needs
// a device: the CUDA backend's tests and scripts/gpu-check.sh do that.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudnnAttention.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

namespace bp = kiln::bundle;
using kiln::runtime::cuda::buildCudnnAttentionGraph;
using kiln::runtime::cuda::CudnnAttentionGraph;
using kiln::runtime::cuda::describeCudnnAttention;
using kiln::runtime::cuda::haveCudnnAttention;

/// [batch, heads, rows, size] with the heads interleaved in each row, as a
/// [batch, rows, heads, size] matrix stores them (a projection's output
/// read per head), or dense per head.
void layout(bp::AttentionTensor *tensor, int64_t heads, int64_t rows,
            int64_t size, bool interleaved) {
  tensor->mutable_buffer()->set_size(1);
  tensor->set_batch_stride(heads * rows * size);
  tensor->set_head_stride(interleaved ? size : rows * size);
  tensor->set_row_stride(interleaved ? heads * size : size);
}

bp::Attention command(bool backward, bp::ElementType type, int64_t batch,
                      int64_t heads, int64_t queries, int64_t keys,
                      int64_t size, bool causal, bool interleaved,
                      int64_t keyHeads = 0) {
  bp::Attention a;
  a.set_engine(bp::CUDNN);
  a.set_backward(backward);
  a.set_element_type(type);
  a.set_out_type(type);
  a.set_input_grad_type(type);
  a.set_batch(batch);
  a.set_heads(heads);
  a.set_queries(queries);
  a.set_keys(keys);
  a.set_head_size(size);
  a.set_scale(1.0f / std::sqrt(static_cast<float>(size)));
  a.set_causal(causal);
  a.set_key_heads(keyHeads);
  int64_t kh = keyHeads ? keyHeads : heads;
  layout(a.mutable_query(), heads, queries, size, interleaved);
  layout(a.mutable_key(), kh, keys, size, interleaved);
  layout(a.mutable_value(), kh, keys, size, interleaved);
  layout(a.mutable_out(), heads, queries, size, interleaved);
  if (backward) {
    layout(a.mutable_grad(), heads, queries, size, interleaved);
    layout(a.mutable_query_grad(), heads, queries, size, interleaved);
    layout(a.mutable_key_grad(), kh, keys, size, interleaved);
    layout(a.mutable_value_grad(), kh, keys, size, interleaved);
  }
  return a;
}

/// `attention` with an f32 mask of [batch or 1, heads or 1, queries or 1,
/// keys] (dense; a broadcast dimension has stride 0), as the compiler
/// emits it.
bp::Attention masked(bp::Attention attention, bool perBatch, bool perHead,
                     bool perQuery) {
  int64_t k = attention.keys();
  int64_t row = perQuery ? k : 0;
  int64_t head = perHead ? (perQuery ? attention.queries() : 1) * k : 0;
  int64_t batch = perBatch ? (perHead ? attention.heads() : 1) *
                                 (perQuery ? attention.queries() : 1) * k
                           : 0;
  bp::AttentionTensor *mask = attention.mutable_mask();
  mask->mutable_buffer()->set_size(4);
  mask->set_batch_stride(batch);
  mask->set_head_stride(head);
  mask->set_row_stride(row);
  return attention;
}

void expectValid(const bp::Attention &attention) {
  for (int sm : {80, 90}) {
    kiln::runtime::cuda::CudnnAttentionGraphPtr graph;
    kiln::runtime::Status status =
        buildCudnnAttentionGraph(attention, sm, graph);
    EXPECT_TRUE(status.ok()) << describeCudnnAttention(attention) << " on sm_"
                             << sm << ": " << status.message();
    EXPECT_EQ(status.ok(), graph != nullptr);
  }
}

TEST(CudnnAttentionTest, GraphsOfGpt2SmallValidate) {
  if (!haveCudnnAttention())
    GTEST_SKIP() << "built without cuDNN's frontend";
  // GPT-2 small's training step: 8 x 12 heads of 1024 x 64, causal, the
  // heads interleaved in the projections' rows.
  for (bool backward : {false, true})
    expectValid(command(backward, bp::BF16, 8, 12, 1024, 1024, 64, true, true));
}

TEST(CudnnAttentionTest, GraphsOfOtherShapesValidate) {
  if (!haveCudnnAttention())
    GTEST_SKIP() << "built without cuDNN's frontend";
  for (bool backward : {false, true}) {
    // f16, no mask, dense heads, head size 128.
    expectValid(command(backward, bp::F16, 2, 4, 256, 256, 128, false, false));
    // More keys than queries (cross attention), head size 32.
    expectValid(command(backward, bp::BF16, 3, 2, 128, 384, 32, false, true));
  }
}

TEST(CudnnAttentionTest, GraphsWithMasksValidate) {
  if (!haveCudnnAttention())
    GTEST_SKIP() << "built without cuDNN's frontend";
  for (bool backward : {false, true}) {
    // BERT-base's padding mask: one row of keys per batch row, [B, 1, 1,
    // S], at sequence 128 and 512.
    for (int64_t s : {128, 512})
      expectValid(
          masked(command(backward, bp::BF16, 32, 12, s, s, 64, false, true),
                 true, false, false));
    // A bias per query and key, shared by the batch; one per head.
    expectValid(
        masked(command(backward, bp::F16, 2, 4, 256, 256, 64, false, false),
               false, false, true));
    expectValid(
        masked(command(backward, bp::BF16, 2, 4, 128, 128, 64, false, false),
               true, true, true));
  }
}

TEST(CudnnAttentionTest, GraphsWithGroupedHeadsValidate) {
  if (!haveCudnnAttention())
    GTEST_SKIP() << "built without cuDNN's frontend";
  for (bool backward : {false, true}) {
    // A Llama-style step: 32 query heads over 8 key and value heads, causal.
    expectValid(
        command(backward, bp::BF16, 4, 32, 1024, 1024, 128, true, true, 8));
    // One key head for all (multi-query attention).
    expectValid(
        command(backward, bp::F16, 2, 8, 256, 256, 64, false, false, 1));
  }
}

TEST(CudnnAttentionTest, RefusalsSayWhy) {
  // cuDNN's fused attention takes head sizes that are multiples of 8.
  for (bool backward : {false, true}) {
    kiln::runtime::cuda::CudnnAttentionGraphPtr graph;
    kiln::runtime::Status status = buildCudnnAttentionGraph(
        command(backward, bp::BF16, 1, 1, 128, 128, 60, false, false), 90,
        graph);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(graph, nullptr);
    const char *expected = haveCudnnAttention()
                               ? "cuDNN's validation refused the graph: "
                               : "built without cuDNN's frontend";
    EXPECT_NE(status.message().find(expected), std::string::npos)
        << status.message();
  }
  // Key heads that do not divide the query heads.
  if (haveCudnnAttention()) {
    kiln::runtime::cuda::CudnnAttentionGraphPtr graph;
    kiln::runtime::Status status = buildCudnnAttentionGraph(
        command(false, bp::BF16, 1, 6, 128, 128, 64, false, false, 4), 90,
        graph);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("group-query attention"), std::string::npos)
        << status.message();
  }
  // And 16-bit matrices only.
  kiln::runtime::cuda::CudnnAttentionGraphPtr graph;
  kiln::runtime::Status status = buildCudnnAttentionGraph(
      command(false, bp::F32, 1, 1, 128, 128, 64, false, false), 90, graph);
  ASSERT_FALSE(status.ok());
}

TEST(CudnnAttentionTest, DescriptionNamesTheCommand) {
  EXPECT_EQ(describeCudnnAttention(
                command(true, bp::BF16, 8, 12, 1024, 1024, 64, true, true)),
            "attention backward on cuDNN (bf16, 8 x 12 heads, 1024 queries, "
            "1024 keys, head size 64, causal)");
  EXPECT_EQ(describeCudnnAttention(masked(
                command(false, bp::BF16, 4, 32, 128, 128, 128, false, true, 8),
                true, false, false)),
            "attention forward on cuDNN (bf16, 4 x 32 heads (8 key heads), "
            "128 queries, 128 keys, head size 128, masked)");
}

} // namespace
