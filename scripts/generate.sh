#!/usr/bin/env bash
# Translate (or summarise) a split of a data-bin with a checkpoint and score it (tree-fairseq-score).
#
#   scripts/generate.sh [--metrics "sacrebleu tokbleu"] [--subset test] [--lang L] [--allow-subset] \
#       DATA-BIN CHECKPOINT OUT-DIR [fairseq-generate flags ...]
#
# Runs fairseq-generate with the checkpoint's own task (tree_translation or translation), beam 5,
# --remove-bpe (sentencepiece when the data-bin's pieces are, subword-nmt's @@ otherwise),
# --required-batch-size-multiple 1 (fairseq's default 8 drops the last len % 8
# sentences of the split), and writes OUT-DIR/generate-SUBSET.txt, OUT-DIR/score-SUBSET.txt (and .json).
# The score is taken against the split's own target text, which tree-fairseq-preprocess keeps in the
# data-bin (SPLIT.ref.LANG, and SPLIT.ref.raw.LANG where a recipe has the untokenised test set), not
# against fairseq-generate's T- lines, which print a piece missing from the dictionary as <unk>; a
# data-bin without it is scored only when no T- line holds <unk> (see tree-fairseq-score --help).
# Flags after OUT-DIR go to fairseq-generate and win over these defaults (e.g. --beam 4
# --lenpen 0.6 for WMT), except --gen-subset and --results-path (refused: give --subset and OUT-DIR,
# which the score is taken of), and each given once (a second is refused). Metrics: sacrebleu,
# tokbleu, compound (WMT en-de), rouge (Gigaword); see tree-fairseq-score --help. --lang is the
# detokenizer's language (default: the data-bin's target language). Every sentence of the split
# must have been translated: when fairseq-generate skipped some (e.g. --skip-invalid-size-inputs-valid-test
# with --max-source-positions), scoring stops naming how many and which, with a non-zero exit;
# --allow-subset scores them anyway, every score line marked [SUBSET scored/total]. A data-bin whose
# token dictionaries differ from those the checkpoint's run recorded (train.sh's dictionaries.json beside it)
# is refused.
#
#   scripts/generate.sh iwslt14.de-en/data-bin/de-en checkpoints/tree-de-en/checkpoint_best.pt out/tree-de-en
#   scripts/generate.sh --metrics "sacrebleu tokbleu compound" wmt14.en-de/data-bin/en-de \
#       checkpoints/wmt/checkpoint_avg_last5.pt out/wmt --beam 4 --lenpen 0.6
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/usage.sh"
PYTHON=${PYTHON:-python3}
METRICS="sacrebleu tokbleu"
SUBSET=test
LANG_OVERRIDE=""
ALLOW_SUBSET=()
while (($#)); do
    case $1 in
        -h|--help) header_usage; exit 0 ;;
        --metrics) METRICS=${2:?}; shift 2 ;;
        --subset) SUBSET=${2:?}; shift 2 ;;
        --lang) LANG_OVERRIDE=${2:?}; shift 2 ;;
        --allow-subset) ALLOW_SUBSET=(--allow-subset); shift ;;
        *) break ;;
    esac
done
if (($# < 3)); then
    echo "usage: scripts/generate.sh [--metrics M] [--subset S] DATA-BIN CHECKPOINT OUT-DIR [flags] (see --help)" >&2
    exit 2
fi
DATA=$1 CHECKPOINT=$2 OUT=$3
shift 3
# The split and the output folder are the script's: given again after OUT-DIR, they would win in
# fairseq-generate while the score was taken of OUT-DIR/generate-SUBSET.txt (another split's, or stale).
for arg in "$@"; do
    case $arg in
        --gen-subset|--gen-subset=*) why="give the split as --subset SPLIT before DATA-BIN" ;;
        --results-path|--results-path=*) why="the output folder is OUT-DIR, the third argument" ;;
        *) continue ;;
    esac
    echo "generate.sh: error: $arg: $why, not as a fairseq-generate flag" >&2
    exit 2
