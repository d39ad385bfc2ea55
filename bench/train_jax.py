"""The JAX/XLA side of bench/train_throughput.py: the GPT-2-style and
BERT-style loss models of test/lib/kiln_onnx_models.py written in
jax.numpy, trained with a hand-written AdamW, the whole step jit-compiled.

    JAX_PYTHON bench/train_jax.py CONFIG.json

Runs under an interpreter that has JAX (not the system Python: it needs
neither torch nor onnx). CONFIG names the model, the .npz of its initial
parameters (PyTorch's named_parameters, "net." stripped: tied weights once)
and of its training data, and the settings. Two modes:

  "train"   compiles the step (printing its compile time), runs the first
            check_steps steps and prints their losses, one JSON line; then
            reads commands from stdin, one a line: "time R" runs R steps and
            prints the mean wall seconds of one; "quit" (or end of input)
            ends it.
  "memory"  compiles, prints its resident set just before the first step as
            JSON, runs memory_steps steps and exits (the benchmark reads its
            peak from wait4).

Threads: XLA's CPU client sizes its intra-op thread pool from the NPROC
environment variable when it is set (else from the CPUs the process may run
on); the benchmark sets NPROC to --threads. XLA_FLAGS
--xla_cpu_multi_thread_eigen=false does not limit this jaxlib's compiled
code, and intra_op_parallelism_threads is no XLA flag (bench/README.md).
"""
import json
import sys
import time

from common import resident_kib


def load_npz(path):
    import numpy as np
    with np.load(path) as archive:
        return {key: archive[key] for key in archive.files}


#===-----------------------------------------------------------------------===#
# The models: torch_modules() of kiln_onnx_models.py in eval mode (no
# dropout), followed by the mean cross-entropy. Linear weights keep
# PyTorch's [out, in] layout.
#===-----------------------------------------------------------------------===#

def linear(p, name, x):
    y = x @ p[name + ".weight"].T
    bias = p.get(name + ".bias")
    return y if bias is None else y + bias


def layer_norm(p, name, x, eps):
    import jax.numpy as jnp
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return ((x - mean) / jnp.sqrt(var + eps) * p[name + ".weight"] +
            p[name + ".bias"])


def split_heads(x, heads):
    b, t, c = x.shape
    return x.reshape(b, t, heads, c // heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


def cross_entropy(logits, labels):
    import jax
    import jax.numpy as jnp
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, labels[..., None], axis=-1)
    return -picked.mean()


