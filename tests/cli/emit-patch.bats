#!/usr/bin/env bats
# swift-trace-analyze --emit-patch: a remedy as a unified diff that patch -p0 applies, of the
# run's config file (recorded in swift_meta.config with its sha256) or of command.sh (the
# command line). Real runs of swift-train on the fixture model; no shared data needed.

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    W="$BATS_TEST_TMPDIR"
    R="$PWD"
    export OMP_NUM_THREADS=1
}

# A YAML config in ms-swift spelling with a comment, an option set and keys around it.
write_yaml() {
    cat >"$W/sft.yaml" <<EOF
# fine-tune the fixture model
model: $R/tests/fixtures/model/llama
max_steps: 30   # short run
dataloader_num_workers: 1  # loader threads
save_steps: 100
eval_steps: 100
EOF
}

# A slow data loader (--data-delay-ms): data_stall fires on every run.
train_cfg() { # train_cfg CONFIG TRACE [more flags]: run from $W, the config as given
    local cfg=$1 tr=$2
    shift 2
    (cd "$W" && "$SWIFT_BIN/swift-train" "$cfg" "$R/tests/fixtures/shards" -o "run-${tr%.jsonl}" \
        --trace "$tr" -j 1 --data-delay-ms 20 "$@" >/dev/null 2>&1)
}

@test "a config run records its file in swift_meta (path, resolved, sha256, parsed argv) and every given word" {
    write_yaml
    train_cfg sft.yaml t.jsonl
    m='select(.name == "swift_meta") | .args'
    [ "$(jq -r "$m | .config.path" "$W/t.jsonl")" = sft.yaml ]
    [ "$(jq -r "$m | .config.resolved" "$W/t.jsonl")" = "$(realpath "$W/sft.yaml")" ]
    [ "$(jq -r "$m | .config.sha256" "$W/t.jsonl")" = "$(sha256sum <"$W/sft.yaml" | cut -c1-64)" ]
    [ "$(jq -r "$m | .config.argv | index(\"--num-workers\") != null" "$W/t.jsonl")" = true ]
    # the given command line keeps every word (the positional argument before the options
    # used to overwrite the last one: --data-delay-ms's value)
    [ "$(jq -r "$m | .argv[1:] | join(\" \")" "$W/t.jsonl")" = "sft.yaml -o run-t --trace t.jsonl -j 1 --data-delay-ms 20 $R/tests/fixtures/shards" ]
    # a run without a config file has no config object
    "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/plain" --max-steps 2 \
        --trace "$W/p.jsonl" tests/fixtures/shards >/dev/null 2>&1
    [ "$(jq -r "$m | .config" "$W/p.jsonl")" = null ]
}

@test "--emit-patch of a YAML config run: patch -p0 changes exactly the remedy's keys, comments and order kept; the patched config parses" {
    write_yaml
    train_cfg sft.yaml t.jsonl
    # the text report shows the patch under the card; the JSON report carries it
    run "$A" "$W/t.jsonl"
    [[ "$output" == *"patch of sft.yaml (--emit-patch | patch -p0):"*"     -dataloader_num_workers: 1"*"     +dataloader_num_workers: 2"* ]]
    run "$A" -f md "$W/t.jsonl"
    [[ "$output" == *'patch of sft.yaml (`--emit-patch | patch -p0`):'*'   ```diff'*'   --- sft.yaml'*'   +dataloader_prefetch_factor: 4'*'   ```'* ]]
    run "$A" -f json "$W/t.jsonl"
    [ "$(jq -c '.bottlenecks[] | select(.rule == "data_stall") | .patch.changes' <<<"$output")" = '{"num-workers":"2","prefetch":"4"}' ]
    # the command of a config run stays a run of the file, its changes on top, new outputs
    [ "$(jq -r '.bottlenecks[] | select(.rule == "data_stall") | .command' <<<"$output" | cut -d' ' -f2-)" = \
        "sft.yaml -o run-t-2 --trace t-2.jsonl -j 1 --data-delay-ms 20 $R/tests/fixtures/shards --num-workers 2 --prefetch 4" ]
    cp "$W/sft.yaml" "$W/orig.yaml"
    run "$A" --emit-patch "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "--- sft.yaml" ]
    [ "${lines[1]}" = "+++ sft.yaml" ]
    (cd "$W" && "$A" --emit-patch t.jsonl >p.diff && patch -p0 <p.diff)
    # the existing key in place (ms-swift spelling kept), the new one at the end in that spelling
    run diff "$W/orig.yaml" "$W/sft.yaml"
    [ "$status" -eq 1 ]
    [ "$output" = "$(printf '4c4\n< dataloader_num_workers: 1  # loader threads\n---\n> dataloader_num_workers: 2  # loader threads\n6a7\n> dataloader_prefetch_factor: 4')" ]
    # the patched file parses, and a run from it has the new values
    run "$SWIFT_BIN/swift-train" "$W/sft.yaml" --help
    [ "$status" -eq 0 ]
    (cd "$W" && "$SWIFT_BIN/swift-train" sft.yaml "$R/tests/fixtures/shards" -o run-2 --max-steps 2 \
        --trace t2.jsonl -j 1 >/dev/null 2>&1)
    v='select(.name == "swift_meta") | .args.config.argv | [.[index("--num-workers") + 1], .[index("--prefetch") + 1]] | join(" ")'
    [ "$(jq -r "$v" "$W/t2.jsonl")" = "2 4" ]
    # the trace is of the file before: its patch is now refused
    run "$A" --emit-patch "$W/t.jsonl"
    [ "$status" -eq 1 ]
}

@test "--emit-patch of a JSON config with our dashed keys: a new key before the brace, in that spelling" {
    cat >"$W/c.json" <<EOF
{
  "model": "$R/tests/fixtures/model/llama",
  "max-steps": 30,
  "save-steps": 100,
  "eval-steps": 100
}
EOF
    train_cfg c.json t.jsonl
    cp "$W/c.json" "$W/orig.json"
    (cd "$W" && "$A" --emit-patch t.jsonl >p.diff && patch -p0 <p.diff)
    [ "$(jq -c 'del(.model)' "$W/c.json")" = '{"max-steps":30,"save-steps":100,"eval-steps":100,"num-workers":4,"prefetch":8}' ]
    run "$SWIFT_BIN/swift-train" "$W/c.json" --help
    [ "$status" -eq 0 ]
}

@test "--emit-patch refuses a config file changed since the run, naming it" {
    write_yaml
    train_cfg sft.yaml t.jsonl
    echo "learning_rate: 0.001" >>"$W/sft.yaml"
    run "$A" --emit-patch "$W/t.jsonl"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-trace-analyze: data_stall: $W/sft.yaml has changed since the run (sha256 "*"the run read "*"): no patch against it; edit it by hand or re-run" ]]
    [ -z "$(grep -v '^swift-trace-analyze' <<<"$output")" ]
    # the report says so under the card and still gives the command
    run "$A" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"   patch: $W/sft.yaml has changed since the run"* ]]
    # -o: nothing written
    run "$A" --emit-patch -o "$W/out.diff" "$W/t.jsonl"
    [ "$status" -eq 1 ]
    [ ! -e "$W/out.diff" ]
}

