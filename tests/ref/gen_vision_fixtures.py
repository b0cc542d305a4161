#!/usr/bin/env python3
"""Reference pixel_values and image_grid_thw from transformers' Qwen2-VL image processor, for
tests/unit/test_vision.c (lib/formats/image.c, lib/preprocess/vision.c, lib/formats/pixels.c).
CI never runs this; it writes committed fixtures.

The processor is transformers 5.24's default for Qwen2-VL: Qwen2VLImageProcessor (the torchvision
backend; AutoImageProcessor picks it whenever torchvision is installed), called on
PIL.Image.open(path) exactly as a user passes an image. Needs torch, torchvision, transformers 5.24
and Pillow (the venv /work/venv-vl: Pillow + torchvision 0.29.2 installed there, torch and
transformers read from /work/venv-trl through a .pth file).

Writes tests/fixtures/vision/:
  images/*.png|jpg|webp   the synthetic images (small files): odd sizes, tiny, a huge smooth JPEG,
                          grayscale (L, LA), RGBA with varying alpha, a palette PNG with a tRNS
                          chunk, 16-bit RGB, interlaced, WebP lossless with alpha and lossy
  bad/*                   truncated and corrupt copies (the decoders must refuse them)
  expected.json           {"cases": [{name, file (relative to the fixture dir, or
                          "SHARED:<path>" for the demo images), min_pixels, max_pixels,
                          grid_thw, shape, sha256 (of the float32 little-endian pixel_values
                          bytes), sum, abs_sum, samples: [[flat index, value], ...]}],
                          "smart_resize": [[h, w, factor, min, max, out_h, out_w] or
                          [h, w, factor, min, max, "error"]]}
  small-<name>.f32        the whole pixel_values of two small cases (float32 LE)

Run from the repository root: /work/venv-vl/bin/python tests/ref/gen_vision_fixtures.py [SHARED]
"""
import hashlib
import io
import json
import os
import sys

import numpy as np
from PIL import Image

import transformers
from transformers import Qwen2VLImageProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

OUT = "tests/fixtures/vision"
SHARED = sys.argv[1] if len(sys.argv) > 1 else "/work/shared"
DEMO = "data/datasets/llama-factory-demo/mllm_demo_data"
FULL = ("tiny_png", "alpha_png")  # cases whose whole array is committed


