#!/usr/bin/env bats
# swift-train --rlhf dpo --precompute-ref-logps (lib/train/reflogps.c, docs/preference.md): the
# reference's log-probs computed once before training and stored next to the shards
# (ref_logps-<key>.bin, docs/formats.md) give the same records bit for bit as the reference run
# per step (LoRA and full, --resume, 2 MPI ranks); a later run reuses the file; a changed model
# or shard, or a corrupt file, makes a new computation; a read-only shard directory sends the
# file to the run directory.

M=tests/fixtures/model/llama
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
    chmod 755 "$W"
    P="$W/pairs" # a copy: the file is written next to the shards
    cp -r tests/fixtures/pairs "$P"
}
teardown() {
    chmod -R u+w "$W" 2>/dev/null || true
    rm -rf "$W"
}

key() { # KEY FILE: the values of "KEY" in the records of FILE
    grep -o "\"$1\":[^,}]*" "$2" | sed 's/.*://'
}
same() { # RUN_A RUN_B: the same losses and metrics, train and eval, bit for bit
    local n=0
    for k in loss grad_norm rewards/chosen rewards/margins rewards/accuracies logps/rejected \
        logits/chosen eval_loss eval_rewards/margins eval_logps/chosen; do
        diff <(key "$k" "$1/logging.jsonl") <(key "$k" "$2/logging.jsonl") || {
            echo "$k differs"
            return 1
        }
        n=$((n + $(key "$k" "$1/logging.jsonl" | wc -l)))
    done
    [ "$n" -gt 40 ]
}
mtime() {
    stat -c %y "$1"
}

ARGS=(--rlhf dpo --max-steps 6 --logging-steps 1 --eval-steps 3 --per-device-train-batch-size 2
    --learning-rate 1e-3)

@test "precomputed reference log-probs: the same records bit for bit (LoRA and full), no reference_forward span, one ref_logps span per split" {
    for tuner in lora full; do
        run "$T" --model $M --tuner $tuner "${ARGS[@]}" -j 1 -o "$W/a$tuner" $P
        [ "$status" -eq 0 ]
        rm -f "$P"/ref_logps-*.bin "$P"/val/ref_logps-*.bin
        run "$T" --model $M --tuner $tuner "${ARGS[@]}" -j 1 --precompute-ref-logps \
            --trace "$W/$tuner.jsonl" -o "$W/b$tuner" $P
        [ "$status" -eq 0 ]
        [[ $output == *"computing the reference log-probs of 64 pairs of $P (--precompute-ref-logps)"* ]]
        [[ $output == *"computing the reference log-probs of 16 pairs of $P/val"* ]]
        [[ $output == *"reference log-probs stored in $P/ref_logps-"*".bin"* ]]
        [ "$(ls "$P"/ref_logps-*.bin | wc -l)" -eq 1 ]
        [ "$(ls "$P"/val/ref_logps-*.bin | wc -l)" -eq 1 ]
        same "$W/a$tuner" "$W/b$tuner"
        grep -q '"precompute_ref_log_probs": true' "$W/b$tuner/args.json"
        grep -q '"precompute_ref_log_probs": false' "$W/a$tuner/args.json"
        ! grep -q '"name":"reference_forward"' "$W/$tuner.jsonl"
        [ "$(grep -c '"name":"ref_logps"' "$W/$tuner.jsonl")" -eq 2 ]
        [ "$(grep -c '"name":"forward"' "$W/$tuner.jsonl")" -eq 6 ]
    done
    # CPU: a table made with 2 pairs per batch and -j 1 serves 4 per batch and -j 2, bit for bit
    run "$T" --model $M "${ARGS[@]}" --per-device-train-batch-size 4 -j 2 -o "$W/d4" $P
    [ "$status" -eq 0 ]
    run "$T" --model $M "${ARGS[@]}" --per-device-train-batch-size 4 -j 2 --precompute-ref-logps \
        -o "$W/e4" $P
    [ "$status" -eq 0 ]
    [[ $output == *"reference log-probs from $P/ref_logps-"* ]]
    same "$W/d4" "$W/e4"
    # ms-swift's / TRL's spelling in a YAML file
    printf 'precompute_ref_log_probs: true\n' >"$W/c.yaml"
    run "$T" "$W/c.yaml" --model $M "${ARGS[@]}" -o "$W/c" $P
    [ "$status" -eq 0 ]
    [[ $output == *"reference log-probs from $P/ref_logps-"* ]]
    same "$W/alora" "$W/c"
}

