"""Checks the CUDA code of a .kiln bundle without a GPU.

usage: check_cuda_bundle.py BUNDLE --kernels N --archs sm_80,sm_90a
           [--schema DIR [--gemm-types A:C[,A:C...]] [--commands ENTRY]]

Reads the section table (docs/bundle-format.md) and checks that the bundle
has one cubin section per architecture (an ELF image for the NVIDIA CUDA
machine whose ELF flags name that architecture) and one PTX section for the
first architecture's virtual one; that the PTX defines exactly N kernels
(.entry) and targets that architecture; and that every cubin defines the
same N kernels as functions. Prints one line per section checked.

With --schema (the directory of bundle.proto, compiled with protoc at run
time), it also decodes the manifest and prints each entry point's CUDA
program (launches, gemms, attention and layer-norm commands); --gemm-types
bf16:f32,bf16:bf16 checks that every gemm multiplies A and B of one pair's
first type into C of its second, and --commands ENTRY lists ENTRY's
commands, one per line (a gemm with a 16-bit C ends "into bf16" or "into
f16").
"""

import argparse
import importlib
import os
import re
import struct
import subprocess
import sys
import tempfile

MANIFEST, CUBIN, PTX = 1, 4, 5
EM_CUDA = 190


def sections(data):
    if data[:8] != b"KILNBNDL":
        sys.exit("error: not a .kiln bundle")
    count, table = struct.unpack_from("<IQ", data, 12)
    for i in range(count):
        entry = data[table + 64 * i : table + 64 * (i + 1)]
        kind, _, offset, size = struct.unpack_from("<IIQQ", entry)
        name = entry[32:].split(b"\0")[0].decode()
        yield kind, name, data[offset : offset + size]


