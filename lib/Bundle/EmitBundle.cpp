//===- EmitBundle.cpp - compiled models to .kiln bundles ------------------===//

#include "kiln/Bundle/EmitBundle.h"

#include "kiln/runtime/BundleWriter.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
namespace bundle = kiln::bundle;

namespace {

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<bundle::ElementType> elementTypeOf(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return bundle::F8E4M3FN;
  if (isa<Float8E4M3FNUZType>(type))
    return bundle::F8E4M3FNUZ;
  if (isa<Float8E5M2Type>(type))
    return bundle::F8E5M2;
  if (isa<Float8E5M2FNUZType>(type))
    return bundle::F8E5M2FNUZ;
  if (isa<Float8E8M0FNUType>(type))
    return bundle::F8E8M0;
  if (isa<Float4E2M1FNType>(type))
    return bundle::F4E2M1;
  if (type.isUnsignedInteger(4))
    return bundle::U4;
  if (type.isUnsignedInteger(2))
    return bundle::U2;
  if (type.isInteger(4))
    return bundle::I4;
  if (type.isInteger(2))
    return bundle::I2;
  // Before isInteger(n), which holds for any signedness.
  if (type.isUnsignedInteger(64))
    return bundle::U64;
  if (type.isUnsignedInteger(32))
    return bundle::U32;
  if (type.isUnsignedInteger(16))
    return bundle::U16;
  if (type.isUnsignedInteger(8))
    return bundle::U8;
  if (type.isF32())
    return bundle::F32;
  if (type.isF16())
    return bundle::F16;
  if (type.isBF16())
    return bundle::BF16;
  if (type.isF64())
    return bundle::F64;
  if (type.isInteger(64))
    return bundle::I64;
  if (type.isInteger(32))
    return bundle::I32;
  if (type.isInteger(16))
    return bundle::I16;
  if (type.isInteger(8))
    return bundle::I8;
  if (type.isInteger(1))
    return bundle::BOOL;
  std::string name;
  llvm::raw_string_ostream os(name);
  type.print(os);
  return makeError("element type " + name + " cannot be stored in a bundle");
}

llvm::Error fillSpec(bundle::TensorSpec &spec, StringRef name,
                     RankedTensorType type) {
  auto element = elementTypeOf(type.getElementType());
  if (!element)
    return element.takeError();
  spec.set_name(name.str());
  spec.set_element_type(*element);
  for (int64_t dim : type.getShape())
    spec.add_shape(dim);
  return llvm::Error::success();
}

/// The dense little-endian bytes of a float parameter value.
std::string parameterBytes(DenseElementsAttr value) {
  if (value.getElementType().isInteger(1)) {
    std::string bytes;
    for (bool bit : value.getValues<bool>())
      bytes.push_back(bit ? 1 : 0);
    return bytes;
  }
  ArrayRef<char> raw = value.getRawData();
  if (!value.isSplat())
    return std::string(raw.begin(), raw.end());
  std::string bytes;
  size_t width = raw.size();
  bytes.reserve(width * value.getNumElements());
  for (int64_t i = 0; i < value.getNumElements(); ++i)
    bytes.append(raw.begin(), raw.end());
  return bytes;
}

/// Whether every element of `value` is zero (+0.0 for floats: the bytes are
/// all zero).
bool isAllZeros(DenseElementsAttr value) {
  if (!value.isSplat())
    return false;
  if (auto floats = dyn_cast<DenseFPElementsAttr>(value)) {
    APFloat splat = floats.getSplatValue<APFloat>();
    return splat.isZero() && !splat.isNegative();
  }
  if (auto ints = dyn_cast<DenseIntElementsAttr>(value))
    return ints.getSplatValue<APInt>().isZero();
  return false;
}

/// Copies the module's `kiln.metadata` dictionary of strings into the
/// manifest, sorted by key as the dictionary is.
llvm::Error copyMetadata(Attribute metadata, bundle::Manifest &manifest) {
  if (!metadata)
    return llvm::Error::success();
  auto dictionary = dyn_cast<DictionaryAttr>(metadata);
  if (!dictionary)
    return makeError("module attribute 'kiln.metadata' is not a dictionary");
  for (NamedAttribute entry : dictionary) {
    auto value = dyn_cast<StringAttr>(entry.getValue());
    if (!value)
      return makeError("module attribute 'kiln.metadata': entry '" +
                       entry.getName().strref() + "' is not a string");
    bundle::MetadataEntry *stored = manifest.add_metadata();
    stored->set_key(entry.getName().str());
    stored->set_value(value.str());
  }
  return llvm::Error::success();
}

/// Where each argument of an entry function points: the bundle's inputs,
/// outputs, parameters (outputs that update one are written into it) or the
/// arena.
class ArgumentBuffers {
public:
  ArgumentBuffers(const kiln::CompiledEntry &entry,
                  const std::vector<int> &outputSlot,
                  const llvm::StringMap<unsigned> &paramIndex)
      : entry(entry), outputSlot(outputSlot), paramIndex(paramIndex) {}

