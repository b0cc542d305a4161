#!/usr/bin/env bats
# Completions: the installed files (build/completions/, generated from each command's option table
# at build time by scripts/completions.sh) complete options, ms-swift's spellings and the values of
# options that take one of a few words, with no command on PATH.

setup() {
    GEN=$SWIFT_BUILD/completions/swift.bash
    [ -f "$GEN" ] || { echo "no $GEN: make all generates it"; false; }
}

# complete WORDS... with the generated file and no swift-* on PATH: the replies, one line
complete_words() {
    env -i PATH=/usr/bin:/bin bash -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
        _swift_tools; echo "${COMPREPLY[*]}"' bash "$GEN" "$@"
}

@test "flag values complete from the option tables, commands not on PATH" {
    ! env -i PATH=/usr/bin:/bin bash -c 'command -v swift-train' # really not on PATH
    [ "$(complete_words swift-train --tuner '')" = "full lora" ]
    [ "$(complete_words swift-train --tuner l)" = "lora" ]
    [ "$(complete_words swift-train --tuner=f)" = "--tuner=full" ]
    [ "$(complete_words swift-train --tuner = f)" = "full" ]
    [ "$(complete_words swift-train --lr-scheduler-type '')" = "cosine linear constant" ]
    [ "$(complete_words swift-train --device '')" = "auto cpu cuda" ]
    [ "$(complete_words swift-preprocess --template qwen)" = "qwen qwen2_5 qwen3 qwen2_vl qwen2_5_vl" ]
    [ "$(complete_words swift-preprocess --truncation '')" = "delete left right split" ]
    [ "$(complete_words swift-eval --task '')" = "loss ppl mc mmlu gsm8k exact pref toolcall" ]
    [ "$(complete_words swift-eval --template n)" = "none" ]
    [ "$(complete_words swift-export --dtype q4)" = "q4_0 q4_k q4_k_m" ]
    [ "$(complete_words swift-infer --template qwen)" = "qwen qwen2_5 qwen3 qwen2_vl qwen2_5_vl" ]
    [ "$(complete_words swift-infer --max-num)" = "--max-num-seqs= --max-num-batched-tokens=" ]
    [ "$(complete_words swift-trace-analyze -f '')" = "text md markdown json html" ]
    [ "$(complete_words swift-trace-analyze --format h)" = "html" ]
    # a path-valued option completes files
    mkdir -p "$BATS_TEST_TMPDIR/runs-x"
    [ "$(complete_words swift-train --model "$BATS_TEST_TMPDIR/runs-")" = "$BATS_TEST_TMPDIR/runs-x" ]
}

@test "ms-swift's spellings: aliases with their values, '_' for '-'" {
    [ "$(complete_words swift-train --train_type '')" = "full lora" ]
    [ "$(complete_words swift-preprocess --truncation_strategy r)" = "right" ]
    [ "$(complete_words swift-export --quant_method '')" = "rtn gptq" ]
    [ "$(complete_words swift-train --max_le)" = "--max_length=" ]
    [[ " $(complete_words swift-train --tun) " == *" --tuner_type= "* ]]
    [[ " $(complete_words swift-train --tun) " == *" --tuner= "* ]]
}

@test "the generated lists are each command's --help and --list-options" {
    for b in "$SWIFT_BIN"/swift-*; do
        c=$(basename "$b")
        opts=" $(complete_words "$c" --) "
        [ "$(wc -w <<<"$opts")" -gt 5 ]
        for o in $("$b" --list-options); do
            [[ $opts == *" $o "* ]] || { echo "$c: $o not completed"; false; }
        done
        for o in $("$b" --help | sed -n 's/^ *\(-., \)\{0,1\}\(--[a-z][a-z0-9-]*\).*/\2/p'); do
            [[ $opts == *" $o "* || $opts == *" $o= "* ]] || { echo "$c: $o of --help not completed"; false; }
        done
    done
}

@test "the source file alone asks the commands on PATH; the zsh file parses" {
    src=$BATS_TEST_DIRNAME/../../completions/swift.bash
    out=$(env -i PATH="$SWIFT_BIN:/usr/bin:/bin" bash -c '
        source "$1"; COMP_WORDS=(swift-eval --task m); COMP_CWORD=2; _swift_tools
        echo "${COMPREPLY[*]}"' bash "$src")
    [ "$out" = "mc mmlu" ]
    if command -v zsh >/dev/null; then
        zsh -n "$SWIFT_BUILD/completions/_swift"
        zsh -n "$BATS_TEST_DIRNAME/../../completions/_swift"
        # the specs handed to _arguments, commands not on PATH
        specs=$(env -i PATH=/usr/bin:/bin zsh -c 'words=(swift-train --tuner ""); _arguments() {
            print -l -- "$@"; }; source "$1"' zsh "$SWIFT_BUILD/completions/_swift")
        grep -qx -- '--tuner=\[option\]:value:(full lora)' <<<"$specs"
        grep -qx -- '--tuner_type=\[option\]:value:(full lora)' <<<"$specs"
        grep -qx -- '--model=\[option\]:value:_files' <<<"$specs"
        specs=$(env -i PATH=/usr/bin:/bin zsh -c 'words=(swift-trace-analyze -f ""); _arguments() {
            print -l -- "$@"; }; source "$1"' zsh "$SWIFT_BUILD/completions/_swift")
        grep -qx -- '-f\[option\]:value:(text md markdown json html)' <<<"$specs"
    fi
    grep -q '^#compdef swift-download' "$SWIFT_BUILD/completions/_swift"
    grep -q "_swift_tools_vals\[swift-train:--tuner\]='full lora'" "$SWIFT_BUILD/completions/_swift"
}
