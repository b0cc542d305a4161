#!/usr/bin/env bats
# Every command follows the same conventions: --help (GNU layout, exit 0), --version,
# --list-options, usage errors exit 2 with a hint, a failed stdout write exits 1, ms-swift's
# underscore spellings, completions and man pages from the same option table.

setup() {
    cmds=()
    for b in "$SWIFT_BIN"/swift-*; do
        if [ -x "$b" ]; then cmds+=("$b"); fi
    done
}

@test "every command: --help, --version, --list-options" {
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    for c in "${cmds[@]}"; do
        run "$c" --help
        [ "$status" -eq 0 ]
        [[ ${lines[0]} == "Usage: $(basename "$c") "* ]]
        run "$c" --version
        [ "$status" -eq 0 ]
        [[ $output == "$(basename "$c") (swift-tools) "* ]]
        run "$c" --list-options
        [ "$status" -eq 0 ]
        [[ $output == *"--help"* ]]
    done
}

@test "every command: an unknown option is a usage error (exit 2)" {
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    for c in "${cmds[@]}"; do
        run "$c" --no-such-option
        [ "$status" -eq 2 ]
        [[ ${lines[0]} == "$(basename "$c"): unrecognized option '--no-such-option'" ]]
        [[ $output == *"Try '$(basename "$c") --help' for more information."* ]]
    done
}

@test "every command: a failed write to stdout exits 1 with a message" {
    [ -w /dev/full ] || skip "no /dev/full"
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    for c in "${cmds[@]}"; do
        run sh -c "'$c' --help >/dev/full"
        [ "$status" -eq 1 ]
        [[ $output == *"write error on standard output"* ]]
    done
}

@test "bash completion offers the command's options" {
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    source "$BATS_TEST_DIRNAME/../../completions/swift.bash"
    for c in "${cmds[@]}"; do
        COMP_WORDS=("$c" "--he")
        COMP_CWORD=1
        COMPREPLY=()
        _swift_tools
        [ "${COMPREPLY[*]}" = "--help" ]
    done
}

@test "man pages are generated from --help with EXAMPLES and EXIT STATUS" {
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    command -v help2man >/dev/null || skip "help2man not installed"
    out=$BATS_TEST_TMPDIR/man
    cd "$BATS_TEST_DIRNAME/../.."
    run sh scripts/man.sh "$SWIFT_BIN" "$out"
    [ "$status" -eq 0 ]
    for c in "${cmds[@]}"; do
        m=$out/$(basename "$c").1
        [ -s "$m" ]
        grep -q '^\.SH "EXIT STATUS"' "$m"
        grep -qF -- '\-\-help' "$m" # help2man writes \-\-help
    done
}

@test "make install puts binaries, man pages and completions under PREFIX" {
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    command -v help2man >/dev/null || skip "help2man not installed"
    dest=$BATS_TEST_TMPDIR/root
    run make -s -C "$BATS_TEST_DIRNAME/../.." install O="$SWIFT_BUILD" PREFIX=/usr/local \
        DESTDIR="$dest"
    [ "$status" -eq 0 ]
    for c in "${cmds[@]}"; do
        n=$(basename "$c")
        [ -x "$dest/usr/local/bin/$n" ]
        [ -s "$dest/usr/local/share/man/man1/$n.1" ]
        [ -s "$dest/usr/local/share/bash-completion/completions/$n" ]
    done
    [ -s "$dest/usr/local/share/zsh/site-functions/_swift" ]
}

@test "every command: OpenMP threads wait passively unless the user chose (one re-exec before libgomp starts)" {
    [ ${#cmds[@]} -gt 0 ] || skip "no commands built yet"
    for c in "${cmds[@]}"; do
        # libgomp prints its settings when it starts: once, already passive (spin count 0)
        run env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u SWIFT_OMP_DEFAULT OMP_DISPLAY_ENV=verbose "$c" --version
        [ "$status" -eq 0 ]
        [ "$(grep -c "GOMP_SPINCOUNT = " <<<"$output")" -eq 1 ]
        [[ $output == *"GOMP_SPINCOUNT = '0'"* ]]
        [[ $output == *"$(basename "$c") (swift-tools) "* ]]
        # the user's choice stands
        run env -u SWIFT_OMP_DEFAULT OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$c" --version
        [ "$(grep -c "GOMP_SPINCOUNT = " <<<"$output")" -eq 1 ]
        [[ $output == *"OMP_WAIT_POLICY = 'ACTIVE'"* ]]
        run env -u OMP_WAIT_POLICY -u SWIFT_OMP_DEFAULT GOMP_SPINCOUNT=1000 OMP_DISPLAY_ENV=verbose "$c" --version
        [[ $output == *"GOMP_SPINCOUNT = '1000'"* ]]
    done
}
