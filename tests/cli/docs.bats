#!/usr/bin/env bats
# The documentation cannot drift from the programs: every swift-* command line in the README,
# docs/, pipelines/ and each --help's examples uses only options the program accepts
# (tests/cli/docs.py), and the README's two commands are the Makefile's.

@test "documented command lines use only real options" {
    cd "$BATS_TEST_DIRNAME/../.."
    run python3 tests/cli/docs.py "$SWIFT_BIN" README.md docs/*.md pipelines/*.sh pipelines/*.mk
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "a documented option that does not exist is caught" {
    printf '```sh\nswift-train --model m --no-such-flag shards\n```\n' >"$BATS_TEST_TMPDIR/bad.md"
    run python3 "$BATS_TEST_DIRNAME/docs.py" "$SWIFT_BIN" "$BATS_TEST_TMPDIR/bad.md"
    [ "$status" -eq 1 ]
    [[ $output == *"bad.md:2: swift-train has no option --no-such-flag"* ]]
}

@test "README's two commands exist as make targets" {
    cd "$BATS_TEST_DIRNAME/../.."
    grep -q '^make demo ' README.md
    grep -q '^make test ' README.md
    make -n demo >/dev/null
    make -n test >/dev/null
}
