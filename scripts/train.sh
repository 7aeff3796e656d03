#!/usr/bin/env bash
# Train with a config of configs/ on a data-bin; the log goes to SAVE-DIR/train.log. One run at a
# time on a SAVE-DIR: a second is refused while the first holds SAVE-DIR/train.lock.
#
#   scripts/train.sh [--hydra] CONFIG DATA-BIN SAVE-DIR [GROUP.KEY=VALUE ...] [--fairseq-flag ...]
#
# CONFIG is a name in configs/ (iwslt_tree_transformer) or a YAML file. By default the config is
# turned into fairseq-train flags (tree-fairseq-config-args) and fairseq-train runs; with --hydra,
# fairseq-hydra-train reads the YAML itself. GROUP.KEY=VALUE overrides a config value in both
# modes (optimization.max_update=1000, model.dropout=0.2); with --hydra, hydra refuses a key that
# the YAML's model, task, criterion, ... do not set: write it ++GROUP.KEY=VALUE (hydra's
# add-or-override; +GROUP.KEY=VALUE adds a key the YAML lacks). Every override, in both modes, is
# checked as a key fairseq knows; a key or a --flag given twice is refused (fairseq and hydra would keep
# the last). Further --flags go to fairseq-train (not with --hydra). DATA-BIN,
# SAVE-DIR and the plugin are the script's to give: checkpoint.save_dir, --save-dir, task.data,
# common.user_dir and --user-dir are refused (they would win, and train past every check). An
# interrupted run continues from SAVE-DIR/checkpoint_last.pt, as fairseq does,
# and stops where it would have stopped uninterrupted: fairseq restarts its early-stop count
# (checkpoint.patience) on a resume, so train.sh counts the validations of SAVE-DIR/train.log
# instead and trains at most to the epoch that count allows, then counts again (not with --hydra).
# Before a resume, a checkpoint_last.pt that cannot be read (cut short by a kill or a full disk),
# is of another model, or is mid-epoch while the command builds other batches (another
# --max-tokens, --seed, ...: fairseq would skip or repeat sentences of that epoch), and a train.log
# of another run (another data-bin, task, architecture or language pair on its last "$ " command
# line), and a data-bin whose token dictionaries differ from those the run started with (recorded in
# SAVE-DIR/dictionaries.json; a SAVE-DIR without it gets it at the resume), are refused in one line
# that says what to do (tree_fairseq/cli/resume_check.py, tree_fairseq/cli/dictionary_record.py).
#
#   scripts/train.sh iwslt_tree_transformer iwslt14.de-en/data-bin/de-en checkpoints/tree-de-en
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}

source "$ROOT/scripts/usage.sh"
usage() { header_usage; }

HYDRA=""
if [[ ${1:-} == -h || ${1:-} == --help ]]; then usage; exit 0; fi
if [[ ${1:-} == --hydra ]]; then HYDRA=yes; shift; fi
if (($# < 3)); then usage >&2; exit 2; fi
CONFIG=$1 DATA=$2 SAVE_DIR=$3
shift 3
[[ $CONFIG == *.yaml ]] || CONFIG=$ROOT/configs/$CONFIG.yaml
[[ -f $CONFIG ]] || { echo "train.sh: error: no config $CONFIG (see configs/)" >&2; exit 2; }
[[ -d $DATA ]] || { echo "train.sh: error: no data-bin $DATA" >&2; exit 2; }
check_data_bin train.sh "$DATA"

OVERRIDES=() FLAGS=()
for arg in "$@"; do
    # GROUP.KEY=VALUE: a key part may hold digits after its first character (common.fp16, common.bf16)
    if [[ $arg =~ ^\+{0,2}[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_.]*= ]]; then
        OVERRIDES+=("$arg")
    else
        FLAGS+=("$arg")
    fi
done
# DATA-BIN, SAVE-DIR and the plugin are given by the script, and every check, the log and the patience
# count are of them: a later override (or flag) would win in fairseq and train elsewhere, unchecked.
for arg in "${OVERRIDES[@]}" "${FLAGS[@]}"; do
    key=${arg#++} key=${key#+} why=""
    case $key in
        checkpoint.save_dir=*|--save-dir|--save-dir=*) why="the save dir is SAVE-DIR, the third argument" ;;
        task.data=*) why="the data-bin is DATA-BIN, the second argument" ;;
        common.user_dir=*|--user-dir|--user-dir=*) why="train.sh loads the plugin of $ROOT/tree_fairseq" ;;
    esac
    [[ -z $why ]] || { echo "train.sh: error: $arg: $why, not an override" >&2; exit 2; }