def synth():
    rng = np.random.default_rng(23)
    imgs = {}

    def noise(h, w, c):
        return rng.integers(0, 256, (h, w, c), dtype=np.uint8)

    imgs["odd.png"] = Image.fromarray(noise(37, 53, 3), "RGB")
    imgs["tiny.png"] = Image.fromarray(noise(5, 7, 3), "RGB")
    imgs["wide.png"] = Image.fromarray(noise(9, 700, 3), "RGB")
    imgs["gray.png"] = Image.fromarray(noise(61, 45, 1)[:, :, 0], "L")
    la = np.dstack([noise(33, 29, 1), rng.integers(0, 256, (33, 29, 1), dtype=np.uint8)])
    imgs["gray_alpha.png"] = Image.fromarray(la, "LA")
    rgba = noise(40, 31, 4)
    rgba[:5, :, 3] = 0
    rgba[5:10, :, 3] = 255
    imgs["alpha.png"] = Image.fromarray(rgba, "RGBA")
    pal = Image.fromarray(noise(30, 26, 3), "RGB").quantize(16)
    pal.info["transparency"] = 3
    imgs["palette_trns.png"] = pal
    # a huge image (downscaled to max_pixels): smooth, so the committed JPEG stays small
    y, x = np.mgrid[0:2400, 0:3200]
    big = np.dstack([(x * 255 // 3199), (y * 255 // 2399), ((x + y) * 255 // 5598)]).astype(np.uint8)
    imgs["huge.jpg"] = Image.fromarray(big, "RGB")
    imgs["gray.jpg"] = Image.fromarray(noise(47, 71, 1)[:, :, 0] // 2 + 64, "L")
    imgs["webp_alpha.webp"] = Image.fromarray(noise(24, 35, 4), "RGBA")
    imgs["webp_lossy.webp"] = Image.fromarray(
        np.dstack([x[:60, :90] % 256, y[:60, :90] * 3 % 256, (x[:60, :90] * y[:60, :90]) % 256])
        .astype(np.uint8), "RGB")
    return imgs


def save(name, im):
    path = os.path.join(OUT, "images", name)
    if name == "palette_trns.png":
        im.save(path, transparency=3)
    elif name.endswith(".jpg"):
        im.save(path, quality=60)
    elif name == "webp_alpha.webp":
        im.save(path, lossless=True)
    elif name.endswith(".webp"):
        im.save(path, quality=80)
    else:
        im.save(path)
    return path


def extra_pngs():
    """16-bit RGB and an interlaced PNG, written with explicit modes."""
    rng = np.random.default_rng(7)
    arr = rng.integers(0, 65536, (19, 23, 3), dtype=np.uint16)
    # Pillow cannot write 16-bit RGB; build the PNG by hand (zlib, filter 0)
    import struct
    import zlib

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    raw = b"".join(b"\0" + arr[r].astype(">u2").tobytes() for r in range(arr.shape[0]))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 23, 19, 16, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(os.path.join(OUT, "images", "rgb16.png"), "wb") as f:
        f.write(png)
    im = Image.fromarray(rng.integers(0, 256, (29, 31, 3), dtype=np.uint8), "RGB")
    im.save(os.path.join(OUT, "images", "interlaced.png"), interlace=1)
    return ["rgb16.png", "interlaced.png"]


def bad_files():
    d = os.path.join(OUT, "bad")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(OUT, "images", "odd.png"), "rb") as f:
        png = f.read()
    with open(os.path.join(SHARED, DEMO, "1.jpg"), "rb") as f:
        jpg = f.read()
    with open(os.path.join(OUT, "images", "webp_lossy.webp"), "rb") as f:
        webp = f.read()
    files = {
        "truncated.png": png[: len(png) // 2],
        "truncated.jpg": jpg[: len(jpg) // 2],
        "truncated.webp": webp[: len(webp) // 2],
        "crc.png": png[:40] + bytes([png[40] ^ 0xFF]) + png[41:],
        "not_an_image.jpg": b"this is text, not a JPEG\n",
        "empty.png": b"",
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        # Pillow must refuse them too (that is what we claim to match)
        try:
            Image.open(io.BytesIO(data)).load()
            raise SystemExit(f"Pillow accepts bad/{name}")
        except SystemExit:
            raise
        except Exception:
            pass


def case(name, path, rel, min_pixels=None, max_pixels=None):
    kw = {}
    if min_pixels:
        kw["min_pixels"] = min_pixels
    if max_pixels:
        kw["max_pixels"] = max_pixels
    proc = Qwen2VLImageProcessor(**kw)
    out = proc(images=Image.open(path), return_tensors="np")
    pv = np.ascontiguousarray(out["pixel_values"], dtype="<f4")
    grid = [int(v) for v in out["image_grid_thw"][0]]
    flat = pv.reshape(-1)
    rng = np.random.default_rng(len(flat))
    idx = sorted(set(rng.integers(0, len(flat), 48).tolist()) | {0, len(flat) - 1})
    c = {
        "name": name,
        "file": rel,
        "min_pixels": proc.size["shortest_edge"],
        "max_pixels": proc.size["longest_edge"],
        "grid_thw": grid,
        "shape": list(pv.shape),
        "sha256": hashlib.sha256(pv.tobytes()).hexdigest(),
        "sum": float(flat.astype(np.float64).sum()),
        "abs_sum": float(np.abs(flat.astype(np.float64)).sum()),
        "samples": [[i, float(flat[i])] for i in idx],
    }
    if name in FULL:
        with open(os.path.join(OUT, f"small-{name}.f32"), "wb") as f:
            f.write(pv.tobytes())
    return c


def smart_resize_table():
    rows = []
    sizes = [(28, 28), (42, 42), (70, 70), (14, 14), (1, 1), (1, 199), (1, 201), (56, 56),
             (300, 168), (168, 300), (3000, 4000), (4000, 3000), (1080, 1920), (37, 53),
             (99, 13), (10000, 49), (2, 400), (5, 7), (1023, 767), (2048, 2048), (641, 479)]
    limits = [(56 * 56, 28 * 28 * 1280), (4 * 28 * 28, 256 * 28 * 28), (28 * 28, 28 * 28),
              (100 * 28 * 28, 16384 * 28 * 28)]
    for h, w in sizes:
        for lo, hi in limits:
            try:
                oh, ow = smart_resize(h, w, 28, lo, hi)
                rows.append([h, w, 28, lo, hi, oh, ow])
            except ValueError:
                rows.append([h, w, 28, lo, hi, "error"])
    return rows


def main():
    assert transformers.__version__ == "5.24.0", transformers.__version__
    os.makedirs(os.path.join(OUT, "images"), exist_ok=True)
    cases = []
    for name, im in synth().items():
        path = save(name, im)
        cases.append(case(name.replace(".", "_"), path, "images/" + name))
    for name in extra_pngs():
        cases.append(case(name.replace(".", "_"), os.path.join(OUT, "images", name),
                          "images/" + name))
    for i in (1, 2, 3):
        path = os.path.join(SHARED, DEMO, f"{i}.jpg")
        cases.append(case(f"demo{i}", path, f"SHARED:{DEMO}/{i}.jpg"))
    cases.append(case("demo2_limits", os.path.join(SHARED, DEMO, "2.jpg"), f"SHARED:{DEMO}/2.jpg",
                      min_pixels=4 * 28 * 28, max_pixels=64 * 28 * 28))
    cases.append(case("huge_limits", os.path.join(OUT, "images", "huge.jpg"), "images/huge.jpg",
                      min_pixels=56 * 56, max_pixels=200 * 28 * 28))
    bad_files()
    doc = {
        "generator": "tests/ref/gen_vision_fixtures.py",
        "transformers": transformers.__version__,
        "processor": "Qwen2VLImageProcessor (torchvision backend)",
        "cases": cases,
        "smart_resize": smart_resize_table(),
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(cases)} cases, {len(doc['smart_resize'])} smart_resize rows", file=sys.stderr)


if __name__ == "__main__":
    main()
