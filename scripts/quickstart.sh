#!/usr/bin/env bash
# Quick start, two ways:
#
#   bash scripts/quickstart.sh --synthetic [--work DIR] [--minutes N]
#   bash scripts/quickstart.sh [DIR] [--work DIR] [--minutes N] [--parser NAME]
#
# --synthetic (offline; the default when there is neither DIR nor network): the tree-dependent
# benchmark (tree-fairseq-synthetic: target word order given by STR/INV source trees), a small Tree
# Transformer with the gold trees, the same model with balanced trees and fairseq's transformer
# on the text, trained for a few minutes each (two at a time, one thread each), then a table of
# their exact match on the test split against the tree-blind ceiling (the best any model without
# the tree can do). About 10 minutes on a 2-core CPU (scripts/tree_benchmark.py does the rest of
# the models).
#
# With DIR or network: IWSLT'14 German-English from text to two sacreBLEU scores on its test
# set, a small Tree Transformer and the fairseq transformer of the same size, each trained for a
# few minutes (configs/quickstart_*.yaml) on the same data-bin. Fits in 30 minutes on a 2-core
# CPU. DIR holds tokenised IWSLT'14 de-en ({train,valid,test}.{de,en}, plus the BPE codes as
# bpe.codes if you have them); without DIR the corpus is downloaded and prepared as fairseq does.
#   --work DIR       everything goes there (default: ./quickstart); a second run reuses what is done
#   --minutes N      training minutes per model (default: 8; --synthetic: 3)
#   --parser NAME    source trees (default: balanced, i.e. no parser: stanza wants a model download
#                    and a GPU for this size; --parser stanza for real parses)
# Without an environment that imports tree_fairseq, it first makes .venv in the repository
# (pip install torch==2.13.0 -e .; set TORCH_SPEC for another torch).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/usage.sh"
DIR="" WORK=./quickstart MINUTES="" PARSER=balanced SYNTHETIC=""
declare -A GIVEN=()
while (($#)); do
    case $1 in  # an option or DIR given twice: refused, not the last one kept
        --work|--minutes|--parser)
            [[ -z ${GIVEN[$1]:-} ]] || { echo "quickstart.sh: error: $1 is given twice: give it once" >&2; exit 2; }
            GIVEN[$1]=1 ;;
        -*) ;;
        *) [[ -z $DIR ]] || { echo "quickstart.sh: error: DIR is given twice ($DIR, then $1): give one" >&2; exit 2; } ;;
    esac
    case $1 in
        -h|--help) header_usage; exit 0 ;;
        --work) WORK=${2:?}; shift 2 ;;
        --minutes) MINUTES=${2:?}; shift 2 ;;
        --parser) PARSER=${2:?}; shift 2 ;;
        --synthetic) SYNTHETIC=yes; shift ;;
        -*) echo "quickstart.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) DIR=$1; shift ;;
    esac
done
[[ -z $DIR || -d $DIR ]] || { echo "quickstart.sh: error: $DIR: no such directory" >&2; exit 2; }
[[ -z $DIR || -z $SYNTHETIC ]] || { echo "quickstart.sh: error: DIR and --synthetic exclude each other" >&2; exit 2; }
IWSLT_URL=http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz
if [[ -z $DIR && -z $SYNTHETIC ]] && ! curl -sfI --max-time 10 -o /dev/null "$IWSLT_URL" 2> /dev/null; then
    echo "quickstart.sh: no DIR and no network: the offline benchmark (--synthetic)"
    SYNTHETIC=yes
fi
START=$(date +%s)
say() { printf '\n==> [%s] %s\n' "$(date -u -d @$(($(date +%s) - START)) +%M:%S)" "$*"; }

say "environment"
if python3 -c "import tree_fairseq, fairseq, sacrebleu" 2> /dev/null; then
    echo "    using $(command -v python3) (tree_fairseq imports)"
