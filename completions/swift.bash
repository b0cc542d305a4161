# bash completion for swift-tools commands: options, ms-swift's spellings (aliases, and '_' for
# '-' once the word has one), and the values of options that take one of a few words (--tuner,
# --template, --dtype, --task, --format/-f, --device, ...). The installed file
# (build/completions/swift.bash, made from this one by scripts/completions.sh) starts with each
# command's lists, generated from its option table at build time, so the commands need not be on
# PATH; this file alone asks the commands (--list-options, --list-values).
typeset -gA _swift_tools_opts _swift_tools_vals 2>/dev/null

# CMD: its options, one a line ("--name=" when it takes a value); CMD as typed (a path works)
_swift_tools_list()
{
    local name=${1##*/}
    if [[ -n ${_swift_tools_opts[$name]+x} ]]; then
        printf '%s\n' ${_swift_tools_opts[$name]}
    else
        "$1" --list-options 2>/dev/null
    fi
}

# CMD OPTION: the words OPTION's value may be (none: a path or free text)
_swift_tools_values()
{
    local name=${1##*/} opt=$2
    [[ $opt == --* ]] && opt=${opt//_/-}
    if [[ -n ${_swift_tools_opts[$name]+x} ]]; then
        printf '%s\n' ${_swift_tools_vals[$name:$opt]-}
    else
        local o v
        "$1" --list-values 2>/dev/null | while read -r o v; do
            [[ $o == "$opt" ]] && printf '%s\n' $v
        done
    fi
}

_swift_tools()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev='' opt='' val=''
    local cmd=${COMP_WORDS[0]}
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # an option's value: "--opt VALUE", or "--opt=VALUE" (one word, or split at '=' by bash)
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*} val=${cur#*=}
    elif [[ $cur == = && $prev == -* ]]; then
        opt=$prev
    elif [[ $prev == = ]] && ((COMP_CWORD > 1)) && [[ ${COMP_WORDS[COMP_CWORD - 2]} == -* ]]; then
        opt=${COMP_WORDS[COMP_CWORD - 2]} val=$cur
    elif [[ $prev == -* && $cur != -* ]]; then
        opt=$prev val=$cur
    fi
    if [[ -n $opt ]]; then
        local values
        values=$(_swift_tools_values "$cmd" "$opt")
        if [[ -n $values ]]; then
            # shellcheck disable=SC2207
            COMPREPLY=($(compgen -W "$values" -- "$val"))
            [[ $cur == --*=* ]] && COMPREPLY=("${COMPREPLY[@]/#/$opt=}")
            return 0
        fi
    fi
    if [[ $cur == -* ]]; then
        local opts
        opts=$(_swift_tools_list "$cmd")
        # ms-swift's spelling: --max_le completes to --max_length=
        [[ $cur == *_* ]] && opts=$(sed 's/-/_/g; s/^__/--/' <<<"$opts")
        # shellcheck disable=SC2207
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${COMPREPLY[0]-} == *= ]] && compopt -o nospace 2>/dev/null
        return 0
    fi
    # shellcheck disable=SC2207
    COMPREPLY=($(compgen -f -- "${val:-$cur}"))
}
complete -o filenames -F _swift_tools swift-download swift-preprocess swift-train swift-eval \
    swift-export swift-infer swift-trace-analyze
