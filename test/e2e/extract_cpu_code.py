"""Writes the CPU code section of a .kiln bundle (its ELF shared object) to
a file, for llvm-objdump:  extract_cpu_code.py BUNDLE OUT.so

Reads the section table as docs/bundle-format.md describes it; exits 1 when
the bundle has no CPU code or more than one."""
import struct
import sys

CPU_CODE = 3


def main():
    bundle, out = sys.argv[1], sys.argv[2]
    data = open(bundle, "rb").read()
    if data[:8] != b"KILNBNDL":
        sys.exit("error: %s is not a .kiln bundle" % bundle)
    count, table = struct.unpack_from("<IQ", data, 12)
    images = []
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<IIQQ", data,
                                                   table + 64 * i)
        if kind == CPU_CODE:
            images.append(data[offset:offset + size])
    if len(images) != 1:
        sys.exit("error: %s has %d CPU code sections, expected 1"
                 % (bundle, len(images)))
    open(out, "wb").write(images[0])


if __name__ == "__main__":
    main()