@test "--emit-patch without a config file: a diff of command.sh (the traced command line) that patch -p0 applies" {
    "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run-c" --max-steps 30 \
        --save-steps 100 --eval-steps 100 -j 1 --data-delay-ms 20 --trace "$W/c.jsonl" \
        tests/fixtures/shards >/dev/null 2>&1
    run "$A" -f json "$W/c.jsonl"
    cmd=$(jq -r '.bottlenecks[] | select(.rule == "data_stall") | .command' <<<"$output")
    jq -r 'select(.name == "swift_meta") | .args.argv | join(" ")' "$W/c.jsonl" >"$W/command.sh"
    (cd "$W" && "$A" --emit-patch c.jsonl >p.diff && patch -p0 <p.diff)
    [ "$(cat "$W/command.sh")" = "$cmd" ]
    [[ "$cmd" == *" --num-workers 4 --prefetch 8" && "$cmd" == *" -o $W/run-c-2 "* ]]
    head -2 "$W/p.diff" | diff - <(printf -- '--- command.sh\n+++ command.sh\n')
}

@test "--emit-patch: several bottlenecks, none to patch, bad values" {
    write_yaml
    train_cfg sft.yaml t.jsonl
    # =all: each bottleneck with a change, in rank order, a '# N. rule' line before each
    run "$A" --emit-patch=all "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "# 1. data_stall (critical) — swift-train"* ]]
    [ "$("$A" --emit-patch=top "$W/t.jsonl")" = "$("$A" --emit-patch "$W/t.jsonl")" ]
    run "$A" --emit-patch=some "$W/t.jsonl"
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-trace-analyze: --emit-patch: expected top or all, got 'some'" ]
    # a healthy run: nothing to patch is an error, said
    "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/ok" --max-steps 4 \
        --save-steps 100 --eval-steps 100 -j 1 --trace "$W/ok.jsonl" tests/fixtures/shards >/dev/null 2>&1
    run "$A" --threshold data_stall=100 --threshold ckpt_stall=100 --emit-patch "$W/ok.jsonl"
    [ "$status" -eq 1 ]
    [ "${lines[-1]}" = "swift-trace-analyze: no bottleneck with a concrete change to patch (see the report's remedies)" ]
}

