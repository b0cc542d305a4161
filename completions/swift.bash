# bash completion for swift-tools commands. Options come from each command's hidden
# --list-options, so completions never drift from the option table.
_swift_tools()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion -s || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
    fi
    local cmd=${COMP_WORDS[0]}
    if [[ $cur == -* ]]; then
        local opts
        opts=$("$cmd" --list-options 2>/dev/null)
        # shellcheck disable=SC2207
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${COMPREPLY[0]-} == *= ]] && compopt -o nospace 2>/dev/null
        return 0
    fi
    # shellcheck disable=SC2207
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _swift_tools swift-download swift-preprocess swift-train swift-eval \
    swift-export swift-trace-analyze
