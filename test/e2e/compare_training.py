"""Training parity with torch.optim: the same model, the same batches (the
stored order), the same optimizer, every step's loss.

    compare_training.py prepare MODEL DIR --optimizer sgd|adam|adamw|adagrad
        [--steps N] [--batch B] [--lr LR] [--momentum M] [--nesterov]
        [--weight-decay W] [--lr-decay D] [--schedule constant|linear|cosine
        --warmup-steps W --total-steps T] [--grad-clip C] [--grad-accum K]
        [--kiln-loss] [--masking add|inf|lowest|fill|causal|fill-add]
        [--seq S] [--label-smoothing S --ignore-index I]
        writes DIR/MODEL-loss.onnx, DIR/MODEL-train.npz and the losses of
        torch.optim on them to DIR/MODEL-losses.txt
        and the parameters torch.optim ends with to DIR/MODEL-final.npz;
        with --kiln-loss, DIR/MODEL-logits.onnx is the model without its
        loss (output 'logits'), for kilnc --loss=cross_entropy to complete;
        with --grad-accum K, each step takes K batches (micro-batches) and
        reports their mean loss, as kiln-run does. MODEL is mlp, gpt2, cnn
        (exported and trained in training mode: its batch norm uses each
        batch's statistics) or bert (one layer; rows pad up to half of their
        tokens, masked out as --masking says: by adding -10000 (add, the
        default), -inf (inf) or the lowest float (lowest: BERT's form in
        newer Hugging Face releases), by filling their scores with the
        lowest float (fill: DistilBERT's form) or, in causal attention, by
        adding it (causal: GPT-2's form), or by filling them and adding
        -10000 too (fill-add); with any of the last four the second row
        is all padding, and with causal the third is padded on the left);
        gpt2 --masking fill fills its scores above the diagonal with the
        lowest float, not -inf; --label-smoothing and --ignore-index (cnn
        and bert, with --kiln-loss, for kilnc's options of those names)
        give PyTorch's cross-entropy those arguments and write no
        MODEL-loss.onnx
    compare_training.py check EXPECTED.txt KILN_RUN_OUTPUT.txt [--rtol R]
        compares the 'loss' column of `kiln-run --data ... --no-shuffle`
    compare_training.py check-params FINAL.npz SAVED.safetensors
        compares the parameters `kiln-run --save-params` wrote with them
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from compare_gradients import wrapped  # noqa: E402
from kiln_test_io import read_safetensors, save_npz  # noqa: E402


# How each model may mask its attention (torch_modules in kiln_onnx_models).
MASKING = {"mlp": ("add",), "gpt2": ("add", "fill"), "cnn": ("add",),
           "bert": ("add", "inf", "lowest", "fill", "causal", "fill-add")}

# Models that train in training mode (the CNN's batch norm normalizes with
# the batch's statistics); the others train in eval mode, without dropout.
TRAINING_MODE = ("cnn",)


def training_model(name, masking="add", seq=None, loss_options=None):
    """(torch, the model followed by its mean cross-entropy loss,
    make_inputs(generator, samples) -> {graph input name: tensor}, the
    labels last). masking: how gpt2 masks its scores above the diagonal and
    bert its padding (MASKING, torch_modules in kiln_onnx_models); seq:
    gpt2's sequence length (default kiln_onnx_models.SEQ); loss_options:
    keyword arguments of cnn's and bert's torch.nn.functional.cross_entropy
    (label_smoothing, ignore_index)."""
    if masking not in MASKING[name]:
        raise SystemExit("compare_training.py: %s has no --masking %s (only %s)"
                         % (name, masking, ", ".join(MASKING[name])))
    loss_options = loss_options or {}
    if loss_options and name in ("mlp", "gpt2"):
        raise SystemExit("compare_training.py: --label-smoothing and "
                         "--ignore-index are for cnn and bert")
    if name in ("mlp", "gpt2"):
        torch, model, make_inputs = wrapped(name, masking, seq)

        def named_inputs(generator, samples):
            x, labels, input_name = make_inputs(generator, samples)
            return {input_name: x, "labels": labels}
        return torch, model, named_inputs
    from kiln_onnx_models import SEQ, VOCAB, torch_modules
    torch, _, Cnn, _, Bert = torch_modules(layers=1, masking=masking)

    class WithLoss(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, *args):
            *inputs, labels = args
            return torch.nn.functional.cross_entropy(self.net(*inputs), labels,
                                                     **loss_options)

    tensor = torch.from_numpy
    if name == "cnn":
        return torch, WithLoss(Cnn()), lambda g, n: {
            "x": tensor(g.standard_normal((n, 3, 8, 8)).astype(np.float32)),
            "labels": tensor(g.integers(0, 10, size=(n,)).astype(np.int64))}

    def bert_inputs(g, n):
        # Rows keep between half and all of their tokens; the rest is
        # padding (token 0), masked out.
        input_ids = g.integers(1, VOCAB, size=(n, SEQ))
        attention_mask = np.ones((n, SEQ), np.int64)
        for row, length in enumerate(g.integers(SEQ // 2, SEQ + 1, size=n)):
            input_ids[row, length:] = 0
            attention_mask[row, length:] = 0
        if masking in ("lowest", "fill", "causal", "fill-add") and n > 1:
            # A row of padding alone: every score is the lowest float (or
            # -inf where causal attention adds it twice), so PyTorch's
            # probabilities are uniform over the keys, as Kiln's must be.
            input_ids[1] = 0
            attention_mask[1] = 0
        if masking == "causal" and n > 2:
            # Left padding: the first query rows keep only padding keys,
            # and weigh the keys after them that are not.
            input_ids[2, :SEQ // 4] = 0
            attention_mask[2, :SEQ // 4] = 0
            attention_mask[2, SEQ // 4:] = 1
            input_ids[2, SEQ // 4:] = g.integers(1, VOCAB, size=SEQ - SEQ // 4)
        return {"input_ids": tensor(input_ids.astype(np.int64)),
                "attention_mask": tensor(attention_mask),
                "labels": tensor(g.integers(0, 2, size=(n,)).astype(np.int64))}
    return torch, WithLoss(Bert()), bert_inputs


def prepare(args):
    import torch
    torch.manual_seed(0)
    loss_options = {}
    if args.label_smoothing:
        loss_options["label_smoothing"] = args.label_smoothing
    if args.ignore_index is not None:
        loss_options["ignore_index"] = args.ignore_index
    if loss_options and not args.kiln_loss:
        raise SystemExit("compare_training.py: --label-smoothing and "
                         "--ignore-index need --kiln-loss")
    torch, model, make_inputs = training_model(args.model, args.masking,
                                               args.seq, loss_options)
    model.train(args.model in TRAINING_MODE)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    samples = args.batch * args.steps * args.grad_accum
    inputs = make_inputs(np.random.default_rng(1), samples)
    names = list(inputs)

    def batch_of(rows):
        return tuple(value[rows] for value in inputs.values())
    first = batch_of(slice(0, args.batch))
    mode = (torch.onnx.TrainingMode.TRAINING if model.training
            else torch.onnx.TrainingMode.EVAL)
    # PyTorch 2.9 and newer export through torch.export unless told not to;
    # the tests use the TorchScript exporter, which older versions only have.
    import inspect
    legacy = ({"dynamo": False} if "dynamo" in
              inspect.signature(torch.onnx.export).parameters else {})
    if not loss_options:
        path = os.path.join(args.dir, args.model + "-loss.onnx")
        torch.onnx.export(model, first, path, opset_version=17, training=mode,
                          input_names=names, output_names=["loss"],
                          dynamic_axes={name: {0: "batch"} for name in names},
                          do_constant_folding=False, **legacy)
    if args.kiln_loss:
        torch.onnx.export(model.net, first[:-1],
                          os.path.join(args.dir, args.model + "-logits.onnx"),
                          opset_version=17, training=mode, input_names=names[:-1],
                          output_names=["logits"],
                          dynamic_axes={name: {0: "batch"} for name in names[:-1]},
                          do_constant_folding=False, **legacy)
    save_npz(os.path.join(args.dir, args.model + "-train.npz"),
             {name: value.numpy() for name, value in inputs.items()})
    optimizer = make_optimizer(torch, model, args)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule(args))
    losses, lrs, scales = [], [], []
    micro = 0
    narrow = ({"bf16": torch.bfloat16, "fp16": torch.float16}
              .get(args.matmul_operands))
    if narrow:
        mode = rounded_matmul_mode(torch, narrow, list(model.parameters()),
                                   store=args.amp_activations == "narrow",
                                   attention=args.amp_attention)
        mode.__enter__()
    scaler = LossScaler(torch, args) if args.loss_scale else None
    for step in range(args.steps):
        optimizer.zero_grad()
        total = 0.0
        for _ in range(args.grad_accum):
            batch = slice(micro * args.batch, (micro + 1) * args.batch)
            micro += 1
            loss = model(*batch_of(batch))
            scaled = loss / args.grad_accum if args.grad_accum > 1 else loss
            if scaler:
                scaled = scaled * scaler.scale
            scaled.backward()
            total += loss.item()
        if scaler:
            scales.append(scaler.scale)
            finite = scaler.unscale(model)
        if args.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        if not scaler or finite:
            optimizer.step()
        lrs.append(optimizer.param_groups[0]["lr"])
        # A skipped update does not count: the schedule waits with it.
        if not scaler or finite:
            scheduler.step()
        if scaler:
            scaler.update(finite)
        losses.append(total / args.grad_accum)
    if narrow:
        mode.__exit__(None, None, None)
    if scaler:
        with open(os.path.join(args.dir, args.model + "-loss-scales.txt"),
                  "w") as f:
            f.write("\n".join("%.9g" % s for s in scales) + "\n")
    with open(os.path.join(args.dir, args.model + "-losses.txt"), "w") as f:
        f.write("\n".join("%.9g" % l for l in losses) + "\n")
    with open(os.path.join(args.dir, args.model + "-lrs.txt"), "w") as f:
        f.write("\n".join("%.9g" % l for l in lrs) + "\n")
    save_npz(os.path.join(args.dir, args.model + "-final.npz"),
             {name: p.detach().numpy() for name, p in model.named_parameters()})


class LossScaler:
    """torch.cuda.amp.GradScaler's dynamic loss scale (init, growth factor
    2, backoff 0.5, growth interval), written out for f32 gradients on the
    CPU: what kilnc --amp=fp16 builds into its step."""

    def __init__(self, torch, args):
        self.torch = torch
        self.scale = args.loss_scale
        self.interval = args.loss_scale_growth_interval
        self.tracker = 0

    def unscale(self, model):
        """Divides the gradients by the scale; whether all are finite."""
        torch = self.torch
        inverse = torch.tensor(1.0 / self.scale, dtype=torch.float64).float()
        finite = True
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(inverse)
                finite = finite and bool(torch.isfinite(p.grad).all())
        return finite

    def update(self, finite):
        if not finite:
            self.scale *= 0.5
            self.tracker = 0
        elif self.tracker + 1 == self.interval:
            self.scale *= 2.0
            self.tracker = 0
        else:
            self.tracker += 1


def rounded_matmul_mode(torch, narrow, parameters=(), store=True,
                        attention="flash"):
    """A TorchFunctionMode under which every matrix product (matmul, @,
    linear, mm, bmm), and the products of its backward pass, multiplies its
    operands rounded to `narrow` (bf16 or f16) and accumulates in f32, and a
    linear layer's bias gradient sums the rounded gradient its weight's
    product reads (kilnc folds the sum into that product, as cuBLASLt's
    bias-gradient epilogue): the arithmetic of kilnc --amp=bf16 and
    --amp=fp16.

    With `store`, the products that multiply one of `parameters` also store
    their results rounded, as kiln-amp's products do (autocast's storage):
    the forward's result (a linear layer's with its bias rounded too, as
    cuBLASLt's epilogue reads it), which everything reads rounded but a
    layer norm reading it directly (kilnc's layer-norm kernels read 16 bits
    only in the residual sum they add); and the gradient of the other
    operand where that operand has no other reader (else kilnc sums its
    gradients in f32, each product adding onto the last). A parameter's
    gradient stays f32. With attention "loops" (kilnc
    --cuda-attention=loops), a product of two activations reads stored
    results in f32, as kiln-attention-kernel's loops do. With "cudnn"
    (kilnc --cuda-attention=cudnn), attention also stores its output and
    the gradients of its query, key and value rounded, as cuDNN's fused
    attention writes them: the product of the probabilities (a softmax's
    result) and the value stores its result and the value's gradient
    rounded, the scores' product both operands' gradients."""
    import weakref
    from torch.overrides import TorchFunctionMode

    def rounded(x):
        return x.to(narrow).to(torch.float32)

    parameter_ids = {id(p) for p in parameters}

    def is_parameter(t):
        base = getattr(t, "_base", None)
        return id(t) in parameter_ids or (base is not None and
                                          id(base) in parameter_ids)

    class Registry:
        """Tensors by identity, for as long as they live."""

        def __init__(self):
            self.entries = {}

        def add(self, t, value=True):
            self.entries[id(t)] = (weakref.ref(t), value)

        def get(self, t, default=None):
            entry = self.entries.get(id(t))
            if entry is None or entry[0]() is not t:
                return default
            return entry[1]

        def clear_dead(self):
            if len(self.entries) > 4096:
                self.entries = {k: v for k, v in self.entries.items()
                                if v[0]() is not None}

    # A stored product's f32 result -> the same rounded.
    stored = Registry()
    # A softmax's result (attention's probabilities, "cudnn").
    probabilities = Registry()
    # A view -> the tensor it views (through views), and a tensor -> how
    # many ops other than views read it or its views.
    roots, readers = Registry(), Registry()

    def root(t):
        return roots.get(t, t)

    class RoundedProduct(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, round_grad_a, round_grad_b):
            ctx.save_for_backward(a, b)
            ctx.round_grad = (round_grad_a, round_grad_b)
            return torch.matmul(rounded(a), rounded(b))

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            g = rounded(grad)
            grad_a = torch.matmul(g, rounded(b).transpose(-1, -2))
            grad_b = torch.matmul(rounded(a).transpose(-1, -2), g)
            if ctx.round_grad[0]():
                grad_a = rounded(grad_a)
            if ctx.round_grad[1]():
                grad_b = rounded(grad_b)
            # Broadcast batch dimensions sum back to the operand's shape.
            while grad_a.dim() > a.dim():
                grad_a = grad_a.sum(0)
            while grad_b.dim() > b.dim():
                grad_b = grad_b.sum(0)
            return grad_a, grad_b, None, None

    class RoundedBias(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y, bias):
            return y + bias

        @staticmethod
        def backward(ctx, grad):
            rows = tuple(range(grad.dim() - 1))
            return grad, rounded(grad).sum(rows)

    class Rounded(torch.autograd.Function):
        """The value rounded; the gradient as it is."""
        @staticmethod
        def forward(ctx, y):
            return rounded(y)

        @staticmethod
        def backward(ctx, grad):
            return grad

    products = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
                torch.mm, torch.bmm}
    # Ops that pass their input's elements on as they are.
    views = {"view", "reshape", "transpose", "permute", "split", "chunk",
             "__getitem__", "contiguous", "unflatten", "flatten", "t",
             "narrow", "select", "unsqueeze", "squeeze", "view_as",
             "reshape_as", "unbind", "movedim", "dropout"}
    layer_norms = {"layer_norm"}

    def round_grad_of(operand, other):
        """Whether the gradient of `operand` of a product with `other` is
        stored rounded (decided in the backward pass, once the forward's
        readers are all counted)."""
        if not store or is_parameter(operand) or not is_parameter(other):
            return lambda: False
        origin = root(operand)
        return lambda: readers.get(origin, 0) <= 1

    def product(a, b, bias=None):
        keep = store and (is_parameter(a) or is_parameter(b))
        y = RoundedProduct.apply(a, b, round_grad_of(a, b),
                                 round_grad_of(b, a))
        if bias is not None:
            wide = RoundedBias.apply(y, bias)
            narrow_result = (RoundedBias.apply(y, Rounded.apply(bias))
                             if keep else None)
            y = wide
        else:
            narrow_result = y
        if keep:
            stored.add(y, Rounded.apply(narrow_result))
        return y

    def attention_product(a, b):
        """A product within cuDNN's attention: the scores' (both operands'
        gradients rounded: the query's and the key's) or the output's (of
        the probabilities: the output and the value's gradient rounded; the
        probabilities' gradient stays inside the attention, in f32)."""
        of_probabilities = probabilities.get(root(a), False)
        y = RoundedProduct.apply(a, b, lambda: not of_probabilities,
                                 lambda: True)
        if of_probabilities:
            stored.add(y, Rounded.apply(y))
        return y

    def outputs(result):
        return result if isinstance(result, (tuple, list)) else (result,)

    def count_reads(args):
        for a in args:
            for t in (a if isinstance(a, (tuple, list)) else (a,)):
                if isinstance(t, torch.Tensor):
                    readers.add(root(t), readers.get(root(t), 0) + 1)

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            for registry in (stored, roots, readers):
                registry.clear_dead()
            name = getattr(func, "__name__", "")
            if name in views:
                result = func(*args, **kwargs)
                for source in args[:1]:
                    if not isinstance(source, torch.Tensor):
                        continue
                    for view in outputs(result):
                        if isinstance(view, torch.Tensor) and view is not source:
                            roots.add(view, root(source))
                    narrow_source = stored.get(source)
                    if narrow_source is not None:
                        for wide, narrow_view in zip(
                                outputs(result),
                                outputs(func(narrow_source, *args[1:],
                                             **kwargs))):
                            stored.add(wide, narrow_view)
                return result
            if func in products:
                count_reads(args)
                if attention == "loops" and not any(map(is_parameter, args)):
                    return product(*args)
                if attention == "cudnn" and not any(map(is_parameter, args)):
                    return attention_product(*self.read(args, name))
                return product(*self.read(args, name))
            if func is torch.nn.functional.linear:
                count_reads(args[:1])
                x, weight = self.read(args[:2], name)
                bias = args[2] if len(args) > 2 else kwargs.get("bias")
                return product(x, weight.t(), bias)
            result = func(*self.read(args, name), **kwargs)
            if any(isinstance(r, torch.Tensor) for r in outputs(result)):
                count_reads(args)
            if attention == "cudnn" and name == "softmax":
                probabilities.add(result)
            return result

        @staticmethod
        def read(args, name):
            """The arguments as `name` reads them: a stored product's
            result rounded, unless a layer norm reads it."""
            if name in layer_norms:
                return args
            return tuple(stored.get(a) if isinstance(a, torch.Tensor) and
                         stored.get(a) is not None else a for a in args)
    return Mode()


