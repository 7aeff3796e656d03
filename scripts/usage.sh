#!/usr/bin/env bash
# header_usage: print the calling script's header comment (every line after the first up to the
# first line that is not a comment), without the leading "# ". Source this file; it does nothing
# by itself. check_data_bin and check_flags_once (below): the scripts' checks of their arguments.
header_usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

# check_data_bin SCRIPT DATA: stop (exit 2) in one line naming DATA unless it is the data-bin of a
# language pair, holding dict.SRC.txt and dict.TGT.txt (say, the data-bin/ folder above data-bin/de-en).
check_data_bin() {
    local path name count=0 inside=()
    for path in "$2"/dict.*.txt; do
        name=${path##*/dict.} name=${name%.txt}
        [[ -f $path && $name != *.* ]] && count=$((count + 1))  # dict.SRC.nodes.txt is a tree stream's
    done
    ((count < 2)) || return 0
    for path in "$2"/*/dict.*.txt; do
        [[ -f $path ]] && inside+=("$(dirname "$path")")
    done
    echo "$1: error: $2 is no data-bin of a language pair (it holds no dict.SRC.txt and dict.TGT.txt)$(
        ((${#inside[@]})) && echo "; give the one inside it, ${inside[0]}")" >&2
    exit 2
}

# check_flags_once SCRIPT FLAG...: stop (exit 2) in one line when a --flag (--flag VALUE or --flag=VALUE)
# is given twice among the flags a script passes on to fairseq, which would keep the last silently. One
# after the script's own defaults still replaces them: only the flags given here are compared.
check_flags_once() {
    local script=$1 arg name
    local -A given=()
    shift
    for arg in "$@"; do
        [[ $arg == --?* ]] || continue
        name=${arg%%=*}
        [[ -z ${given[$name]:-} ]] || { echo "$script: error: $name is given twice: give it once" >&2; exit 2; }
        given[$name]=1
    done
}
