#!/usr/bin/env bash
# header_usage: print the calling script's header comment (every line after the first up to the
# first line that is not a comment), without the leading "# ". Source this file; it does nothing
# by itself.
header_usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}