@test "precomputed reference log-probs: a second run reuses the file (untouched), --resume too" {
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps --save-steps 3 -o "$W/a" $P
    [ "$status" -eq 0 ]
    f=$(ls "$P"/ref_logps-*.bin)
    t0=$(mtime "$f")
    sleep 0.05
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/b" $P
    [ "$status" -eq 0 ]
    [[ $output == *"reference log-probs from $f"* ]]
    [[ $output == *"reference log-probs from $P/val/ref_logps-"* ]]
    [[ $output != *"computing the reference"* ]]
    [ "$(mtime "$f")" = "$t0" ]
    same "$W/a" "$W/b"
    for tuner in lora full; do # resumed runs continue the run without the flag bit for bit
        args=(--model $M --tuner $tuner "${ARGS[@]}" --save-steps 3)
        run "$T" "${args[@]}" -o "$W/p$tuner" $P
        [ "$status" -eq 0 ]
        rm -f "$P"/ref_logps-*.bin "$P"/val/ref_logps-*.bin # full: computed from --model, not the checkpoint
        run "$T" "${args[@]}" --precompute-ref-logps -o "$W/r$tuner" \
            --resume "$W/p$tuner/checkpoint-3" $P
        [ "$status" -eq 0 ]
        [[ $output == *"computing the reference log-probs of 64 pairs"* ]]
        diff <(key loss "$W/p$tuner/logging.jsonl" | sed -n 4,6p) <(key loss "$W/r$tuner/logging.jsonl")
        diff <(key eval_loss "$W/p$tuner/logging.jsonl" | tail -1) <(key eval_loss "$W/r$tuner/logging.jsonl")
    done
}

@test "precomputed reference log-probs: a changed model or shard is another key, never the old file" {
    run "$T" --model $M "${ARGS[@]}" --max-steps 1 --precompute-ref-logps -o "$W/a" $P
    [ "$status" -eq 0 ]
    f=$(ls "$P"/ref_logps-*.bin)
    t0=$(mtime "$f")
    # the same weights with one byte changed (same size): a new mtime
    cp -r $M "$W/model"
    python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-3] ^= 0x40
open(p, 'wb').write(b)" "$W/model/model.safetensors"
    run "$T" --model "$W/model" "${ARGS[@]}" --max-steps 1 --precompute-ref-logps -o "$W/b" $P
    [ "$status" -eq 0 ]
    [[ $output == *"computing the reference log-probs of 64 pairs"* ]]
    [ "$(ls "$P"/ref_logps-*.bin | wc -l)" -eq 2 ]
    [ "$(mtime "$f")" = "$t0" ]
    # one token of the shards changed (crc32s of the shard header and index.json updated)
    rm "$P"/ref_logps-*.bin
    python3 -c "
import json, struct, sys, zlib
d = sys.argv[1]; p = d + '/shard-00000.bin'; b = bytearray(open(p, 'rb').read())
b[-8] ^= 1
c = zlib.crc32(bytes(b[64:])); b[48:52] = struct.pack('<I', c); open(p, 'wb').write(b)
ix = json.load(open(d + '/index.json')); ix['shards'][0]['crc32'] = c
json.dump(ix, open(d + '/index.json', 'w'), indent=1)" "$P"
    run "$T" --model $M "${ARGS[@]}" --max-steps 1 --precompute-ref-logps -o "$W/c" $P
    [ "$status" -eq 0 ]
    [[ $output == *"computing the reference log-probs of 64 pairs of $P "* ]]
    [[ $output == *"reference log-probs from $P/val/ref_logps-"* ]] # val did not change
    # a longer --max-length is another key too
    run "$T" --model $M "${ARGS[@]}" --max-steps 1 --max-length 40 --precompute-ref-logps \
        -o "$W/d" $P
    [ "$status" -eq 0 ]
    [[ $output == *"computing the reference log-probs of 64 pairs of $P "* ]]
}

