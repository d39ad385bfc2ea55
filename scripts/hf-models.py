#!/usr/bin/env python3
"""Trains small Hugging Face transformers models with Kiln and with PyTorch
and compares every step's loss.

    hf-models.py [--kilnc build/bin/kilnc] [--kiln-run build/bin/kiln-run]
                 [--dir DIR] [--models gpt2,gpt2-mask,...] [--steps N]

Each model (GPT-2 with and without an attention mask, BERT, RoBERTa,
ALBERT, DistilBERT, and BERT for sequence classification) is built from a
small configuration (2 layers, width 32, 2 heads, vocabulary 120, no
dropout, random weights: nothing is downloaded), exported to ONNX with its
loss (with PyTorch 2.x, the dynamo exporter at its default opset,
optimize=False; with 1.x, the TorchScript one at opset 17 in training
mode; --exporter and --opset choose) and trained for N steps with
torch.optim.AdamW (lr 1e-3, weight decay 0.01) on random tokens, the last
5 of every other row padding, the third row of every batch padded on the
left and the last padding alone. The same export is compiled with
`kilnc --optimizer=adamw --lr=1e-3 --weight-decay=0.01 --loss-output=loss`
for the CPU target and for the CUDA target's kernels run on the CPU
(--emulate-cuda, f32 and --amp bf16 / fp16), and trained on the same
batches. A line per model: the largest relative loss difference of each
bundle and the attention commands of its --target=cuda --amp=bf16
train_step. Exit 1 when a difference exceeds 1e-5 (CPU, emulated f32) or
2e-3 (bf16, fp16), or a step fails.

Needs PyTorch and the `transformers` package (not installed by the build;
for example, in the environment scripts/pypi-venv.sh makes:
`~/.cache/kiln/pypi-venv/bin/pip install transformers`, then run this script
with that python), and a Kiln built with CUDA for the last column.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

BATCH, SEQ, VOCAB = 4, 32, 120
MODELS = ("gpt2", "gpt2-mask", "bert", "roberta", "albert", "distilbert",
          "bert-cls")


def build(name):
    import transformers as T
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, hidden_dropout_prob=0,
                 attention_probs_dropout_prob=0, vocab_size=VOCAB,
                 max_position_embeddings=64)
    if name.startswith("gpt2"):
        return T.GPT2LMHeadModel(T.GPT2Config(
            vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2,
            resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))
    if name == "bert":
        return T.BertForMaskedLM(T.BertConfig(**small))
    if name == "bert-cls":
        return T.BertForSequenceClassification(
            T.BertConfig(num_labels=3, **small))
    if name == "roberta":
        return T.RobertaForMaskedLM(T.RobertaConfig(pad_token_id=1, **small))
    if name == "albert":
        return T.AlbertForMaskedLM(T.AlbertConfig(
            embedding_size=16, classifier_dropout_prob=0, **small))
    if name == "distilbert":
        return T.DistilBertForMaskedLM(T.DistilBertConfig(
            vocab_size=VOCAB, max_position_embeddings=64, dim=32, n_layers=2,
            n_heads=2, hidden_dim=64, dropout=0, attention_dropout=0))
    raise ValueError(name)


def prepare(name, out, steps, exporter, opset):
    """Exports `name` to out/m.onnx (with `exporter`, at `opset` or the
    exporter's default), its data to out/train.npz and PyTorch's losses;
    returns them."""
    import torch
    torch.manual_seed(0)
    model = build(name).train()
    # transformers 5 computes attention with F.scaled_dot_product_attention
    # by default, whose CPU kernel treats a row that masks every key (the
    # all-padding rows below) otherwise than the chain its ONNX export
    # writes (4.81148 against 4.81153 for BERT's first batch): the eager
    # implementation is the one an export reproduces.
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    masked = name != "gpt2"

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *args):
            ids, *mask, labels = args
            kwargs = {"attention_mask": mask[0]} if mask else {}
            return self.m(input_ids=ids, labels=labels, return_dict=True,
                          **kwargs).loss

    wrapped = WithLoss()
    rng = np.random.default_rng(1)
    rows = BATCH * steps
    data = {"ids": rng.integers(2, VOCAB, (rows, SEQ))}
    if masked:
        mask = np.ones((rows, SEQ), np.int64)
        mask[1::2, SEQ - 5:] = 0
        # The last row of every batch is padding alone: each of its query
        # rows drops every key. The third is padded on the left, as for
        # generation: GPT-2's first query rows there keep only padding.
        mask[BATCH - 1::BATCH] = 0
        mask[2::BATCH] = 1
        mask[2::BATCH, :5] = 0
        data["mask"] = mask
    data["labels"] = (rng.integers(0, 3, (rows,)) if name == "bert-cls"
                      else data["ids"].copy())
    tensors = {k: torch.tensor(v) for k, v in data.items()}
    first = tuple(t[:BATCH] for t in tensors.values())
    path = os.path.join(out, "m.onnx")
    if exporter == "dynamo":
        # Today's default exporter, at its default opset unless one is
        # given; optimize=False keeps the weights as their parameters
        # (docs/kilnc.md, "What trains").
        options = {"opset_version": opset} if opset else {}
        torch.onnx.export(wrapped, first, path, dynamo=True, optimize=False,
                          input_names=list(data), output_names=["loss"],
                          **options)
    else:
        kwargs = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
        torch.onnx.export(wrapped, first, path, opset_version=opset or 17,
                          input_names=list(data),
                          training=torch.onnx.TrainingMode.TRAINING,
                          output_names=["loss"], do_constant_folding=False,
                          **kwargs)
    np.savez(os.path.join(out, "train.npz"), **data)
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-3,
                                  weight_decay=0.01)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        rows = slice(step * BATCH, (step + 1) * BATCH)
        loss = wrapped(*(t[rows] for t in tensors.values()))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def run(*command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(command),
                                              result.stderr.strip()[-400:]))
    return result.stdout


def compile_bundle(args, out, bundle, flags):
    """kilnc on out/m.onnx: the AdamW step PyTorch's reference takes."""
    run(args.kilnc, os.path.join(out, "m.onnx"), "--batch-size=%d" % BATCH,
        "--optimizer=adamw", "--lr=1e-3", "--weight-decay=0.01",
        "--loss-output=loss", *flags, "-o", bundle)


def kiln_losses(args, out, tag, flags, steps):
    bundle = os.path.join(out, tag + ".kiln")
    metrics = os.path.join(out, tag + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    compile_bundle(args, out, bundle, flags)
    run(args.kiln_run, bundle, "--data", os.path.join(out, "train.npz"),
        "--steps", str(steps), "--no-shuffle", "--metrics", metrics)
    with open(metrics) as f:
        return [json.loads(line)["loss"] for line in f if '"loss"' in line]


def attention_commands(args, out):
    bundle = os.path.join(out, "cuda.kiln")
    compile_bundle(args, out, bundle, ["--target=cuda", "--amp=bf16"])
    info = run(args.kiln_run, bundle, "--info").splitlines()
    for line, following in zip(info, info[1:]):
        if line.strip().startswith("train_step("):
            for word in following.split(", "):
                if word.endswith("attention commands"):
                    return word.split()[0]
            return "0"
    return "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilnc", default="build/bin/kilnc")
    parser.add_argument("--kiln-run", default="build/bin/kiln-run")
    parser.add_argument("--dir", default="hf-models")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--exporter", choices=["dynamo", "torchscript"],
                        help="default: dynamo with PyTorch 2.x, torchscript "
                             "before")
    parser.add_argument("--opset", type=int,
                        help="default: the exporter's (dynamo), 17 (torchscript)")
    args = parser.parse_args()
    if not args.exporter:
        import torch
        major = int(torch.__version__.split(".")[0])
        args.exporter = "dynamo" if major >= 2 else "torchscript"
    bundles = (("cpu", ["--target=cpu"], 1e-5),
               ("emulated", ["--emulate-cuda"], 1e-5),
               ("bf16", ["--emulate-cuda", "--amp=bf16"], 2e-3),
               ("fp16", ["--emulate-cuda", "--amp=fp16"], 2e-3))
    print("%-11s %s  attention" % ("model", "  ".join(
        "%-9s" % tag for tag, _, _ in bundles)))
    failed = False
    for name in args.models.split(","):
        out = os.path.join(args.dir, name)
        os.makedirs(out, exist_ok=True)
        cells = []
        try:
            expected = np.array(prepare(name, out, args.steps, args.exporter,
                                        args.opset))
            for tag, flags, tolerance in bundles:
                actual = np.array(kiln_losses(args, out, tag, flags,
                                              args.steps), dtype=float)
                worst = (float(np.max(np.abs(actual - expected) /
                                      np.abs(expected)))
                         if actual.shape == expected.shape else float("inf"))
                failed |= not worst <= tolerance
                cells.append("%-9.1e" % worst)
            cells.append(attention_commands(args, out))
        except RuntimeError as error:
            failed = True
            cells.append("FAILED: %s" % error)
        print("%-11s %s" % (name, "  ".join(cells)), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
