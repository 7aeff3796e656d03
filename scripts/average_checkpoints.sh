#!/usr/bin/env bash
# Average the last N checkpoints of a training run into one (tree-fairseq-average-checkpoints).
#
#   scripts/average_checkpoints.sh [--updates] SAVE-DIR [N=5] [OUTPUT=SAVE-DIR/checkpoint_avg_lastN.pt]
#
# Without --updates: the last N epoch checkpoints (checkpointE.pt); with --updates: the last N
# update checkpoints (checkpoint_E_U.pt, written with --save-interval-updates, as the WMT configs do).
# Other options, and arguments after OUTPUT, are refused.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"

KIND=--num-epoch-checkpoints
case ${1:-} in
    -h|--help) header_usage; exit 0 ;;
    --updates) KIND=--num-update-checkpoints; shift ;;
esac
if (($# < 1)); then
    echo "usage: scripts/average_checkpoints.sh [--updates] SAVE-DIR [N] [OUTPUT] (see --help)" >&2
    exit 2
fi
# `SAVE-DIR 2 avg.pt --updates` averaged epoch checkpoints: what follows OUTPUT, and an option after the first
# argument, were ignored or taken as a path
for arg in "$@"; do
    if [[ $arg == --* ]]; then
        echo "average_checkpoints.sh: error: $arg: the one option is --updates, as the first argument" >&2
        exit 2
    fi
done
if (($# > 3)); then
    echo "average_checkpoints.sh: error: arguments after OUTPUT: ${*:4}" \
        "(it takes [--updates] SAVE-DIR [N] [OUTPUT])" >&2
    exit 2
fi
SAVE_DIR=$1
N=${2:-5}
OUTPUT=${3:-$SAVE_DIR/checkpoint_avg_last$N.pt}
exec "${PYTHON:-python3}" -m tree_fairseq.cli.average_checkpoints --inputs "$SAVE_DIR" "$KIND" "$N" --output "$OUTPUT"