@test "--emit-patch: a YAML file without a final newline, a one-line JSON config refused with the reason" {
    write_yaml
    printf '%s' "$(cat "$W/sft.yaml")" >"$W/n.yaml"
    train_cfg n.yaml t.jsonl
    (cd "$W" && "$A" --emit-patch t.jsonl >p.diff && patch -p0 <p.diff)
    [ "$(tail -n 2 "$W/n.yaml")" = "$(printf 'eval_steps: 100\ndataloader_prefetch_factor: 4')" ]
    run "$SWIFT_BIN/swift-train" "$W/n.yaml" --help
    [ "$status" -eq 0 ]
    printf '{"model": "%s", "max_steps": 30, "save_steps": 100, "eval_steps": 100}\n' \
        "$R/tests/fixtures/model/llama" >"$W/one.json"
    train_cfg one.json o.jsonl
    run "$A" --emit-patch "$W/o.jsonl"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "swift-trace-analyze: data_stall: one.json: not one key per line; set num-workers by hand" ]
}

# A real trace with every 4th optimizer span made $3 µs longer (its step too, later events
# shifted), as in trace-analyze.bats: the oversubscription rule fires deterministically.
stretch_optimizer() { # stretch_optimizer IN OUT DELTA_US
    jq -c -s --argjson D "$3" '
        ([.[] | select(.ph == "X" and .name == "optimizer") | .ts] | sort
            | to_entries | map(select(.key % 4 == 0) | .value)) as $S
        | .[]
        | if .ph == "M" then . else
            .ts as $t | (.dur // 0) as $d
            | .ts = $t + $D * ([$S[] | select(. < $t)] | length)
            | if .ph == "X" and .name == "optimizer" and ($S | index($t)) != null then .dur += $D
              elif .ph == "X" and .name == "step" and ([$S[] | select(. >= $t and . < $t + $d)] | length) > 0 then .dur += $D
              else . end
          end' "$1" >"$2"
}

@test "--emit-patch of a config run whose remedy needs the environment (oversubscription): command.sh, the config kept" {
    cat >"$W/sft.yaml" <<EOF
model: $R/tests/fixtures/model/llama
max_steps: 30
save_steps: 100
eval_steps: 100
EOF
    (cd "$W" && OMP_WAIT_POLICY=active OMP_NUM_THREADS=2 "$SWIFT_BIN/swift-train" sft.yaml \
        "$R/tests/fixtures/shards" -o run-a -j 2 --trace a.jsonl >/dev/null 2>&1)
    stretch_optimizer "$W/a.jsonl" "$W/s.jsonl" 2000000
    run "$A" -f json "$W/s.jsonl"
    b='.bottlenecks[] | select(.rule == "oversubscription")'
    [ "$(jq -r "$b | .patch.file" <<<"$output")" = command.sh ]
    cmd=$(jq -r "$b | .command" <<<"$output")
    [ "$(cut -d' ' -f1,3- <<<"$cmd")" = "OMP_WAIT_POLICY=passive sft.yaml -o run-a-2 --trace a-2.jsonl $R/tests/fixtures/shards --threads 1" ]
    # command.sh holds the traced command line; the top patch is this one
    jq -r 'select(.name == "swift_meta") | .args.argv | join(" ")' "$W/a.jsonl" >"$W/command.sh"
    cp "$W/sft.yaml" "$W/orig.yaml"
    (cd "$W" && "$A" --emit-patch s.jsonl >p.diff && patch -p0 <p.diff)
    [ "$(cat "$W/command.sh")" = "$cmd" ]
    cmp "$W/sft.yaml" "$W/orig.yaml"
}
