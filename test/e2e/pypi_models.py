"""Training parity with today's PyTorch: models exported by PyPI's PyTorch
2.x with its default (dynamo) exporter, trained by torch.optim.AdamW.

    pypi_models.py prepare MODEL DIR --opset N [--steps S] [--batch B]
        [--lr LR] [--weight-decay W] [--optimize] [--bf16-matmul]
        [--dynamic-batch] [--external-data] [--exporter dynamo|torchscript]

writes DIR/MODEL.onnx (the model followed by its mean cross-entropy loss,
output 'loss', exported with torch.onnx.export(dynamo=True,
opset_version=N, optimize=False; True with --optimize)),
DIR/MODEL-train.npz (S batches of B samples, in order, named as the graph's
inputs) and the loss of every AdamW step to DIR/MODEL-losses.txt, as
compare_training.py check reads
them. MODEL is:

- llama: token embedding, RMSNorm (nn.RMSNorm), rotary position embedding
  from cos/sin buffers, grouped-query causal attention
  (F.scaled_dot_product_attention with is_causal and enable_gqa), a SwiGLU
  feed-forward, an untied output layer;
- gpt2: learned positions, LayerNorm, causal attention through a float
  mask buffer added to the scores (as nanoGPT without flash writes it),
  GELU (tanh) MLP, output layer tied to the embedding.

- bert: one post-norm encoder layer over rows padded at the end, the
  padding a boolean attn_mask of SDPA, labels -100 where padded;
- vit: a ViT-style image classifier (patch convolution, class token,
  non-causal SDPA, GELU), IMAGE x IMAGE images;
- resnet: two residual blocks with training-mode BatchNorm, exported with
  the TorchScript exporter in training mode (the dynamo exporter writes
  training-mode batch norm as the inference form); its parameter names go
  to DIR/MODEL-params.txt for kilnc --trainable (that exporter records no
  roles).

The first two register buffers that PyTorch does not train (the RoPE tables, the
mask): the exporter records them as buffers, and Kiln must keep them fixed.
Run with the python of scripts/pypi-venv.sh (PyTorch 2.x, onnxscript).
"""
import argparse
import math
import os
import sys
import warnings

import numpy as np

VOCAB, SEQ, DIM, HEADS, KV_HEADS = 64, 16, 64, 4, 2
IMAGE, IMAGE_CLASSES = 16, 10
# Set for the reference of --bf16-matmul: attention as its two products,
# which the rounded-product mode then rounds (the exported graph keeps SDPA).
EXPLICIT_ATTENTION = False