def make_optimizer(torch, model, args):
    params = model.parameters()
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                               nesterov=args.nesterov,
                               weight_decay=args.weight_decay)
    if args.optimizer == "adam":
        return torch.optim.Adam(params, lr=args.lr,
                                weight_decay=args.weight_decay)
    if args.optimizer == "adagrad":
        return torch.optim.Adagrad(params, lr=args.lr, lr_decay=args.lr_decay,
                                   weight_decay=args.weight_decay)
    return torch.optim.AdamW(params, lr=args.lr,
                             weight_decay=args.weight_decay)


def schedule(args):
    """The learning-rate factor of Hugging Face's schedules with warm-up."""
    import math
    warmup, total = args.warmup_steps, args.total_steps

    def factor(step):
        if step < warmup:
            return float(step) / float(max(1, warmup))
        if args.schedule == "constant":
            return 1.0
        if args.schedule == "linear":
            return max(0.0, float(total - step) / float(max(1, total - warmup)))
        progress = float(step - warmup) / float(max(1, total - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
    return factor


def check_params(args):
    with np.load(args.expected) as archive:
        expected = {k: archive[k] for k in archive.files}
    saved = {args.prefix + k: v for k, v in read_safetensors(args.actual).items()}
    bad = 0
    skipped = [n for n in expected if args.exclude and re.search(args.exclude, n)]
    for name, want in expected.items():
        if name in skipped:
            continue
        if name not in saved:
            print("error: %s missing from %s" % (name, args.actual))
            bad += 1
            continue
        got = saved[name]
        if got.shape != want.shape or not np.allclose(got, want, rtol=args.rtol,
                                                       atol=args.atol):
            print("error: %s differs (max abs diff %.3g)" % (
                name, float(np.abs(got.astype(np.float64) - want).max())))
            bad += 1
    print("%d parameters compared, %d differ, %d excluded" % (
        len(expected) - len(skipped), bad, len(skipped)))
    return 1 if bad else 0


def check(args):
    """Compares losses (or, with --column lr, learning rates) with kiln-run's:
    its printed lines, or the records of its --metrics .jsonl file."""
    import json
    if args.expected.endswith(".jsonl"):
        # Another run's metrics: its values of the column.
        with open(args.expected) as f:
            expected = [float(json.loads(line)[args.column])
                        for line in f if line.strip()]
    else:
        expected = [float(l) for l in open(args.expected).read().split()]
    text = open(args.actual).read()
    if args.actual.endswith(".jsonl"):
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        got = [float(r[args.column]) for r in records]
        steps = [r["step"] for r in records]
        if steps != list(range(1, len(records) + 1)):
            print("error: metrics steps are %s, expected 1..%d" % (steps, len(records)))
            return 1
    else:
        got = [float(m) for m in re.findall(r"\b%s ([-0-9.eE+naninf]+)" % args.column, text)]
    if len(got) != len(expected):
        print("error: %d losses from kiln-run, %d expected" % (len(got), len(expected)))
        return 1
    bad = 0
    largest = 0.0
    for step, (g, e) in enumerate(zip(got, expected), 1):
        ok = abs(g - e) <= args.rtol * abs(e) + args.atol
        bad += not ok
        if e != 0:
            largest = max(largest, abs(g - e) / abs(e))
        print("step %d: %s kiln %.6g torch %.6g %s" % (
            step, args.column, g, e, "" if ok else "MISMATCH"))
    print("largest relative difference: %.3g" % largest)
    return 1 if bad else 0


def check_sharded_state(args):
    """Each gathered bucket of a sharded optimizer state (optimizer.bucket<i>.
    <state>, every rank's shard in rank order) is the unsharded run's states
    of its parameters, flattened one after another, then zero padding of
    fewer elements than the ranks."""
    plain = read_safetensors(args.unsharded)
    sharded = read_safetensors(args.sharded)
    unused = {n: v.ravel() for n, v in plain.items()
              if "." in n and not n.startswith(("optimizer.", "amp."))
              and n.rsplit(".", 1)[1] in STATE_SUFFIXES}
    buckets = {n: v for n, v in sharded.items()
               if re.match(r"optimizer\.bucket\d+\.", n)}
    bad = 0
    for name, values in sorted(buckets.items()):
        kind = name.rsplit(".", 1)[1]
        pos = 0
        while pos < len(values):
            match = next((n for n, v in unused.items()
                          if n.endswith("." + kind) and pos + len(v) <= len(values)
                          and np.allclose(values[pos:pos + len(v)], v,
                                          rtol=args.rtol, atol=args.atol)), None)
            if match is None:
                break
            pos += len(unused.pop(match))
        padding = values[pos:]
        if len(padding) >= args.ranks or np.any(padding != 0):
            print("error: %s: elements from %d match no parameter's %s" % (
                name, pos, kind))
            bad += 1
    for name in unused:
        print("error: %s is in no bucket of %s" % (name, args.sharded))
        bad += 1
    print("%d buckets of sharded state compared, %d differ" % (len(buckets), bad))
    return 1 if bad or not buckets else 0


STATE_SUFFIXES = ("exp_avg", "exp_avg_sq", "momentum_buffer", "sum")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("model", choices=["mlp", "gpt2", "cnn", "bert"])
    p.add_argument("dir")
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw", "adagrad"],
                   required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--lr-decay", type=float, default=0.0)
    p.add_argument("--schedule", choices=["constant", "linear", "cosine"],
                   default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--total-steps", type=int, default=0)
    p.add_argument("--grad-clip", type=float, default=0.0)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--kiln-loss", action="store_true")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--ignore-index", type=int)
    p.add_argument("--seq", type=int,
                   help="gpt2: the sequence length (default 16)")
    p.add_argument("--masking", choices=MASKING["bert"], default="add",
                   help="how bert masks its padding keys, gpt2 its "
                        "scores above the diagonal (the module's docstring)")
    p.add_argument("--bf16-matmul", dest="matmul_operands",
                   action="store_const", const="bf16",
                   help="train the reference with matrix products on bf16 "
                        "operands (kilnc --amp=bf16)")
    p.add_argument("--fp16-matmul", dest="matmul_operands",
                   action="store_const", const="fp16",
                   help="the same with f16 operands (kilnc --amp=fp16)")
    p.add_argument("--amp-activations", choices=["narrow", "f32"],
                   default="narrow",
                   help="with --bf16-matmul or --fp16-matmul: whether the "
                        "products store their results rounded, as kilnc "
                        "--amp-activations says")
    p.add_argument("--amp-attention", choices=["flash", "loops", "cudnn"],
                   default="flash",
                   help="with --bf16-matmul or --fp16-matmul: the attention "
                        "kilnc builds (--cuda-attention), which decides "
                        "what reads the stored products' results in f32")
    p.add_argument("--loss-scale", type=float, default=0.0,
                   help="dynamic loss scaling from this initial scale, as "
                        "GradScaler (kilnc --amp=fp16 --loss-scale)")
    p.add_argument("--loss-scale-growth-interval", type=int, default=2000)
    c = sub.add_parser("check")
    c.add_argument("expected")
    c.add_argument("actual")
    c.add_argument("--rtol", type=float, default=2e-3)
    c.add_argument("--atol", type=float, default=0.0)
    c.add_argument("--column", choices=["loss", "lr", "loss_scale"],
                   default="loss")
    cp = sub.add_parser("check-params")
    cp.add_argument("expected")
    cp.add_argument("actual")
    cp.add_argument("--rtol", type=float, default=1e-4)
    cp.add_argument("--atol", type=float, default=1e-5)
    cp.add_argument("--prefix", default="",
                    help="the saved names lack this prefix of torch's "
                    "(e.g. 'net.' for the logits-only export)")
    cp.add_argument("--exclude", default="",
                    help="skip parameters whose name matches this regex")
    cs = sub.add_parser("check-sharded-state")
    cs.add_argument("unsharded")
    cs.add_argument("sharded")
    cs.add_argument("--ranks", type=int, required=True)
    cs.add_argument("--rtol", type=float, default=1e-4)
    cs.add_argument("--atol", type=float, default=1e-12)
    args = parser.parse_args()
    if args.command == "check-sharded-state":
        return check_sharded_state(args)
    if args.command == "prepare":
        prepare(args)
        return 0
    if args.command == "check-params":
        return check_params(args)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