else
    if [[ ! -x $ROOT/.venv/bin/python ]]; then
        echo "    $ python3 -m venv $ROOT/.venv && .venv/bin/pip install ${TORCH_SPEC:-torch==2.13.0} -e $ROOT"
        python3 -m venv "$ROOT/.venv"
        "$ROOT/.venv/bin/pip" install "${TORCH_SPEC:-torch==2.13.0}" -e "$ROOT"
    fi
    export PATH=$ROOT/.venv/bin:$PATH
    echo "    using $ROOT/.venv"
fi

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

if [[ -n $SYNTHETIC ]]; then
    MINUTES=${MINUTES:-3}
    say "tree-dependent benchmark -> $WORK/synthetic; three models, $MINUTES minutes of training each, two at a time"
    OMP_NUM_THREADS=1 python3 "$ROOT/scripts/tree_benchmark.py" --work "$WORK/synthetic" --seeds 1 \
        --minutes "$MINUTES" --jobs 2 --runs tree_transformer/gold tree_transformer/balanced transformer/text \
        > "$WORK/synthetic.log" 2>&1 || { tail -n 20 "$WORK/synthetic.log"; exit 1; }
    say "exact match on the test split (log: $WORK/synthetic.log)"
    sed -n '/^benchmark:/,$p' "$WORK/synthetic.log" | sed 's/^/    /'
    echo "    (tree_transformer/gold reads the gold trees, /balanced the same model with balanced trees,"
    echo "     transformer/text is fairseq's transformer on the words alone; outputs: $WORK/synthetic/runs/)"
    exit 0
fi
MINUTES=${MINUTES:-8}
say "data: IWSLT'14 de-en ${DIR:-(download)} -> $WORK/iwslt14.de-en (parser: $PARSER)"
prepare=(bash "$ROOT/data-prep/prepare-iwslt14.sh" --work "$WORK/iwslt14.de-en" --directions de-en --parser "$PARSER")
if [[ -n $DIR ]]; then
    prepare+=(--local "$DIR")
    [[ ! -f $DIR/bpe.codes ]] || prepare+=(--bpe-codes "$DIR/bpe.codes")
fi
"${prepare[@]}" > "$WORK/prepare.log" 2>&1 || { tail -n 20 "$WORK/prepare.log"; exit 1; }
grep '^==>' "$WORK/prepare.log" | sed 's/^/    /'
BIN=$WORK/iwslt14.de-en/data-bin/de-en

HOURS=$(python3 -c "print($MINUTES / 60)")
declare -A SCORE
for model in tree_transformer transformer; do
    say "train $model for $MINUTES minutes (log: $WORK/$model/train.log)"
    bash "$ROOT/scripts/train.sh" "quickstart_$model" "$BIN" "$WORK/$model" \
        "optimization.stop_time_hours=$HOURS" > /dev/null 2>&1 ||
        { tail -n 20 "$WORK/$model/train.log"; exit 1; }
    grep -E '\| valid on|done training' "$WORK/$model/train.log" | tail -n 2 | sed 's/^.*| INFO | /    /'
    say "translate the test set with $model (beam 5)"
    # Bounded lengths (as fairseq's IWSLT recipe validates): a model trained for minutes repeats itself.
    bash "$ROOT/scripts/generate.sh" --metrics sacrebleu "$BIN" "$WORK/$model/checkpoint_best.pt" \
        "$WORK/$model/test" --max-len-a 1.2 --max-len-b 10 > "$WORK/$model/generate.log" 2>&1 ||
        { tail -n 20 "$WORK/$model/generate.log"; exit 1; }
    SCORE[$model]=$(head -n 1 "$WORK/$model/test/score-test.txt")
done

say "sacreBLEU on IWSLT'14 de-en test ($(wc -l < "$WORK/iwslt14.de-en/tok/test.en") sentences), $MINUTES minutes of training each"
printf '    %-18s %s\n' "tree transformer" "${SCORE[tree_transformer]#sacreBLEU (detokenised) = }"
printf '    %-18s %s\n' "transformer" "${SCORE[transformer]#sacreBLEU (detokenised) = }"
echo "    (outputs: $WORK/{tree_transformer,transformer}/test/generate-test.txt)"
echo "    Minutes of training show the pipeline working, not what the tree adds: the two models trained"
echo "    until validation loss stops improving, and their scores, are in docs/iwslt_lowres.md."
