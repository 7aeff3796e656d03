#!/usr/bin/env bash
# Train several architectures with one small configuration and the same update budget on one
# data-bin, translate its test split, and print one sacreBLEU line per model: a same-budget
# learning check of the architectures against each other.
#
#   scripts/compare_bleu.sh [--jobs N] DATA-BIN OUT-DIR UPDATES ARCH [ARCH ...] [-- fairseq-train flags]
#
# Every model: 256 / ffn 512 / 4 heads, 3 + 3 layers, shared decoder input/output embeddings,
# dropout 0.1, Adam (0.9, 0.98), lr 1e-3, inverse sqrt with 100 warmup updates, label smoothing
# 0.1, --max-tokens 4096, seed 1, UPDATES updates, one CPU thread per process (--cpu when no
# GPU); the last checkpoint is scored (scripts/generate.sh: beam 5, whole test split). Flags after
# "--" go to every fairseq-train and win over these. Models that read source trees train with
# --task tree_translation (--max-tokens then counts leaves + nodes), those that read dependency
# parents (pascal_transformer_*) with --task dependency_translation (the data-bin needs the source's
# heads); the others, fairseq's transformer included, with --task translation on the same data-bin.
# --jobs N trains N models at once (default 1); one run at a time on an OUT-DIR (OUT-DIR/.lock), a
# second one is refused. OUT-DIR/ARCH/ holds each model's checkpoints, logs and outputs, and
# OUT-DIR/ARCH/run.txt what it is made with (data-bin, UPDATES, architecture, task, flags); a
# finished model is not trained again, an interrupted one resumes, and a model made with anything
# else is refused (give another OUT-DIR, or remove OUT-DIR/ARCH), before anything runs; the record
# of a folder with no model (no checkpoint, no score) is replaced.
#
#   scripts/compare_bleu.sh --jobs 2 data-bin/iwslt14.de-en out/compare 400 \
#       transformer_iwslt_de_en tree_transformer_iwslt_de_en constituent_transformer_iwslt_de_en
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/usage.sh"
PYTHON=${PYTHON:-python3}
JOBS=1
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    header_usage; exit 0
fi
if [[ ${1:-} == --jobs ]]; then JOBS=${2:-}; shift $(($# < 2 ? 1 : 2)); fi
# --jobs 0 waited for a free slot forever; UPDATES 0 reached fairseq as --max-update 0, its "no limit"
if ! [[ $JOBS =~ ^[0-9]+$ ]] || ((10#$JOBS == 0)); then
    echo "compare_bleu.sh: error: --jobs must be 1 or more, got '$JOBS'" >&2; exit 2
fi
JOBS=$((10#$JOBS))
if (($# < 4)); then
    echo "usage: scripts/compare_bleu.sh [--jobs N] DATA-BIN OUT-DIR UPDATES ARCH [ARCH ...] [-- flags] (see --help)" >&2
    exit 2
fi
DATA=$1 OUT=$2 UPDATES=$3
shift 3
ARCHS=() EXTRA=()
while (($#)); do
    if [[ $1 == -- ]]; then shift; EXTRA=("$@"); break; fi
    ARCHS+=("$1"); shift
done
[[ -d $DATA ]] || { echo "compare_bleu.sh: error: no data-bin $DATA" >&2; exit 2; }
[[ $UPDATES =~ ^[0-9]+$ ]] || { echo "compare_bleu.sh: error: UPDATES must be a number, got $UPDATES" >&2; exit 2; }
UPDATES=$((10#$UPDATES))
((UPDATES > 0)) || { echo "compare_bleu.sh: error: UPDATES must be 1 or more, got $UPDATES" >&2; exit 2; }
((${#ARCHS[@]})) || { echo "compare_bleu.sh: error: no architecture given" >&2; exit 2; }
twice=$(printf '%s\n' "${ARCHS[@]}" | sort | uniq -d | head -1)
if [[ -n $twice ]]; then
    echo "compare_bleu.sh: error: $twice is named more than once (one OUT-DIR/ARCH each)" >&2; exit 2
fi
check_flags_once compare_bleu.sh "${EXTRA[@]}"  # fairseq-train would keep the last of a flag given twice
USER_DIR=$ROOT/tree_fairseq

# The task of each architecture: tree_translation for the models whose encoder reads trees,
# dependency_translation for those that read parents.
mapfile -t TASKS < <("$PYTHON" - "${ARCHS[@]}" <<'PY'
import inspect
import sys
import tree_fairseq  # noqa: F401  (registers the architectures)
from fairseq.models import ARCH_MODEL_REGISTRY
from tree_fairseq.models.common import TreeSourceTransformerModel
for arch in sys.argv[1:]:
    if arch not in ARCH_MODEL_REGISTRY:
        sys.exit(f"compare_bleu.sh: error: unknown architecture {arch}")
    model = ARCH_MODEL_REGISTRY[arch]
    if "src_parent_spans" in inspect.signature(model.forward).parameters:
        print("dependency_translation")
    else:
        print("tree_translation" if issubclass(model, TreeSourceTransformerModel) else "translation")
PY
)
((${#TASKS[@]} == ${#ARCHS[@]})) || exit 2
DEVICE=()
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || DEVICE=(--cpu)

# One run at a time on an OUT-DIR: two would train (and record) the same OUT-DIR/ARCH at once. The lock
# (flock on OUT-DIR/.lock, as train.sh's on SAVE-DIR) is held for the script's life and its programs', so
# the kernel releases it however the run ends, a kill included.
[[ ! -e $OUT || -d $OUT ]] || { echo "compare_bleu.sh: error: OUT-DIR $OUT is a file: give a folder" >&2; exit 2; }
mkdir -p "$OUT"
exec {LOCK_FD}>>"$OUT/.lock"
flock -n "$LOCK_FD" || {
    echo "compare_bleu.sh: error: OUT-DIR $OUT is being written by another run (it holds $OUT/.lock):" \
        "wait for it to end, or give another OUT-DIR" >&2
    exit 2
}

# What a model is made with: a model of OUT made with another data-bin, budget, task or flags is not
# reused (its score was printed beside this command's UPDATES).
record() {
    printf 'data-bin: %s\nupdates: %s\narch: %s\ntask: %s\nflags:' "$(cd "$DATA" && pwd -P)" "$UPDATES" "$1" "$2"
    if (($# > 2)); then printf ' %q' "${@:3}"; fi
    printf '\n'
}
REPLACED=()
for i in "${!ARCHS[@]}"; do
    dir=$OUT/${ARCHS[$i]}
    [[ -e $dir ]] || continue
    if [[ -f $dir/run.txt ]]; then
        if diff <(record "${ARCHS[$i]}" "${TASKS[$i]}" "${EXTRA[@]}") "$dir/run.txt" > /dev/null; then
            :
        elif [[ ! -f $dir/score-test.txt ]] && ! compgen -G "$dir/checkpoint*.pt" > /dev/null; then
            REPLACED+=("$dir")  # no model made with it (a run that failed before its first checkpoint): not refused
        else
            echo "compare_bleu.sh: error: $dir was made with other settings than this command's:" >&2
            diff <(record "${ARCHS[$i]}" "${TASKS[$i]}" "${EXTRA[@]}") "$dir/run.txt" \
                | sed -n 's/^< /  now: /p; s/^> /  then: /p' >&2 || true
            echo "give another OUT-DIR, or remove $dir to train it again" >&2
            exit 2
        fi
    elif [[ -n $(ls -A "$dir") ]]; then
        echo "compare_bleu.sh: error: $dir holds a model without run.txt (what it was made with): give another" \
            "OUT-DIR, or remove $dir to train it again" >&2
        exit 2
    fi
done
for dir in "${REPLACED[@]}"; do
    echo "compare_bleu.sh: $dir/run.txt records other settings and $dir holds no model: replacing it" >&2
    rm "$dir/run.txt"
done

run_one() {
    local arch=$1 task=$2 dir=$OUT/$1
    mkdir -p "$dir"
    [[ -f $dir/run.txt ]] || record "$arch" "$task" "${EXTRA[@]}" > "$dir/run.txt"
    if [[ ! -f $dir/score-test.txt ]]; then
        if ! grep -q "done training" "$dir/train.log" 2>/dev/null; then
            echo "[$(date +%T)] $arch: training ($task, $UPDATES updates) -> $dir/train.log"
            OMP_NUM_THREADS=1 fairseq-train "$DATA" --user-dir "$USER_DIR" --task "$task" --arch "$arch" \
                --encoder-embed-dim 256 --encoder-ffn-embed-dim 512 --encoder-attention-heads 4 --encoder-layers 3 \
                --decoder-embed-dim 256 --decoder-ffn-embed-dim 512 --decoder-attention-heads 4 --decoder-layers 3 \
                --share-decoder-input-output-embed --dropout 0.1 \
                --optimizer adam --adam-betas "(0.9, 0.98)" --lr 1e-3 --lr-scheduler inverse_sqrt \
                --warmup-updates 100 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
                --max-tokens 4096 --max-update "$UPDATES" --seed 1 --save-dir "$dir" --no-epoch-checkpoints \
                --disable-validation --log-format simple --log-interval 50 "${DEVICE[@]}" "${EXTRA[@]}" \
                >> "$dir/train.log" 2>&1
        fi
        echo "[$(date +%T)] $arch: translating the test split -> $dir/generate-test.txt"
        OMP_NUM_THREADS=1 PYTHON=$PYTHON bash "$ROOT/scripts/generate.sh" --metrics sacrebleu \
            "$DATA" "$dir/checkpoint_last.pt" "$dir" "${DEVICE[@]}" > "$dir/generate.log" 2>&1
    fi
    echo "[$(date +%T)] $arch: done"
}

for i in "${!ARCHS[@]}"; do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
    run_one "${ARCHS[$i]}" "${TASKS[$i]}" &
done
wait
printf '\n%-45s %-8s %s\n' "architecture (task)" "updates" "test sacreBLEU"
failed=0
for i in "${!ARCHS[@]}"; do
    scores=$OUT/${ARCHS[$i]}/score-test.txt
    if [[ -f $scores ]]; then
        score=$(grep -m1 -i "bleu" "$scores")
    else
        score="FAILED (see $OUT/${ARCHS[$i]}/*.log)" failed=1
    fi
    printf '%-45s %-8s %s\n' "${ARCHS[$i]} (${TASKS[$i]})" "$UPDATES" "$score"
done
exit $failed