@test "precomputed reference log-probs: a corrupt or truncated file is named with its offset and computed again" {
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/a" $P
    [ "$status" -eq 0 ]
    f=$(ls "$P"/ref_logps-*.bin)
    python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-20] ^= 1
open(p, 'wb').write(b)" "$f"
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/b" $P
    [ "$status" -eq 0 ]
    [[ $output == *"$f: offset "*": crc32 does not match the contents"* ]]
    [[ $output == *"$f: not used; computing the reference log-probs again"* ]]
    [[ $output == *"reference log-probs stored in $f"* ]]
    same "$W/a" "$W/b"
    truncate -s -9 "$f"
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/c" $P
    [ "$status" -eq 0 ]
    [[ $output == *"$f: offset "*" bytes, "*" expected for 128 rows"* ]]
    same "$W/a" "$W/c"
    printf 'not a table' >"$f"
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/d" $P
    [ "$status" -eq 0 ]
    [[ $output == *"$f: offset 0: not a reference log-prob file"* ]]
    run "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/e" $P
    [[ $output == *"reference log-probs from $f"* ]]
}

@test "precomputed reference log-probs: a read-only shard directory sends the file to the run directory" {
    as=()
    if [ "$(id -u)" -eq 0 ]; then # root writes into read-only directories: run as nobody
        command -v setpriv >/dev/null || skip "root and no setpriv"
        as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        chmod -R a+rX "$W"
        "${as[@]}" test -x "$T" || skip "the build is not readable by nobody"
    fi
    chmod -R a-w "$P"
    mkdir "$W/out" && chmod 777 "$W/out"
    run "${as[@]}" "$T" --model $M "${ARGS[@]}" --precompute-ref-logps -o "$W/out/a" $P
    [ "$status" -eq 0 ]
    [[ $output == *"$P is not writable (Permission denied): reference log-probs stored in $W/out/a/ref_logps-"* ]]
    ls "$W"/out/a/ref_logps-*.bin
    [ "$(ls "$W"/out/a/ref_logps-*.bin | wc -l)" -eq 2 ] # train and val
    ! ls "$P"/ref_logps-*.bin
    # resuming in that run directory finds it there
    run "${as[@]}" "$T" --model $M "${ARGS[@]}" --max-steps 8 --precompute-ref-logps \
        -o "$W/out/a" --resume latest $P
    [ "$status" -eq 0 ]
    [[ $output == *"reference log-probs from $W/out/a/ref_logps-"* ]]
}

@test "precomputed reference log-probs under mpirun: 2 ranks (ZeRO-0 computing, ZeRO-1 reusing) give 1 rank's records" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    args=(--model $M --rlhf dpo --max-steps 4 --logging-steps 1 --eval-steps 4 --learning-rate 5e-3
        --per-device-train-batch-size 1 -j 1)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" $P
    [ "$status" -eq 0 ]
    for pass in compute reuse; do # the second with ZeRO-1
        z=0
        [ $pass = compute ] || z=1
        run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
            "$T" "${args[@]}" --zero $z --precompute-ref-logps -o "$W/two$pass" $P </dev/null
        [ "$status" -eq 0 ]
        [ "$(ls "$P"/ref_logps-*.bin | wc -l)" -eq 1 ]
        for k in loss rewards/margins rewards/accuracies logps/chosen eval_loss eval_rewards/chosen; do
            paste <(key "$k" "$W/one/logging.jsonl") <(key "$k" "$W/two$pass/logging.jsonl") | awk -v k="$k" '
                { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > 1e-6 * (a + 1e-3)) bad = 1; c++ }
                END { if (bad || c < 4 && k !~ /eval/ || c == 0) { print k " differs"; exit 1 } }'
        done
    done
    [[ $output == *"reference log-probs from $P/ref_logps-"* ]]
}

@test "--precompute-ref-logps is ignored, with a warning, by the objectives without a reference" {
    run "$T" --model $M --rlhf orpo --max-steps 1 --per-device-train-batch-size 2 -j 1 \
        --precompute-ref-logps -o "$W/a" $P
    [ "$status" -eq 0 ]
    [[ $output == *"warning: --precompute-ref-logps: ignored; it is for --rlhf dpo (orpo, simpo, cpo and rm have no reference model;"* ]]
    ! ls "$P"/ref_logps-*.bin
}