def gpt2_loss(p, batch, heads, layers):
    """Pre-LN decoder, causal mask, tanh GELU, LayerNorm eps 1e-5, lm_head
    tied to wte."""
    import jax
    import jax.numpy as jnp
    idx, labels = batch
    t = idx.shape[1]
    d = p["wte.weight"].shape[1]
    x = p["wte.weight"][idx] + p["wpe.weight"][:t]
    causal = jnp.tril(jnp.ones((t, t), bool))
    for i in range(layers):
        block = "blocks.%d." % i
        h = layer_norm(p, block + "ln1", x, 1e-5)
        q, k, v = jnp.split(linear(p, block + "attn.qkv", h), 3, axis=-1)
        q, k, v = (split_heads(z, heads) for z in (q, k, v))
        att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / (d // heads) ** 0.5)
        att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
        x = x + linear(p, block + "attn.proj", merge_heads(att @ v))
        h = layer_norm(p, block + "ln2", x, 1e-5)
        h = jax.nn.gelu(linear(p, block + "mlp.0", h), approximate=True)
        x = x + linear(p, block + "mlp.2", h)
    logits = layer_norm(p, "ln_f", x, 1e-5) @ p["wte.weight"].T
    return cross_entropy(logits, labels)


def bert_loss(p, batch, heads, layers):
    """Post-LN encoder, additive padding mask (1 - mask) * -10000, erf GELU,
    LayerNorm eps 1e-12, tanh pooler on the first token, two classes."""
    import jax
    import jax.numpy as jnp
    input_ids, attention_mask, labels = batch
    t = input_ids.shape[1]
    d = p["word_embeddings.weight"].shape[1]
    x = (p["word_embeddings.weight"][input_ids] +
         p["position_embeddings.weight"][:t] +
         p["token_type_embeddings.weight"][0])
    x = layer_norm(p, "emb_norm", x, 1e-12)
    extended = (1.0 - attention_mask[:, None, None, :].astype(x.dtype)) * \
        -10000.0
    for i in range(layers):
        layer = "layers.%d." % i
        q, k, v = (split_heads(linear(p, layer + "attention." + part, x),
                               heads) for part in ("query", "key", "value"))
        scores = (q @ k.transpose(0, 1, 3, 2)) / (d // heads) ** 0.5
        probs = jax.nn.softmax(scores + extended, axis=-1)
        a = linear(p, layer + "attn_out", merge_heads(probs @ v))
        x = layer_norm(p, layer + "attn_norm", x + a, 1e-12)
        h = jax.nn.gelu(linear(p, layer + "intermediate", x),
                        approximate=False)
        h = linear(p, layer + "output", h)
        x = layer_norm(p, layer + "out_norm", x + h, 1e-12)
    pooled = jnp.tanh(linear(p, "pooler", x[:, 0]))
    return cross_entropy(linear(p, "classifier", pooled), labels)


#===-----------------------------------------------------------------------===#
# AdamW as torch.optim.AdamW (amsgrad off): decoupled weight decay
# p *= 1 - lr * wd first, then Adam with bias corrections, eps added to
# sqrt(v) / sqrt(1 - beta2^t).
#===-----------------------------------------------------------------------===#

def make_train_step(config):
    import jax
    import jax.numpy as jnp
    model = {"gpt2": gpt2_loss, "bert": bert_loss}[config["model"]]
    heads, layers = config["heads"], config["layers"]
    lr, wd = config["lr"], config["weight_decay"]
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    def loss_fn(params, batch):
        return model(params, batch, heads, layers)

    def adamw(p, g, m, v, bc1, bc2):
        p = p * (1.0 - lr * wd)
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        denom = jnp.sqrt(v) / jnp.sqrt(bc2) + eps
        return p - (lr / bc1) * m / denom, m, v

    def train_step(params, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        step = state["step"] + 1
        t = step.astype(jnp.float32)
        bc1, bc2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
        new_params, m, v = {}, {}, {}
        for key in params:
            new_params[key], m[key], v[key] = adamw(
                params[key], grads[key], state["m"][key], state["v"][key],
                bc1, bc2)
        return new_params, {"step": step, "m": m, "v": v}, loss

    return jax.jit(train_step, donate_argnums=(0, 1))


class Trainer:
    """The compiled step, the parameters, AdamW's state and the batches on
    the device, run from batch 0 on."""

    def __init__(self, config):
        import jax
        import jax.numpy as jnp
        self.jax = jax
        self.params = {key: jnp.asarray(value) for key, value in
                       load_npz(config["params"]).items()}
        self.state = {
            "step": jnp.zeros((), jnp.int32),
            "m": {key: jnp.zeros_like(p) for key, p in self.params.items()},
            "v": {key: jnp.zeros_like(p) for key, p in self.params.items()}}
        data = load_npz(config["data"])
        names = config["inputs"]
        batch, samples = config["batch"], len(data[names[0]])
        self.batches = [
            tuple(jnp.asarray(data[name][i * batch:(i + 1) * batch]
                              .astype("int32")) for name in names)
            for i in range(samples // batch)]
        self.cursor = 0
        start = time.perf_counter()
        self.step = make_train_step(config).lower(
            self.params, self.state, self.batches[0]).compile()
        self.compile_s = time.perf_counter() - start

    def steps(self, count):
        """Runs count steps, each waited for; returns their losses."""
        losses = []
        for _ in range(count):
            batch = self.batches[self.cursor % len(self.batches)]
            self.cursor += 1
            self.params, self.state, loss = self.jax.block_until_ready(
                self.step(self.params, self.state, batch))
            losses.append(float(loss))
        return losses

    def time(self, count):
        start = time.perf_counter()
        self.steps(count)
        return (time.perf_counter() - start) / count


def reply(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def train(config):
    trainer = Trainer(config)
    losses = trainer.steps(config["check_steps"])
    reply({"compile_s": trainer.compile_s, "losses": losses})
    for line in sys.stdin:
        words = line.split()
        if words == ["quit"]:
            break
        if len(words) != 2 or words[0] != "time":
            reply({"error": "unknown command %r" % line.strip()})
            continue
        reply({"seconds_per_step": trainer.time(int(words[1]))})
    return 0


def memory(config):
    trainer = Trainer(config)
    before = resident_kib()
    trainer.steps(config["memory_steps"])
    reply({"rss_before_first_step_kib": before,
           "compile_s": trainer.compile_s})
    return 0


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        config = json.load(f)
    import jax
    jax.config.update("jax_platforms", "cpu")
    return {"train": train, "memory": memory}[config["mode"]](config)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