def attention(F, q, k, v, attn_mask=None, is_causal=False, enable_gqa=False):
    """F.scaled_dot_product_attention, or its products spelled out."""
    if not EXPLICIT_ATTENTION:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                              is_causal=is_causal,
                                              enable_gqa=enable_gqa)
    import torch
    if enable_gqa:
        repeat = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(repeat, 1)
        v = v.repeat_interleave(repeat, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        s = scores.shape[-1]
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(scores, -1) @ v


def build(name):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            head = DIM // HEADS
            self.embed = nn.Embedding(VOCAB, DIM)
            self.norm1 = nn.RMSNorm(DIM, eps=1e-5)
            self.q = nn.Linear(DIM, DIM, bias=False)
            self.kv = nn.Linear(DIM, 2 * KV_HEADS * head, bias=False)
            self.o = nn.Linear(DIM, DIM, bias=False)
            self.norm2 = nn.RMSNorm(DIM, eps=1e-5)
            self.gate = nn.Linear(DIM, 2 * DIM, bias=False)
            self.up = nn.Linear(DIM, 2 * DIM, bias=False)
            self.down = nn.Linear(2 * DIM, DIM, bias=False)
            self.norm3 = nn.RMSNorm(DIM, eps=1e-5)
            self.head = nn.Linear(DIM, VOCAB, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, head, 2).float() / head))
            angles = torch.outer(torch.arange(SEQ).float(), inv)
            self.register_buffer("rope_cos", torch.cat([angles.cos()] * 2, -1))
            self.register_buffer("rope_sin", torch.cat([angles.sin()] * 2, -1))

        def rope(self, x):
            half = x.shape[-1] // 2
            rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
            return x * self.rope_cos + rotated * self.rope_sin

        def forward(self, ids, labels):
            b, s = ids.shape
            head = DIM // HEADS
            h = self.embed(ids)
            x = self.norm1(h)
            q = self.q(x).view(b, s, HEADS, head).transpose(1, 2)
            k, v = self.kv(x).view(b, s, 2, KV_HEADS, head).unbind(2)
            k, v = k.transpose(1, 2), v.transpose(1, 2)
            a = attention(F, self.rope(q), self.rope(k), v, is_causal=True,
                          enable_gqa=True)
            h = h + self.o(a.transpose(1, 2).reshape(b, s, DIM))
            x = self.norm2(h)
            h = h + self.down(F.silu(self.gate(x)) * self.up(x))
            logits = self.head(self.norm3(h))
            return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Embedding(SEQ, DIM)
            self.ln1 = nn.LayerNorm(DIM)
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.ln2 = nn.LayerNorm(DIM)
            self.fc = nn.Linear(DIM, 4 * DIM)
            self.out = nn.Linear(4 * DIM, DIM)
            self.lnf = nn.LayerNorm(DIM)
            causal = torch.full((SEQ, SEQ), float("-inf")).triu(1)
            self.register_buffer("mask", causal)

        def forward(self, ids, labels):
            b, s = ids.shape
            head = DIM // HEADS
            h = self.embed(ids) + self.pos.weight[:s]
            q, k, v = self.qkv(self.ln1(h)).split(DIM, -1)
            q, k, v = (t.view(b, s, HEADS, head).transpose(1, 2) for t in (q, k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(head) + self.mask[:s, :s]
            a = torch.softmax(scores, -1) @ v
            h = h + self.proj(a.transpose(1, 2).reshape(b, s, DIM))
            h = h + self.out(F.gelu(self.fc(self.ln2(h)), approximate="tanh"))
            logits = self.lnf(h) @ self.embed.weight.t()
            return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))

    class BERT(nn.Module):
        """One post-norm encoder layer over padded rows: the padding mask
        goes to F.scaled_dot_product_attention as a boolean attn_mask
        (opset 23: Attention's boolean mask), GELU MLP, a token
        prediction head whose labels ignore the padding (-100)."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Embedding(SEQ, DIM)
            self.ln0 = nn.LayerNorm(DIM)
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.ln1 = nn.LayerNorm(DIM)
            self.fc = nn.Linear(DIM, 2 * DIM)
            self.out = nn.Linear(2 * DIM, DIM)
            self.ln2 = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, VOCAB)

        def forward(self, ids, attention_mask, labels):
            b, s = ids.shape
            head = DIM // HEADS
            h = self.ln0(self.embed(ids) + self.pos.weight[:s])
            keep = attention_mask.bool()[:, None, None, :]
            q, k, v = self.qkv(h).chunk(3, -1)
            q, k, v = (t.reshape(b, s, HEADS, head).transpose(1, 2) for t in (q, k, v))
            a = attention(F, q, k, v, attn_mask=keep)
            h = self.ln1(h + self.proj(a.transpose(1, 2).reshape(b, s, DIM)))
            h = self.ln2(h + self.out(F.gelu(self.fc(h))))
            return F.cross_entropy(self.head(h).reshape(-1, VOCAB),
                                   labels.reshape(-1), ignore_index=-100)

    class ViT(nn.Module):
        """Patches by a strided convolution, a class token, learned
        positions, a pre-norm encoder block (non-causal SDPA, GELU MLP), a
        linear head on the class token; IMAGE_CLASSES classes."""

        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, DIM, 4, stride=4)
            self.cls = nn.Parameter(torch.zeros(1, 1, DIM))
            self.pos = nn.Parameter(torch.randn(1, 17, DIM) * 0.02)
            self.ln1 = nn.LayerNorm(DIM)
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.ln2 = nn.LayerNorm(DIM)
            self.fc = nn.Linear(DIM, 2 * DIM)
            self.out = nn.Linear(2 * DIM, DIM)
            self.head = nn.Linear(DIM, IMAGE_CLASSES)

        def forward(self, images, labels):
            b = images.shape[0]
            head = DIM // HEADS
            x = self.patch(images).flatten(2).transpose(1, 2)
            h = torch.cat([self.cls.expand(b, 1, DIM), x], 1) + self.pos
            s = h.shape[1]
            q, k, v = self.qkv(self.ln1(h)).chunk(3, -1)
            q, k, v = (t.reshape(b, s, HEADS, head).transpose(1, 2) for t in (q, k, v))
            a = attention(F, q, k, v)
            h = h + self.proj(a.transpose(1, 2).reshape(b, s, DIM))
            h = h + self.out(F.gelu(self.fc(self.ln2(h))))
            return F.cross_entropy(self.head(h[:, 0]), labels)

    class ResNet(nn.Module):
        """Two residual blocks of 3x3 convolutions and training-mode batch
        norm, global average pooling, a linear head."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn0 = nn.BatchNorm2d(16)
            self.blocks = nn.ModuleList()
            for stride in (1, 2):
                self.blocks.append(nn.ModuleDict({
                    "conv1": nn.Conv2d(16, 16, 3, stride=stride, padding=1, bias=False),
                    "bn1": nn.BatchNorm2d(16),
                    "conv2": nn.Conv2d(16, 16, 3, padding=1, bias=False),
                    "bn2": nn.BatchNorm2d(16),
                    "down": nn.Conv2d(16, 16, 1, stride=stride, bias=False),
                }))
            self.head = nn.Linear(16, IMAGE_CLASSES)

        def forward(self, images, labels):
            h = F.relu(self.bn0(self.stem(images)))
            for block in self.blocks:
                y = F.relu(block["bn1"](block["conv1"](h)))
                h = F.relu(block["bn2"](block["conv2"](y)) + block["down"](h))
            return F.cross_entropy(self.head(h.mean((2, 3))), labels)

    torch.manual_seed(0)
    return {"llama": Llama, "gpt2": GPT2, "bert": BERT, "vit": ViT,
            "resnet": ResNet}[name]()


