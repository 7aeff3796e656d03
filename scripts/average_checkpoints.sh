#!/usr/bin/env bash
# Average the last N checkpoints of a training run into one (tree-fairseq-average-checkpoints).
#
#   scripts/average_checkpoints.sh [--updates] SAVE-DIR [N=5] [OUTPUT=SAVE-DIR/checkpoint_avg_lastN.pt]
#
# Without --updates: the last N epoch checkpoints (checkpointE.pt); with --updates: the last N
# update checkpoints (checkpoint_E_U.pt, written with --save-interval-updates, as the WMT configs do).
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
SAVE_DIR=$1
N=${2:-5}
OUTPUT=${3:-$SAVE_DIR/checkpoint_avg_last$N.pt}
exec "${PYTHON:-python3}" -m tree_fairseq.cli.average_checkpoints --inputs "$SAVE_DIR" "$KIND" "$N" --output "$OUTPUT"