def elf_functions(image):
    """Names of the function symbols of a 64-bit little-endian ELF image,
    and its machine and flags."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        sys.exit("error: a cubin section is not a 64-bit little-endian ELF")
    machine, = struct.unpack_from("<H", image, 18)
    flags, = struct.unpack_from("<I", image, 48)
    shoff, = struct.unpack_from("<Q", image, 40)
    shentsize, shnum = struct.unpack_from("<HH", image, 58)
    headers = []
    for i in range(shnum):
        base = shoff + i * shentsize
        _, type_, _, _, offset, size, link, _, _, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", image, base)
        headers.append((type_, offset, size, link, entsize))
    names = set()
    for type_, offset, size, link, entsize in headers:
        if type_ != 2:  # SHT_SYMTAB
            continue
        strtab = headers[link]
        for s in range(offset, offset + size, entsize):
            name_offset, info = struct.unpack_from("<IB", image, s)
            if info & 0xF == 2:  # STT_FUNC
                end = image.index(b"\0", strtab[1] + name_offset)
                names.add(image[strtab[1] + name_offset : end].decode())
    return machine, flags, names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle")
    parser.add_argument("--kernels", type=int, required=True)
    parser.add_argument("--archs", required=True)
    parser.add_argument("--schema")
    parser.add_argument("--gemm-types")
    parser.add_argument("--commands", metavar="ENTRY")
    args = parser.parse_args()
    archs = args.archs.split(",")
    data = open(args.bundle, "rb").read()
    cubins, ptxs = {}, {}
    manifest = None
    for kind, name, payload in sections(data):
        if kind == MANIFEST:
            manifest = payload
        elif kind == CUBIN:
            cubins[name] = payload
        elif kind == PTX:
            ptxs[name] = payload
    expected_cubins = ["code.cuda." + arch for arch in archs]
    if sorted(cubins) != sorted(expected_cubins):
        sys.exit(f"error: cubin sections {sorted(cubins)}, expected "
                 f"{sorted(expected_cubins)}")
    virtual = "compute_" + archs[0][3:]
    if list(ptxs) != ["code.cuda." + virtual]:
        sys.exit(f"error: PTX sections {list(ptxs)}, expected code.cuda.{virtual}")

    ptx = next(iter(ptxs.values()))
    if not ptx.endswith(b"\0"):
        sys.exit("error: the PTX is not NUL-terminated")
    text = ptx[:-1].decode()
    target = re.search(r"^\.target\s+(\S+)", text, re.M)
    if not target or target.group(1) != archs[0]:
        sys.exit(f"error: PTX .target is {target and target.group(1)}, "
                 f"expected {archs[0]}")
    entries = set(re.findall(r"\.entry\s+([A-Za-z_][A-Za-z0-9_$]*)", text))
    if len(entries) != args.kernels:
        sys.exit(f"error: the PTX defines {len(entries)} kernels, the target "
                 f"lists {args.kernels}")
    print(f"{virtual} ptx: .target {archs[0]}, {len(entries)} kernels")

    for arch in archs:
        machine, flags, functions = elf_functions(cubins["code.cuda." + arch])
        if machine != EM_CUDA:
            sys.exit(f"error: {arch} cubin is for ELF machine {machine}")
        # The cubin's ELF flags hold the SM version (bits 8-15 for CUDA 12
        # and later, whose cubins have ABI version 8 and up).
        sm = int(re.match(r"sm_(\d+)", arch).group(1))
        if (flags >> 8) & 0xFF != sm:
            sys.exit(f"error: {arch} cubin has ELF flags {flags:#x}, not sm {sm}")
        missing = entries - functions
        if missing:
            sys.exit(f"error: {arch} cubin lacks kernels {sorted(missing)[:5]}")
        print(f"{arch} cubin: EM_CUDA, sm {sm}, all {len(entries)} kernels")
    if args.schema:
        check_programs(manifest, args.schema, args.gemm_types, args.commands)


def describe(command, kernels, names):
    """One line for a command of a CUDA program."""
    if command.HasField("launch"):
        launch = command.launch
        grid = "x".join(str(g) for g in launch.grid)
        return f"launch {kernels[launch.kernel]} grid {grid}"
    if command.HasField("gemm"):
        g = command.gemm
        bias = " + bias" if g.HasField("bias") and g.bias.size else ""
        if g.HasField("bias_grad") and g.bias_grad.size:
            bias += " bias grad of " + ("A" if g.bias_grad_of_a else "B")
        # cuBLASLt's GELU epilogues (kilnc --cuda-gelu-epilogue).
        aux = g.HasField("aux") and g.aux.size
        if g.epilogue == 1:
            bias += " gelu" + (" aux" if aux else "")
        elif g.epilogue == 2:
            bias += " dgelu" + ("" if aux else " (no aux)")
        # Leading dimensions other than a dense matrix's (row-padded views).
        dense = {"lda": g.m if g.transpose_a else g.k,
                 "ldb": g.k if g.transpose_b else g.n, "ldc": g.n}
        padded = "".join(f" {name} {getattr(g, name)}"
                         for name, ld in dense.items()
                         if getattr(g, name) != ld)
        # A 16-bit result (kiln-amp's stored activations).
        into = (f" into {names[g.c_type]}"
                if names[g.c_type] in ("bf16", "f16") else "")
        return f"gemm {g.m}x{g.n}x{g.k}{bias}{padded}{into}"
    if command.HasField("all_reduce_mean"):
        r = command.all_reduce_mean
        return f"all-reduce-mean {r.count} f32, request {r.request}"
    if command.HasField("collective_wait"):
        return f"wait request {command.collective_wait.request}"
    if command.HasField("attention"):
        a = command.attention

        def strides(t):
            return f"{t.batch_stride},{t.head_stride},{t.row_stride}"
        kind = "backward" if a.backward else "forward"
        grouped = f"({a.key_heads} key heads) " if a.key_heads else ""
        text = (f"attention {kind} {a.batch}x{a.heads} heads {grouped}"
                f"{a.queries}x{a.keys} d{a.head_size} q {strides(a.query)} "
                f"out {strides(a.out)}")
        if a.HasField("mask") and a.mask.buffer.size:
            text += f" mask {strides(a.mask)}"
        if a.causal:
            text += " causal"
        if a.masked_fill:
            text += " masked_fill"
        if a.causal_fill:
            text += " causal_fill"
        if a.engine == 1:  # CUDNN; an unset type is f32
            def type_name(t):
                return names[t] if t else "f32"
            text += f" on cuDNN, out {type_name(a.out_type)}"
            if a.backward:
                text += f", grads {type_name(a.input_grad_type)}"
        if a.backward:
            text += f" dk {strides(a.key_grad)}"
        return text
    if command.HasField("layer_norm"):
        n = command.layer_norm
        def has(field):
            return n.HasField(field) and getattr(n, field).size > 0
        if n.backward:
            blocks = n.partials.size // (2 * n.cols * 4)
            accumulate = " + accumulate" if has("accumulate") else ""
            rounded = f" -> {names[n.output_type]}" if has("output") else ""
            return (f"layer norm backward {n.rows}x{n.cols}{accumulate} "
                    f"partials {blocks}x2x{n.cols}{rounded}")
        bias = " + bias" if has("bias") else ""
        residual = " + residual" if has("residual") else ""
        copy = f" + {names[n.copy_type]} copy" if has("copy") else ""
        return (f"layer norm forward {n.rows}x{n.cols}{bias}{residual} -> "
                f"{names[n.output_type]}{copy}")
    if command.HasField("shard"):
        s = command.shard
        kind = ["reduce-scatter-mean", "all-gather", "local-shard"][s.kind]
        request = f", request {s.request}" if s.request else ""
        return f"{kind} {s.count} f32 x {s.ranks} ranks{request}"
    sys.exit(f"error: unknown command {command}")


def check_programs(manifest_bytes, schema, gemm_types, list_entry):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["protoc", "--python_out=" + out, "-I", schema,
                        os.path.join(schema, "bundle.proto")], check=True)
        sys.path.insert(0, out)
        pb = importlib.import_module("bundle_pb2")
    manifest = pb.Manifest()
    manifest.ParseFromString(manifest_bytes)
    names = {v: k.lower() for k, v in pb.ElementType.items()}
    for entry in manifest.entry_points:
        cuda = [p for p in entry.programs if p.target == "cuda"]
        if len(cuda) != 1:
            sys.exit(f"error: entry point {entry.name} has {len(cuda)} CUDA "
                     "programs")
        commands = cuda[0].commands
        launches = sum(c.HasField("launch") for c in commands)
        gemms = [c.gemm for c in commands if c.HasField("gemm")]
        types = sorted({f"{names[g.a_type]}:{names[g.c_type]}" for g in gemms})
        attention = sum(c.HasField("attention") for c in commands)
        layer_norms = sum(c.HasField("layer_norm") for c in commands)
        print(f"{entry.name}: {launches} launches, {len(gemms)} gemms "
              f"({', '.join(types)})"
              + (f", {attention} attention" if attention else "")
              + (f", {layer_norms} layer norms" if layer_norms else ""))
        allowed = sorted(gemm_types.split(",")) if gemm_types else None
        if allowed and not set(types) <= set(allowed):
            sys.exit(f"error: {entry.name} has gemms of {types}, expected "
                     f"only {gemm_types}")
        if entry.name == list_entry:
            kernels = next(t.kernels for t in manifest.targets
                           if t.name == "cuda")
            for c in commands:
                print(describe(c, kernels, names))


if __name__ == "__main__":
    main()
