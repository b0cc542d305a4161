# shellcheck shell=bash
# Sourced by the bats files and benchmarks that train, evaluate, analyze or export on image
# shards: the tiny Qwen2-VL / Qwen2.5-VL fixtures (tests/fixtures/vlm/*, tests/ref/
# gen_vlm_fixtures.py) made trainable on real shards.
#   vl_widen DST [SRC]   SRC (default tests/fixtures/vlm/qwen2_vl) into DST with its vocabulary
#                        widened to the qwen3 tokenizer's 151936 ids (Qwen2's, with the vision
#                        tokens; the fixtures' own is 128) and Qwen2's vision token ids: every
#                        other tensor as committed, embed_tokens and lm_head rows i = the
#                        fixture's row i % 128 (python3's standard library only), and the
#                        tokenizer's files beside it ($SHARED/data/tokenizers/qwen3)
#   vl_model_at SRC DST SHARDS [TEMPLATE]
#                        vl_widen, then LLaMA-Factory's mllm_demo.json preprocessed against DST
#                        into SHARDS (--max-pixels 12544 --max-length 128; none when SHARDS is "")
#   st_digest DIR REGEX  the tensors of DIR's safetensors as sorted "NAME DTYPE SHAPE SHA256" lines
vl_widen() {
    local dst=$1 src=${2:-tests/fixtures/vlm/qwen2_vl} tok="$SHARED/data/tokenizers/qwen3"
    mkdir -p "$dst"
    python3 - "$src" "$dst" <<'EOF'
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
    if k in ("lm_head.weight", "model.language_model.embed_tokens.weight",
             "model.embed_tokens.weight"):
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
EOF
    cp "$tok"/tokenizer*.json "$dst/"
    if [ -f "$tok/vocab.json" ]; then cp "$tok/vocab.json" "$tok/merges.txt" "$dst/"; fi
}

vl_model_at() {
    vl_widen "$2" "$1"
    [ -z "$3" ] || "$SWIFT_BIN/swift-preprocess" --tokenizer "$2" --template "${4:-qwen2_vl}" \
        --max-pixels 12544 --max-length 128 -o "$3" \
        "$SHARED/data/datasets/llama-factory-demo/mllm_demo.json"
}

# python3 (standard library): each tensor of a safetensors directory as "NAME DTYPE SHAPE SHA256"
# lines, sorted, for the tensors whose name matches the regular expression $2
st_digest() {
    python3 - "$1" "$2" <<'EOF'
import glob, hashlib, json, re, struct, sys
rows = []
for p in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    for k, t in hdr.items():
        if k == "__metadata__" or not re.search(sys.argv[2], k):
            continue
        b = raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
        rows.append(f'{k} {t["dtype"]} {t["shape"]} {hashlib.sha256(b).hexdigest()}')
print("\n".join(sorted(rows)))
EOF
}