done
# A flag given twice: fairseq-generate keeps the last silently (--beam 4 ... --beam 6 searched with 6). One
# after this script's own (--beam 4) replaces its value, as it is meant to.
check_flags_once generate.sh "$@"
[[ -d $DATA ]] || { echo "generate.sh: error: no data-bin $DATA" >&2; exit 2; }
check_data_bin generate.sh "$DATA"
[[ -f $CHECKPOINT ]] || { echo "generate.sh: error: no checkpoint $CHECKPOINT" >&2; exit 2; }
# A checkpoint whose folder records its run's token dictionaries (train.sh's SAVE-DIR/dictionaries.json):
# a data-bin with others would give every embedding another word.
"$PYTHON" "$ROOT/tree_fairseq/cli/dictionary_record.py" check "$(dirname "$CHECKPOINT")" "$DATA" "$CHECKPOINT" ||
    exit 2
USER_DIR=$ROOT/tree_fairseq

# The task the checkpoint was trained with, the data-bin's target language (for detokenising) and
# its subword format (sentencepiece when the target dictionary holds ▁ pieces: removed as such); or
# why the checkpoint cannot be read (cut short by a kill or a full disk while it was written).
INFO=$("$PYTHON" - "$CHECKPOINT" "$DATA" <<'PY' 2>/dev/null
import os
import sys
from tree_fairseq.compat.checkpoints import load_checkpoint, newest_readable_checkpoint
from fairseq.data import data_utils
from tree_fairseq.trees.subwords import dictionary_subword_format
try:
    state = load_checkpoint(sys.argv[1], mmap=True, verify=True)
except (ValueError, OSError) as error:
    instead = newest_readable_checkpoint(os.path.dirname(sys.argv[1]) or ".", but=sys.argv[1])
    print(f"error: {error}: " + (f"translate with another checkpoint of its run ({instead}), or retrain it"
                                  if instead else "retrain it (no other checkpoint beside it can be read)"))
    sys.exit()
task = state["cfg"]["task"] if state.get("cfg") else vars(state["args"])
tgt = task.get("target_lang") or data_utils.infer_language_pair(sys.argv[2].split(":")[0])[1]
dictionary = os.path.join(sys.argv[2].split(":")[0], f"dict.{tgt}.txt")
if not os.path.isfile(dictionary):  # a data-bin of another language pair than the checkpoint's
    print(f"error: {sys.argv[2]} has no dict.{tgt}.txt: {sys.argv[1]} translates into {tgt}; give a data-bin of its "
          "language pair")
    sys.exit()
with open(dictionary, encoding="utf-8") as f:
    bpe = dictionary_subword_format([line.split(" ", 1)[0] for line in f])
print(task.get("_name") or task.get("task"), tgt, bpe)
PY
) || true
[[ $INFO != error:* ]] || { echo "generate.sh: $INFO" >&2; exit 1; }
read -r TASK TGT BPE <<< "$INFO" || true
[[ -n ${TASK:-} ]] || { echo "generate.sh: error: cannot read the task from $CHECKPOINT" >&2; exit 1; }
TGT=${LANG_OVERRIDE:-$TGT}

mkdir -p "$OUT"
command=(fairseq-generate "$DATA" --user-dir "$USER_DIR" --task "$TASK" --path "$CHECKPOINT"
    --gen-subset "$SUBSET" --beam 5 --remove-bpe "$BPE" --max-tokens 8000 --required-batch-size-multiple 1
    --results-path "$OUT" "$@")
printf '$ %s\n' "${command[*]}"
"${command[@]}"
grep "^Generate" "$OUT/generate-$SUBSET.txt" || true
# shellcheck disable=SC2086  # METRICS is a list
"$PYTHON" -m tree_fairseq.cli.score --generate-output "$OUT/generate-$SUBSET.txt" --lang "$TGT" \
    --metrics $METRICS --json "$OUT/score-$SUBSET.json" --data-bin "$DATA" --subset "$SUBSET" \
    "${ALLOW_SUBSET[@]}" | tee "$OUT/score-$SUBSET.txt"