done
# A fairseq-train flag given twice: fairseq keeps the last silently (--seed 1 ... --seed 2 trained seed 2).
# (A flag after the config's is how a flag replaces the config's value; an override given twice is refused
# by the config's reading.)
check_flags_once train.sh "${FLAGS[@]}"
USER_DIR=$ROOT/tree_fairseq
mkdir -p "$SAVE_DIR"
LOG=$SAVE_DIR/train.log
# One run at a time on SAVE-DIR: two would write the same checkpoints and interleave train.log. The
# lock is on a file opened for the script's life (and its programs'), so the kernel releases it
# however the run ends, a kill included.
exec {LOCK_FD}>>"$SAVE_DIR/train.lock"
flock -n "$LOCK_FD" || {
    echo "train.sh: error: SAVE-DIR $SAVE_DIR is being trained by another run (it holds $SAVE_DIR/train.lock):" \
        "wait for it to end, or give another SAVE-DIR" >&2
    exit 2
}

if [[ -n $HYDRA ]]; then
    ((${#FLAGS[@]} == 0)) || { echo "train.sh: error: with --hydra give GROUP.KEY=VALUE, not ${FLAGS[*]}" >&2; exit 2; }
    # fairseq-hydra-train drops a key it does not know: refuse it, as fairseq-train's flags do.
    "$PYTHON" -m tree_fairseq.cli.config_args --check "$CONFIG" "${OVERRIDES[@]}" || exit 2
    command=(fairseq-hydra-train --config-dir "$(dirname "$CONFIG")" --config-name "$(basename "$CONFIG" .yaml)"
        "task.data=$DATA" "checkpoint.save_dir=$SAVE_DIR" "common.user_dir=$USER_DIR" "${OVERRIDES[@]}")
else
    mapfile -d '' CONFIG_FLAGS < <("$PYTHON" -m tree_fairseq.cli.config_args --null "$CONFIG" \
        "task.data=$DATA" "checkpoint.save_dir=$SAVE_DIR" "common.user_dir=$USER_DIR" "${OVERRIDES[@]}")
    ((${#CONFIG_FLAGS[@]})) || exit 1
    command=(fairseq-train "${CONFIG_FLAGS[@]}" "${FLAGS[@]}")
fi
if [[ -f $SAVE_DIR/checkpoint_last.pt ]]; then
    # A resume: refuse what fairseq-train would die on, or silently take for this run.
    train_command=("${command[@]}")
    if [[ -n $HYDRA ]]; then  # the same config as fairseq-train flags, for the model it trains
        mapfile -d '' CONFIG_FLAGS < <("$PYTHON" -m tree_fairseq.cli.config_args --null "$CONFIG" \
            "task.data=$DATA" "checkpoint.save_dir=$SAVE_DIR" "common.user_dir=$USER_DIR" "${OVERRIDES[@]}")
        train_command=(fairseq-train "${CONFIG_FLAGS[@]}")
    fi
    "$PYTHON" "$ROOT/tree_fairseq/cli/resume_check.py" "$SAVE_DIR" "${train_command[@]}" || exit 2
    # the token dictionaries the run trained with (SAVE-DIR/dictionaries.json; recorded now where missing)
    "$PYTHON" "$ROOT/tree_fairseq/cli/dictionary_record.py" resume "$SAVE_DIR" "$DATA" || exit 2
else
    "$PYTHON" "$ROOT/tree_fairseq/cli/dictionary_record.py" start "$SAVE_DIR" "$DATA" || exit 2
fi
if [[ -z $HYDRA && -f $SAVE_DIR/checkpoint_last.pt ]]; then
    # A resume: fairseq would count its patience from scratch; count over the whole log instead
    # (tree_fairseq/cli/patience.py), training at most to the epoch where an uninterrupted run
    # stops, then counting again.
    trained_to=()
    while :; do
        bound=$("$PYTHON" "$ROOT/tree_fairseq/cli/patience.py" "${trained_to[@]}" "$LOG" "${command[@]}")
        [[ -n $bound ]] || break  # nothing to count: train as fairseq does
        ((bound > 0)) || exit 0   # done (the reason is on stderr)
        printf '$ %s\n' "${command[*]} --max-epoch $bound" | tee -a "$LOG"
        "${command[@]}" --max-epoch "$bound" 2>&1 | tee -a "$LOG"
        trained_to=(--trained-to "$bound")  # a log short of it: fairseq stopped for its own reason
    done
fi
printf '$ %s\n' "${command[*]}" | tee -a "$LOG"
"${command[@]}" 2>&1 | tee -a "$LOG"
