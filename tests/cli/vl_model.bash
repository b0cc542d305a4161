# Sourced by the bats files that train on image shards (train-vl-packing.bats; train-vl.bats has
# the same function inline): vl_widen DIR writes the tiny Qwen2-VL fixture tests/fixtures/vlm/qwen2_vl
# with its vocabulary widened to Qwen2's 151936 ids and Qwen2's vision token ids into DIR (every
# other tensor as committed, embed_tokens and lm_head rows i = the fixture's row i % 128; python3's
# standard library only), and qwen3's tokenizer files beside it ($TOK).
vl_widen() {
    mkdir -p "$1"
    python3 - tests/fixtures/vlm/qwen2_vl "$1" <<'PY'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(src + "/config.json"))
V = 151936
cfg["text_config"]["vocab_size"] = V
cfg.update(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
           vision_end_token_id=151653)
json.dump(cfg, open(dst + "/config.json", "w"), indent=2)
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
body = raw[8 + n:]
out, data, off = {}, [], 0
for k in sorted(x for x in hdr if x != "__metadata__"):
    t = hdr[k]
    b = body[t["data_offsets"][0]:t["data_offsets"][1]]
    shape = t["shape"]
    if k in ("lm_head.weight", "model.language_model.embed_tokens.weight"):
        row = len(b) // shape[0]
        b = b"".join(b[(i % shape[0]) * row:(i % shape[0] + 1) * row] for i in range(V))
        shape = [V, shape[1]]
    out[k] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [off, off + len(b)]}
    data.append(b)
    off += len(b)
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
with open(dst + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(data))
PY
    cp "$TOK"/tokenizer*.json "$1/"
    [ -f "$TOK/vocab.json" ] && cp "$TOK/vocab.json" "$TOK/merges.txt" "$1/" || true
}
