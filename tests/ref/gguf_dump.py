#!/usr/bin/env python3
"""Dump a GGUF file's header with PyPI gguf's GGUFReader, in the text format of
`swift-export --dump` (lib/export/dump.c), so CI compares our reader (and our writer's output) with gguf-py
without Python:

    python3 tests/ref/gguf_dump.py FILE.gguf [MAX_ITEMS] > fixture.txt
"""
import hashlib
import json
import sys

from gguf import GGUFReader, GGUFValueType

TYPES = {GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
         GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
         GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
         GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
         GGUFValueType.FLOAT64: "f64"}


def fmt(t, x):
    if t == GGUFValueType.BOOL:
        return "true" if x else "false"
    if t == GGUFValueType.FLOAT32:
        return "%.9g" % x
    if t == GGUFValueType.FLOAT64:
        return "%.17g" % x
    if t == GGUFValueType.STRING:
        return json.dumps(x, ensure_ascii=False)
    return str(int(x))


def main():
    path = sys.argv[1]
    max_items = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    r = GGUFReader(path)
    out = []
    fields = list(r.fields.values())
    pseudo = {f.name: f.contents() for f in fields if f.name.startswith("GGUF.")}
    out.append("version\t%d" % pseudo["GGUF.version"])
    out.append("alignment\t%d" % r.alignment)
    out.append("kv_count\t%d" % pseudo["GGUF.kv_count"])
    out.append("tensor_count\t%d" % pseudo["GGUF.tensor_count"])
    for f in fields:
        if f.name.startswith("GGUF."):
            continue
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            et = f.types[-1]
            if len(f.types) > 2:
                raise SystemExit("nested arrays are not dumped by this script")
            items = f.contents()
            n = len(items)
            full = "[" + ",".join(fmt(et, x) for x in items) + "]"
            body = full
            if max_items and n > max_items:
                head = "[" + ",".join(fmt(et, x) for x in items[:max_items]) + "]"
                digest = hashlib.sha256(full.encode("utf-8")).hexdigest()
                body = '{"type":"%s","n":%d,"head":%s,"sha256":"%s"}' % (TYPES[et], n, head,
                                                                         digest)
            out.append("kv\t%s\tarray[%s]\t%s" % (f.name, TYPES[et], body))
        else:
            out.append("kv\t%s\t%s\t%s" % (f.name, TYPES[t], fmt(t, f.contents())))
    for t in r.tensors:
        ne = ",".join(str(int(x)) for x in t.shape)
        digest = hashlib.sha256(t.data.tobytes()).hexdigest()[:16]
        out.append("tensor\t%s\t%s\t[%s]\t%d\t%d\t%s" % (t.name, t.tensor_type.name, ne,
                                                        t.data_offset - r.data_offset, t.n_bytes,
                                                        digest))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
