#!/usr/bin/env python3
"""Roofline FLOP references (tests/ref/fixtures/roofline/torch_flops.tsv) from PyTorch's own
formulas in torch/utils/flop_counter.py (mm, addmm, bmm, baddbmm, convolution, SDPA forward and
backward), which tests/unit/test_roofline.c compares lib/analyze/roofline.c against.

    python3 tests/ref/gen_roofline.py [PATH/TO/torch/utils/flop_counter.py]

The formula functions are pure functions of shapes, so they are taken from the source file and
run without importing torch (a 540 MB wheel whose CUDA libraries this machine lacks): with no
argument the file comes from an installed torch; or unpack it from the wheel:
    pip download --no-deps -d /tmp/w torch && unzip /tmp/w/torch-*.whl torch/utils/flop_counter.py
Each line: op name, the Kineto-style "Input Dims" (JSON), torch's FLOPs.
"""
import ast
import json
import math
import os
import sys

FIX = "tests/ref/fixtures/roofline/torch_flops.tsv"
FUNCS = {"mm_flop", "addmm_flop", "bmm_flop", "baddbmm_flop", "conv_flop_count",
         "sdpa_flop_count", "sdpa_backward_flop_count"}


def load(path):
    src = open(path).read()
    tree = ast.parse(src)
    keep = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in FUNCS:
            node.decorator_list = []
            keep.append(node)
    missing = FUNCS - {n.name for n in keep}
    if missing:
        sys.exit(f"gen_roofline: {path}: no {sorted(missing)}")
    ns = {"prod": math.prod}
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), ns)
    return ns, src


def main():
    if len(sys.argv) > 1:
        path = sys.argv[1]
    else:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if not spec:
            sys.exit("gen_roofline: no torch installed; pass the path of flop_counter.py")
        path = os.path.join(os.path.dirname(spec.origin), "utils", "flop_counter.py")
    f, _ = load(path)
    rows = []
    # GEMMs: (op, dims)
    for m, k, n in [(32, 2048, 1000), (7, 13, 5), (4096, 4096, 11008), (1, 768, 50257)]:
        rows.append(("aten::mm", [[m, k], [k, n]], f["mm_flop"]([m, k], [k, n])))
        rows.append(("aten::addmm", [[n], [m, k], [k, n], [], []],
                     f["addmm_flop"]([n], [m, k], [k, n])))
    for b, m, k, n in [(12, 128, 64, 128), (3, 5, 7, 9)]:
        rows.append(("aten::bmm", [[b, m, k], [b, k, n]], f["bmm_flop"]([b, m, k], [b, k, n])))
        rows.append(("aten::baddbmm", [[b, m, n], [b, m, k], [b, k, n], [], []],
                     f["baddbmm_flop"]([b, m, n], [b, m, k], [b, k, n])))
    # Convolutions with known output: convolution_backward carries grad_output; torch counts
    # grad_input + grad_weight (output_mask both) as two conv_flop_counts.
    for x, w, o in [([32, 3, 224, 224], [64, 3, 7, 7], [32, 64, 112, 112]),
                    ([32, 64, 56, 56], [256, 64, 1, 1], [32, 256, 56, 56]),
                    ([8, 16, 10, 10], [32, 16, 3, 3], [8, 32, 8, 8])]:
        fl = f["conv_flop_count"](x, w, o)
        rows.append(("aten::convolution_backward", [o, x, w, [], [], [], [], [], [], [], []],
                     2 * fl))
        rows.append(("aten::cudnn_convolution_backward_input", [[], o, w, [], [], [], [], [], []],
                     fl))
    # Attention, [B, H, S, D]; GQA (fewer KV heads) and Dv != D too.
    for q, k, v in [([2, 16, 1024, 64], [2, 16, 1024, 64], [2, 16, 1024, 64]),
                    ([1, 32, 4096, 128], [1, 8, 4096, 128], [1, 8, 4096, 128]),
                    ([3, 4, 100, 32], [3, 4, 77, 32], [3, 4, 77, 48])]:
        rows.append(("aten::_scaled_dot_product_flash_attention", [q, k, v, [], [], [], []],
                     f["sdpa_flop_count"](q, k, v)))
        go = [q[0], q[1], q[2], v[3]]
        rows.append(("aten::_scaled_dot_product_efficient_attention_backward",
                     [go, q, k, v, go, [], [], []],
                     f["sdpa_backward_flop_count"](go, q, k, v)))
    os.makedirs(os.path.dirname(FIX), exist_ok=True)
    with open(FIX + ".tmp", "w") as fp:
        fp.write("# op\tinput dims\ttorch FLOPs (tests/ref/gen_roofline.py, "
                 "torch/utils/flop_counter.py)\n")
        for op, dims, fl in rows:
            fp.write(f"{op}\t{json.dumps(dims, separators=(',', ':'))}\t{fl}\n")
    os.replace(FIX + ".tmp", FIX)
    print(f"gen_roofline: {len(rows)} rows -> {FIX}")


if __name__ == "__main__":
    main()