def prepare(args):
    import torch
    model = build(args.model)
    generator = np.random.default_rng(1)
    if args.model in ("vit", "resnet"):
        first = "images"
        inputs = generator.standard_normal(
            (args.steps, args.batch, 3, IMAGE, IMAGE)).astype(np.float32)
        labels = generator.integers(0, IMAGE_CLASSES, (args.steps, args.batch))
    else:
        first = "ids"
        inputs = generator.integers(0, VOCAB, (args.steps, args.batch, SEQ))
        labels = np.roll(inputs, -1, axis=2)
    extra = {}
    if args.model == "bert":
        # Row r of each batch keeps its first SEQ - 3 r tokens (at least 1).
        lengths = np.maximum(SEQ - 3 * np.arange(args.batch), 1)
        mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int64)
        extra["attention_mask"] = np.broadcast_to(mask, inputs.shape).copy()
        labels = np.where(extra["attention_mask"] == 1, labels, -100)
    os.makedirs(args.dir, exist_ok=True)
    onnx_path = os.path.join(args.dir, args.model + ".onnx")
    example = (torch.from_numpy(inputs[0]),
               *(torch.from_numpy(v[0]) for v in extra.values()),
               torch.from_numpy(labels[0]))
    names = [first, *extra, "labels"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if (args.exporter or ("torchscript" if args.model == "resnet"
                              else "dynamo")) == "torchscript":
            # The dynamo exporter writes training-mode batch norm as the
            # inference form: training exports take the TorchScript one.
            torch.onnx.export(model, example, onnx_path, dynamo=False,
                              opset_version=args.opset,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False,
                              input_names=names, output_names=["loss"])
        else:
            extra_args = {}
            if args.dynamic_batch:
                # The batch dimension named by torch.export.Dim: kilnc
                # --batch-size binds it.
                batch = torch.export.Dim("batch", min=1, max=4096)
                extra_args["dynamic_shapes"] = {name: {0: batch}
                                                for name in names}
            torch.onnx.export(model, example, onnx_path, dynamo=True,
                              opset_version=args.opset, optimize=args.optimize,
                              input_names=names, output_names=["loss"],
                              external_data=args.external_data,
                              verbose=False, **extra_args)
    model.train()
    with open(os.path.join(args.dir, args.model + "-params.txt"), "w") as f:
        f.writelines(name + "\n" for name, _ in model.named_parameters())
    np.savez(os.path.join(args.dir, args.model + "-train.npz"),
             **{name: value.reshape(-1, *value.shape[2:])
                for name, value in [(first, inputs), *extra.items(),
                                    ("labels", labels)]})
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                                  weight_decay=args.weight_decay)
    if args.bf16_matmul:
        # kilnc --amp=bf16's arithmetic: every product (attention's too) on
        # bf16-rounded operands with f32 accumulation, the rest in f32.
        global EXPLICIT_ATTENTION
        EXPLICIT_ATTENTION = True
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:0] = [here, os.path.join(here, "..", "lib")]
        from compare_training import rounded_matmul_mode
        rounded_matmul_mode(torch, torch.bfloat16,
                            list(model.parameters())).__enter__()
    losses = []
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = model(torch.from_numpy(inputs[step]),
                     *(torch.from_numpy(v[step]) for v in extra.values()),
                     torch.from_numpy(labels[step]))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with open(os.path.join(args.dir, args.model + "-losses.txt"), "w") as f:
        f.write("".join("%.9g\n" % loss for loss in losses))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("model", choices=["llama", "gpt2", "bert", "vit", "resnet"])
    p.add_argument("dir")
    p.add_argument("--opset", type=int, required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--optimize", action="store_true",
                   help="export with optimize=True (what not to train)")
    p.add_argument("--exporter", choices=["dynamo", "torchscript"],
                   help="the exporter (default: TorchScript for resnet, "
                        "dynamo for the others)")
    p.add_argument("--dynamic-batch", action="store_true",
                   help="export with a torch.export.Dim batch dimension")
    p.add_argument("--external-data", action="store_true",
                   help="export with external_data=True (weights in "
                        "MODEL.onnx.data)")
    p.add_argument("--bf16-matmul", action="store_true",
                   help="train the reference with products of bf16-rounded "
                        "operands, as kilnc --amp=bf16 computes them")
    args = parser.parse_args()
    return prepare(args)


if __name__ == "__main__":
    sys.exit(main())
