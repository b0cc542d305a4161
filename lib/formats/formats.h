/*
 * formats — the wing of file formats: each format the pipeline reads or writes is one module,
 * and the stage that writes a file and the stage that reads it use the same code, so the two
 * sides cannot drift apart. This header is a map, not an umbrella include: include the module
 * you use. Byte layouts are in each module's header and in docs/formats.md.
 *
 *   shard.h        the token shards and their index.json (magic, version, header size, CRC32)
 *                  between swift-preprocess, which writes them (lib/preprocess/store.c), and
 *                  swift-train and swift-eval, which map and read them (lib/train, lib/eval);
 *                  swift-export --quant reads them for GPTQ calibration (lib/export/gptq.c).
 *   safetensors.h  Hugging Face safetensors, single files and sharded sets with their
 *                  model.safetensors.index.json: read by lib/model (base weights, LoRA adapters)
 *                  and lib/export; written by lib/train (checkpoints, optimizer state) and
 *                  lib/export (merged HF models, GPTQ int4).
 *   gguf.h         llama.cpp's GGUF v2/v3: the bounds-checked mapped reader (gguf_read.c, used
 *                  by swift-export's dump and the tests) and the streaming writer
 *                  (gguf_write.c, used by swift-export --format gguf); gguf.c holds the ggml
 *                  type table and the metadata values both share.
 *   quant.h        ggml tensor encodings (F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K), bit-exact
 *                  with ggml, and their dequantization, plus the fp16/bf16 conversions: used
 *                  by lib/export (GGUF tensors, HF and GPTQ safetensors).
 *   image.h        JPEG, PNG and WebP to 8-bit RGB as Pillow + transformers' convert_to_rgb
 *                  see them (libjpeg-turbo, libpng, libwebp): swift-preprocess's image rows
 *                  (lib/preprocess/mm.c); image inputs of eval/infer later.
 *   pixels.h       the image cache between swift-preprocess and the trainer: one resized image
 *                  per content-addressed ".pix" file, and its bit-exact expansion into
 *                  Qwen2-VL's pixel_values (the shard layout of pixel patches, issue 23).
 *
 * internal.h is private to this wing (what gguf_read.c and gguf_write.c share).
 */
#ifndef SWIFT_FORMATS_H
#define SWIFT_FORMATS_H
#endif