  /// Bytes [offset, offset + size) of argument `argument`.
  void fill(bundle::BufferRef &buffer, unsigned argument, uint64_t offset,
            uint64_t size) const {
    const kiln::EntryArgument &arg = entry.arguments[argument];
    buffer.set_index(arg.index);
    buffer.set_offset(offset);
    buffer.set_size(size);
    switch (arg.kind) {
    case kiln::EntryArgument::Input:
      buffer.set_kind(bundle::BufferRef::INPUT);
      break;
    case kiln::EntryArgument::Output:
      if (outputSlot[arg.index] < 0) {
        buffer.set_kind(bundle::BufferRef::PARAM);
        buffer.set_index(paramIndex.lookup(entry.outputs[arg.index].updates));
      } else {
        buffer.set_kind(bundle::BufferRef::OUTPUT);
        buffer.set_index(outputSlot[arg.index]);
      }
      break;
    case kiln::EntryArgument::Param:
      buffer.set_kind(bundle::BufferRef::PARAM);
      break;
    case kiln::EntryArgument::Arena:
      buffer.set_kind(bundle::BufferRef::ARENA);
      buffer.set_index(0);
      break;
    }
  }

private:
  const kiln::CompiledEntry &entry;
  const std::vector<int> &outputSlot;
  const llvm::StringMap<unsigned> &paramIndex;
};

/// An attention command; its tensors are dense, so their strides follow
/// from the sizes.
llvm::Error fillAttention(bundle::Attention &out,
                          const kiln::CudaAttention &attention,
                          const ArgumentBuffers &buffers) {
  auto element = elementTypeOf(attention.element);
  if (!element)
    return element.takeError();
  out.set_backward(attention.backward);
  out.set_element_type(*element);
  out.set_batch(attention.batch);
  out.set_heads(attention.heads);
  int64_t keyHeads = attention.keyHeads ? attention.keyHeads : attention.heads;
  if (keyHeads != attention.heads)
    out.set_key_heads(keyHeads);
  out.set_queries(attention.queries);
  out.set_keys(attention.keys);
  out.set_head_size(attention.headSize);
  out.set_scale(attention.scale);
  out.set_causal(attention.causal);
  out.set_masked_fill(attention.maskedFill);
  out.set_causal_fill(attention.causalFill);
  if (attention.cudnn) {
    // cuDNN reads and writes every matrix in the element type.
    out.set_engine(bundle::CUDNN);
    out.set_out_type(*element);
    if (attention.backward)
      out.set_input_grad_type(*element);
  }
  int64_t d = attention.headSize;
  auto tensor = [&](bundle::AttentionTensor *stored,
                    const kiln::CudaBuffer &buffer, int64_t rows,
                    int64_t heads) {
    buffers.fill(*stored->mutable_buffer(), buffer.argument, buffer.offset,
                 buffer.size);
    stored->set_batch_stride(heads * rows * d);
    stored->set_head_stride(rows * d);
    stored->set_row_stride(d);
  };
  int64_t q = attention.queries, k = attention.keys;
  tensor(out.mutable_query(), attention.query, q, attention.heads);
  tensor(out.mutable_key(), attention.key, k, keyHeads);
  tensor(out.mutable_value(), attention.value, k, keyHeads);
  tensor(out.mutable_out(), attention.out, q, attention.heads);
  buffers.fill(*out.mutable_stats(), attention.stats.argument,
               attention.stats.offset, attention.stats.size);
  if (attention.mask.size > 0) {
    bundle::AttentionTensor *mask = out.mutable_mask();
    buffers.fill(*mask->mutable_buffer(), attention.mask.argument,
                 attention.mask.offset, attention.mask.size);
    // [maskBatch, maskHeads, maskQueries, keys], dense; a dimension of 1
    // broadcasts.
    int64_t row = attention.maskQueries == 1 ? 0 : k;
    int64_t head = attention.maskHeads == 1 ? 0 : attention.maskQueries * k;
    int64_t batch = attention.maskBatch == 1
                        ? 0
                        : attention.maskHeads * attention.maskQueries * k;
    mask->set_batch_stride(batch);
    mask->set_head_stride(head);
    mask->set_row_stride(row);
  }
  if (attention.backward) {
    tensor(out.mutable_grad(), attention.grad, q, attention.heads);
    tensor(out.mutable_query_grad(), attention.queryGrad, q, attention.heads);
    tensor(out.mutable_key_grad(), attention.keyGrad, k, keyHeads);
    tensor(out.mutable_value_grad(), attention.valueGrad, k, keyHeads);
    buffers.fill(*out.mutable_delta(), attention.delta.argument,
                 attention.delta.offset, attention.delta.size);
  }
  return llvm::Error::success();
}

/// A layer-norm command.
llvm::Error fillLayerNorm(bundle::LayerNorm &out,
                          const kiln::CudaLayerNorm &layerNorm,
                          const ArgumentBuffers &buffers) {
  out.set_backward(layerNorm.backward);
  // The forward's output, or the backward's rounded input gradient.
  if (layerNorm.outputElement) {
    auto element = elementTypeOf(layerNorm.outputElement);
    if (!element)
      return element.takeError();
    out.set_output_type(*element);
  }
  if (layerNorm.copyElement) {
    auto element = elementTypeOf(layerNorm.copyElement);
    if (!element)
      return element.takeError();
    out.set_copy_type(*element);
  }
  // The matrices it reads in 16 bits (unset: f32).
  const std::pair<mlir::Type, void (bundle::LayerNorm::*)(bundle::ElementType)>
      reads[] = {
          {layerNorm.inputElement, &bundle::LayerNorm::set_input_type},
          {layerNorm.residualElement, &bundle::LayerNorm::set_residual_type},
          {layerNorm.gradElement, &bundle::LayerNorm::set_grad_type},
          {layerNorm.accumulateElement,
           &bundle::LayerNorm::set_accumulate_type}};
  for (auto [type, set] : reads) {
    if (!type)
      continue;
    auto element = elementTypeOf(type);
    if (!element)
      return element.takeError();
    (out.*set)(*element);
  }
  out.set_rows(layerNorm.rows);
  out.set_cols(layerNorm.cols);
  out.set_epsilon(layerNorm.epsilon);
  auto fill = [&](bundle::BufferRef *stored, const kiln::CudaBuffer &buffer) {
    if (buffer.size > 0)
      buffers.fill(*stored, buffer.argument, buffer.offset, buffer.size);
  };
  fill(out.mutable_input(), layerNorm.input);
  fill(out.mutable_scale(), layerNorm.scale);
  if (layerNorm.backward) {
    fill(out.mutable_grad(), layerNorm.grad);
    fill(out.mutable_accumulate(), layerNorm.accumulate); // none: left unset
    fill(out.mutable_input_grad(), layerNorm.inputGrad);
    fill(out.mutable_scale_grad(), layerNorm.scaleGrad);
    fill(out.mutable_bias_grad(), layerNorm.biasGrad);
    fill(out.mutable_partials(), layerNorm.partials);
    fill(out.mutable_output(), layerNorm.output); // none: left unset
  } else {
    fill(out.mutable_bias(), layerNorm.bias); // none: left unset
    fill(out.mutable_output(), layerNorm.output);
    fill(out.mutable_residual(), layerNorm.residual); // likewise
    fill(out.mutable_sum(), layerNorm.sum);
    fill(out.mutable_copy(), layerNorm.copy); // likewise
  }
  return llvm::Error::success();
}

/// The entry point's program on the CUDA target.
llvm::Error fillCudaProgram(bundle::Program &program,
                            const kiln::CudaProgram &compiled,
                            const ArgumentBuffers &buffers) {
  program.set_target("cuda");
  program.set_arena_bytes(compiled.arenaBytes);
  program.set_arena_alignment(256);
  for (const kiln::CudaCommand &command : compiled.commands) {
    bundle::Command *stored = program.add_commands();
    if (auto *launch = std::get_if<kiln::CudaLaunch>(&command)) {
      bundle::KernelLaunch *out = stored->mutable_launch();
      out->set_kernel(launch->kernel);
      for (int d = 0; d < 3; ++d) {
        out->add_grid(launch->grid[d]);
        out->add_block(launch->block[d]);
      }
      for (const kiln::CudaBuffer &buffer : launch->buffers)
        buffers.fill(*out->add_buffers(), buffer.argument, buffer.offset,
                     buffer.size);
      continue;
    }
    if (auto *reduce = std::get_if<kiln::CudaAllReduce>(&command)) {
      bundle::AllReduceMean *out = stored->mutable_all_reduce_mean();
      out->set_element_type(bundle::F32);
      out->set_count(reduce->buffer.size / sizeof(float));
      out->set_request(reduce->request);
      buffers.fill(*out->mutable_buffer(), reduce->buffer.argument,
                   reduce->buffer.offset, reduce->buffer.size);
      continue;
    }
    if (auto *wait = std::get_if<kiln::CudaWait>(&command)) {
      stored->mutable_collective_wait()->set_request(wait->request);
      continue;
    }
    if (auto *shard = std::get_if<kiln::CudaShard>(&command)) {
      bundle::ShardCollective *out = stored->mutable_shard();
      out->set_kind(shard->kind == kiln::CudaShard::ReduceScatterMean
                        ? bundle::ShardCollective::REDUCE_SCATTER_MEAN
                    : shard->kind == kiln::CudaShard::AllGather
                        ? bundle::ShardCollective::ALL_GATHER
                        : bundle::ShardCollective::LOCAL_SHARD);
      out->set_count(shard->count);
      out->set_ranks(shard->ranks);
      out->set_request(shard->request);
      buffers.fill(*out->mutable_input(), shard->input.argument,
                   shard->input.offset, shard->input.size);
      buffers.fill(*out->mutable_output(), shard->output.argument,
                   shard->output.offset, shard->output.size);
      continue;
    }
    if (auto *attention = std::get_if<kiln::CudaAttention>(&command)) {
      if (llvm::Error error =
              fillAttention(*stored->mutable_attention(), *attention, buffers))
        return error;
      continue;
    }
    if (auto *layerNorm = std::get_if<kiln::CudaLayerNorm>(&command)) {
      if (llvm::Error error =
              fillLayerNorm(*stored->mutable_layer_norm(), *layerNorm, buffers))
        return error;
      continue;
    }
    const auto &gemm = std::get<kiln::CudaGemm>(command);
    auto element = elementTypeOf(gemm.element);
    if (!element)
      return element.takeError();
    auto inputElement = elementTypeOf(gemm.inputElement);
    if (!inputElement)
      return inputElement.takeError();
    bundle::Gemm *out = stored->mutable_gemm();
    out->set_a_type(*inputElement);
    out->set_b_type(*inputElement);
    out->set_c_type(*element);
    out->set_transpose_a(gemm.transposeA);
    out->set_transpose_b(gemm.transposeB);
    out->set_m(gemm.m);
    out->set_n(gemm.n);
    out->set_k(gemm.k);
    out->set_batch(gemm.batch);
    out->set_lda(gemm.ld[0]);
    out->set_ldb(gemm.ld[1]);
    out->set_ldc(gemm.ld[2]);
    out->set_stride_a(gemm.batchStride[0]);
    out->set_stride_b(gemm.batchStride[1]);
    out->set_stride_c(gemm.batchStride[2]);
    out->set_alpha(1.0f);
    out->set_beta(gemm.beta);
    buffers.fill(*out->mutable_a(), gemm.a.argument, gemm.a.offset,
                 gemm.a.size);
    buffers.fill(*out->mutable_b(), gemm.b.argument, gemm.b.offset,
                 gemm.b.size);
    buffers.fill(*out->mutable_c(), gemm.c.argument, gemm.c.offset,
                 gemm.c.size);
    if (gemm.bias.size > 0)
      buffers.fill(*out->mutable_bias(), gemm.bias.argument, gemm.bias.offset,
                   gemm.bias.size);
    if (gemm.biasGrad.size > 0) {
      buffers.fill(*out->mutable_bias_grad(), gemm.biasGrad.argument,
                   gemm.biasGrad.offset, gemm.biasGrad.size);
      out->set_bias_grad_of_a(gemm.biasGradOfA);
    }
    if (gemm.epilogue != kiln::CudaGemm::Epilogue::None)
      out->set_epilogue(gemm.epilogue == kiln::CudaGemm::Epilogue::Gelu
                            ? bundle::GEMM_GELU
                            : bundle::GEMM_DGELU);
    if (gemm.aux.size > 0)
      buffers.fill(*out->mutable_aux(), gemm.aux.argument, gemm.aux.offset,
                   gemm.aux.size);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error kiln::writeBundle(const CompiledModel &model, StringRef path,
                              StringRef modelName,
                              const BundleOptions &options) {
  runtime::BundleWriter writer;
  bundle::Manifest &manifest = writer.manifest();
  manifest.set_producer("kilnc 0.1.0");
  manifest.set_model_name(modelName.str());
  if (llvm::Error error = copyMetadata(model.metadata, manifest))
    return error;

  for (const CompiledParam &param : model.params) {
    bundle::TensorSpec spec;
    if (llvm::Error error = fillSpec(spec, param.name, param.type))
      return error;
    uint32_t index;
    // A fixed parameter's value is part of the code: always stored.
    if (options.externalWeights && !param.optimizerState && !param.fixed) {
      index = writer.addParameter(spec, bundle::Parameter::EXTERNAL,
                                  param.trainable);
    } else if (isAllZeros(param.value)) {
      index =
          writer.addParameter(spec, bundle::Parameter::ZEROS, param.trainable);
    } else {
      std::string bytes = parameterBytes(param.value);
      index = writer.addParameter(spec, bytes.data(), bytes.size(),
                                  param.trainable);
    }
    if (param.shardRanks > 0)
      manifest.mutable_parameters(static_cast<int>(index))
          ->set_shard_ranks(static_cast<uint32_t>(param.shardRanks));
    if (param.fixed)
      manifest.mutable_parameters(static_cast<int>(index))->set_fixed(true);
  }
  llvm::StringMap<unsigned> paramIndex;
  for (auto [i, param] : llvm::enumerate(model.params))
    paramIndex[param.name] = i;

  for (const CompiledEntry &entry : model.entries) {
    bundle::EntryPoint *point = manifest.add_entry_points();
    point->set_name(entry.name);
    point->set_arena_bytes(entry.arenaBytes);
    point->set_arena_alignment(64);
    for (const TensorInfo &input : entry.inputs)
      if (llvm::Error error =
              fillSpec(*point->add_inputs(), input.name, input.type))
        return error;
    // Outputs that update a parameter are written into its storage and are
    // not outputs of the entry point.
    std::vector<int> outputSlot;
    for (const TensorInfo &output : entry.outputs) {
      if (!output.updates.empty()) {
        if (!paramIndex.count(output.updates))
          return makeError("output '" + output.name +
                           "' updates the unknown parameter '" +
                           output.updates + "'");
        outputSlot.push_back(-1);
        continue;
      }
      outputSlot.push_back(point->outputs_size());
      if (llvm::Error error =
              fillSpec(*point->add_outputs(), output.name, output.type))
        return error;
    }
    ArgumentBuffers buffers(entry, outputSlot, paramIndex);
    if (model.cpu) {
      bundle::KernelCall *call = point->add_commands()->mutable_kernel();
      call->set_symbol(entry.kernel);
      for (auto [i, argument] : llvm::enumerate(entry.arguments))
        buffers.fill(*call->add_buffers(), i, 0,
                     argument.kind == EntryArgument::Arena ? entry.arenaBytes
                                                           : 0);
    } else {
      point->set_arena_bytes(0);
    }
    if (model.cuda) {
      auto program =
          llvm::find_if(model.cuda->programs, [&](const CudaProgram &p) {
            return p.entry == entry.name;
          });
      if (program == model.cuda->programs.end())
        return makeError("entry point '" + entry.name +
                         "' has no CUDA program");
      if (llvm::Error error =
              fillCudaProgram(*point->add_programs(), *program, buffers))
        return error;
    }
  }

  if (model.cpu) {
    bundle::Target target;
    target.set_name("cpu");
    target.set_triple(model.cpu->triple);
    target.set_cpu(model.cpu->cpu);
    for (const std::string &kernel : model.cpu->kernels)
      target.add_kernels(kernel);
    writer.addTarget(target, model.cpu->sharedObject);
  }
  if (model.cuda) {
    bundle::Target target;
    target.set_name("cuda");
    target.set_triple("nvptx64-nvidia-cuda");
    for (const std::string &kernel : model.cuda->kernels)
      target.add_kernels(kernel);
    std::vector<runtime::BundleWriter::Image> images;
    for (const CudaImage &image : model.cuda->images)
      images.push_back({image.format == CudaImage::Cubin
                            ? bundle::CodeImage::CUBIN
                            : bundle::CodeImage::PTX,
                        image.arch, image.bytes});
    writer.addTarget(target, std::move(images));
  }

  runtime::Status status = writer.write(path.str());
  if (!status.ok())
    return makeError(status.message());
  return llvm::Error::success();
}
