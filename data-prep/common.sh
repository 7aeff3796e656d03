# shellcheck shell=bash
# Shared by the prepare-*.sh recipes (source it; it does nothing by itself).
#
# A recipe sets DATASET, SRC, TGT, DIRECTIONS, BPE_TOKENS, SPLITS and a download_and_tokenize
# function, calls parse_args "$@", then runs prepare. The pipeline, in the order of fairseq's
# examples/translation recipes plus the trees:
#
#   orig/   downloads                      (skipped with --local)
#   tok/    {train,valid,test}.{lang}       Moses-tokenised, cleaned text (--local: links to DIR)
#   raw/    {split}.{lang}                  untokenised text of the downloaded test sets (--local: none)
#   trees/  {split}.tree.{lang}             tree-fairseq-parse of tok/, for every source language
#           ({split}.heads.{lang})          and, with --heads, each word's dependency head
#   bpe/    {split}.{lang}, codes           subword-nmt (or sentencepiece) pieces + links to trees/
#   data-bin/{src}-{tgt}                    tree-fairseq-preprocess, one per direction, with each
#                                           split's target text kept ({split}.ref.{tgt}) and raw/'s
#                                           ({split}.ref.raw.{tgt}): the references of the scores
#
# Resumable, like make: every finished step leaves WORK/.steps/NAME holding its command line,
# which includes the options it depends on and the fingerprints of its inputs; a step is skipped
# when that file holds the same line and the files it writes are all there. A step that runs again
# rewrites its outputs, so the steps that read them run again when they come out different. WORK/.steps/source says where the text came from (the download or --local):
# a run from the other clears tok/, raw/ and the markers, and every step runs again (see claim_work).

set -euo pipefail

DATA_PREP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$DATA_PREP_DIR/../scripts/usage.sh"
TEXT_TOOLS=("${PYTHON:-python3}" "$DATA_PREP_DIR/text_tools.py")
# One dictionary for both languages: a recipe's own default (set after sourcing this) or --joined-dictionary,
# never an environment variable of the same name.
JOINED=""
# processors: those this run may use, as nproc counts them but not OMP_NUM_THREADS's (which nproc prints instead)
processors() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 4; }
THREADS=${THREADS:-$(processors)}

say() { printf '==> %s\n' "$*"; }
die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# usage: the recipe's header comment, then the options.
usage() {
    header_usage
    echo
    cat <<EOF
Options:
  --local DIR          use the tokenised text in DIR ({train,valid,test}.{$SRC,$TGT}, one sentence per
                       line, after Moses tokenisation) instead of downloading and tokenising; taken as
                       it is: the download's cleaning, lowercasing and valid split are not applied
  --work DIR           where everything is written (default: ./$DATASET)
  --parser NAME        source trees: stanza (default, or \$TREE_FAIRSEQ_PARSER), spacy, bracketed,
                       conllu, balanced, left, right (see tree-fairseq-parse --help)
  --spacy-model NAME   with --parser spacy: the installed spaCy pipeline (package name or directory)
  --dependency-tree-shape SHAPE
                       with --parser spacy or conllu: layered (default) or flat phrase structure
  --trees-dir DIR      with --parser bracketed: parser output DIR/{split}.tree.{lang}, one tree per
                       line; with --parser conllu: DIR/{split}.{lang}.conllu, one sentence block per line
  --on-failure NAME    a line the parser could not parse: error (default) stops; balanced, left or
                       right give it that trivial tree and list it in trees/{split}.tree.{lang}.failures
  --stanza-dir DIR     stanza's model directory (default: stanza's own)
  --stanza-package NAME
                       with --parser stanza: stanza's models other than the language's default, a
                       package of the whole pipeline (default_accurate) or PROCESSOR=NAME,... of some
                       processors (constituency=wsj); see tree-fairseq-parse --stanza-package
  --heads SOURCE       also give each source word its dependency head, so that the data-bin has the
                       parents stream of --task dependency_translation (PASCAL): parser (the
                       dependency parser's heads: --parser spacy or conllu only), or the trivial heads
                       next, previous or random (any parser); default: none, no parents
  --heads-seed N       with --heads random: the seed of the random trees, 0 to 4294967295 (default: 1)
  --cpu                run stanza on the CPU even when a GPU is present
  --bpe NAME           subword_nmt (default) or sentencepiece
  --bpe-codes FILE     apply these subword-nmt codes instead of learning them
  --bpe-tokens N       merges to learn / sentencepiece vocabulary size, at most 1000000 (default: $BPE_TOKENS)
  --directions LIST    data-bins to make, e.g. "$DIRECTIONS" (default)
  --joined-dictionary  one dictionary for both languages (default: ${JOINED:-no})
  --workers N          worker processes, at most 4 per processor (default: $THREADS)
  -h, --help           this help
An option that takes a value is given once (a second one is refused, not read instead).
Environment: TREE_FAIRSEQ_PARSER (default parser), PYTHON (python for the helpers).
EOF
}

parse_args() {
    LOCAL=""
    WORK="./$DATASET"
    PARSER=${TREE_FAIRSEQ_PARSER:-stanza}
    SPACY_MODEL=""
    DEPENDENCY_SHAPE=layered
    TREES_DIR=""
    STANZA_DIR=""
    STANZA_PACKAGE=""
    HEADS=""
    HEADS_SEED=""
    PARSE_CPU=""
    ON_FAILURE=error
    BPE=subword_nmt
    BPE_CODES=""
    local -A given=()
    while (($#)); do
        case $1 in  # an option that takes a value, given twice: refused, not the last one kept
            --cpu|--joined-dictionary|-h|--help) ;;
            --*) [[ -z ${given[$1]:-} ]] || die "$1 given twice ($1 ${given[$1]#=}, then $1 ${2-}): give it once"
                 given[$1]==${2-} ;;
        esac
        case $1 in
            --local) LOCAL=${2:?--local needs a directory}; shift 2 ;;
            --work) WORK=${2:?--work needs a directory}; shift 2 ;;
            --parser) PARSER=${2:?--parser needs a name}; shift 2 ;;
            --spacy-model) SPACY_MODEL=${2:?--spacy-model needs a pipeline name or directory}; shift 2 ;;
            --dependency-tree-shape) DEPENDENCY_SHAPE=${2:?--dependency-tree-shape needs layered or flat}; shift 2 ;;
            --trees-dir) TREES_DIR=${2:?}; shift 2 ;;
            --stanza-dir) STANZA_DIR=${2:?}; shift 2 ;;
            --stanza-package) STANZA_PACKAGE=${2:?--stanza-package needs a package name or PROCESSOR=NAME,...}; shift 2 ;;
            --heads) HEADS=${2:?--heads needs parser, next, previous or random}; shift 2 ;;
            --heads-seed) HEADS_SEED=${2:?--heads-seed needs a number}; shift 2 ;;
            --cpu) PARSE_CPU=--cpu; shift ;;
            --on-failure) ON_FAILURE=${2:?--on-failure needs error, balanced, left or right}; shift 2 ;;
            --bpe) BPE=${2:?}; shift 2 ;;
            --bpe-codes) BPE_CODES=${2:?}; shift 2 ;;
            --bpe-tokens) BPE_TOKENS=${2:?}; shift 2 ;;
            --directions) DIRECTIONS=${2?--directions needs a list}; shift 2 ;;
            --joined-dictionary) JOINED=yes; shift ;;
            --workers) THREADS=${2:?}; shift 2 ;;
            -h|--help) usage; exit 0 ;;
            *) die "unknown option $1 (see --help)" ;;
        esac
    done
    case $PARSER in
        stanza|balanced|left|right) ;;
        spacy) [[ -n $SPACY_MODEL ]] || die "--parser spacy needs --spacy-model NAME (an installed spaCy pipeline)" ;;
        bracketed|conllu) [[ -n $TREES_DIR ]] || die "--parser $PARSER needs --trees-dir DIR" ;;
        *) die "unknown parser '$PARSER': stanza, spacy, bracketed, conllu, balanced, left or right" ;;
    esac
    [[ -z $STANZA_PACKAGE || $PARSER == stanza ]] || die "--stanza-package is for --parser stanza, not $PARSER"
    case $HEADS in
        ''|next|previous|random) ;;
        parser) [[ $PARSER == spacy || $PARSER == conllu ]] ||
            die "--heads parser takes a dependency parser's heads (--parser spacy or conllu); --parser $PARSER gives none: use --heads next, previous or random for trivial heads" ;;
        *) die "unknown --heads '$HEADS': parser, next, previous or random" ;;
    esac
    if [[ -n $HEADS_SEED ]]; then
        [[ $HEADS == random ]] || die "--heads-seed is the seed of --heads random"
        [[ $HEADS_SEED =~ ^[0-9]{1,10}$ ]] && ((10#$HEADS_SEED <= 4294967295)) ||
            die "--heads-seed '$HEADS_SEED' is not a whole number from 0 to 4294967295 (2**32 - 1)"
    fi
    [[ $HEADS != random ]] || HEADS_SEED=${HEADS_SEED:-1}
    case $DEPENDENCY_SHAPE in
        layered|flat) ;;
        *) die "unknown --dependency-tree-shape '$DEPENDENCY_SHAPE': layered or flat" ;;
    esac
    case $ON_FAILURE in
        error|balanced|left|right) ;;
        *) die "unknown --on-failure '$ON_FAILURE': error, balanced, left or right" ;;
    esac
    case $BPE in
        subword_nmt) ;;
        sentencepiece) [[ -z $BPE_CODES ]] || die "--bpe-codes is for subword_nmt" ;;
        *) die "unknown --bpe '$BPE': subword_nmt or sentencepiece" ;;
    esac
    [[ -z $BPE_CODES || -f $BPE_CODES ]] || die "--bpe-codes $BPE_CODES: no such file"
    [[ -z $TREES_DIR || -d $TREES_DIR ]] || die "--trees-dir $TREES_DIR: no such directory"
    [[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "--workers '$THREADS' is not a positive whole number"
    # At most 4 per processor, tree-fairseq-preprocess's own bound (tree_fairseq/cli/argtypes.py): each worker
    # of the parser and of the preprocess is a process of ~240-360 MB, and --workers 99999999999999999999
    # started thousands of them until the OOM killer ended other jobs. The length first: bash's numbers wrap.
    local cores most_workers
    cores=$(processors)
    most_workers=$((4 * cores))
    ((${#THREADS} <= ${#most_workers} && THREADS <= most_workers)) || die "--workers '$THREADS' is more than" \
        "$most_workers (4 per processor of this machine, $cores): more processes only take memory"
    [[ $BPE_TOKENS =~ ^[1-9][0-9]*$ ]] || die "--bpe-tokens '$BPE_TOKENS' is not a positive whole number"
    # learn-bpe stopped in an OverflowError at 99999999999999999999; no corpus has a million pieces to learn
    ((${#BPE_TOKENS} <= 7 && BPE_TOKENS <= 1000000)) || die "--bpe-tokens '$BPE_TOKENS' is more than 1000000" \
        "(merges or pieces: more than any corpus's vocabulary)"
    check_directions
    if [[ -n $LOCAL ]]; then
        [[ -d $LOCAL ]] || die "--local $LOCAL: no such directory"
        local split lang missing=() empty=() unended=()
        for split in "${SPLITS[@]}"; do
            for lang in "$SRC" "$TGT"; do
                if [[ ! -f $LOCAL/$split.$lang ]]; then
                    missing+=("$LOCAL/$split.$lang")
                elif [[ ! -s $LOCAL/$split.$lang ]]; then
                    empty+=("$LOCAL/$split.$lang")
                elif [[ -n $(tail -c 1 "$LOCAL/$split.$lang") ]]; then
                    unended+=("$LOCAL/$split.$lang")
                fi
            done
        done
        ((${#missing[@]} == 0)) || die "--local $LOCAL lacks ${missing[*]} (tokenised text, one sentence per line)"
        # an empty train split stopped in subword-nmt's traceback, an empty valid one in fairseq-train's
        ((${#empty[@]} == 0)) || die "--local $LOCAL: ${empty[*]} empty (every split needs its sentences)"
        # wc -l and the tools count lines by their newline: the last sentence would be counted on one side only
        ((${#unended[@]} == 0)) || die "--local $LOCAL: ${unended[*]} do(es) not end with a newline (the last" \
            "sentence is unterminated): add one, e.g. echo >> FILE"
    fi
    # tok/ links to --local's files and the steps write WORK's folders: the user's text or parser output
    # there would be replaced (bpe/train.de by its BPE pieces, bpe/test.tree.en by a link) or removed
    # (data-bin/), and --bpe-codes WORK/bpe/codes copied onto itself.
    outside_work --local "$LOCAL"
    outside_work --trees-dir "$TREES_DIR"
    outside_work --bpe-codes "$BPE_CODES"
    [[ -z $LOCAL ]] || LOCAL=$(cd "$LOCAL" && pwd)
    [[ -z $BPE_CODES ]] || BPE_CODES=$(cd "$(dirname "$BPE_CODES")" && pwd)/$(basename "$BPE_CODES")
    [[ -z $TREES_DIR ]] || TREES_DIR=$(cd "$TREES_DIR" && pwd)
    mkdir -p "$WORK"
    WORK=$(cd "$WORK" && pwd)
    # One run at a time on a WORK: two wrote the same temporary files (bpe/codes.tmp) and one data-bin
    # with splits of different codes. As scripts/train.sh: the lock is on a file opened for the script's
    # life (and its programs'), so the kernel releases it however the run ends, a kill included.
    exec {WORK_LOCK_FD}>>"$WORK/.lock"
    flock -n "$WORK_LOCK_FD" || die "WORK $WORK is being prepared by another run (it holds $WORK/.lock):" \
        "wait for it to end, or give another --work"
    STEPS_DIR=$WORK/.steps
    mkdir -p "$STEPS_DIR" "$WORK/orig" "$WORK/tok" "$WORK/trees" "$WORK/bpe" "$WORK/data-bin"
}

# outside_work OPTION PATH: stop when PATH (resolved, so that a link or a relative path is caught too)
# lies inside one of the folders of WORK that the recipe writes.
outside_work() {
    [[ -n $2 ]] || return 0
    local inside real
    real=$(realpath -m "$2")
    for inside in orig tok raw trees bpe data-bin .steps; do
        inside=$(realpath -m "$WORK/$inside")
        [[ $real != "$inside" && $real != "$inside"/* ]] || die "$1 $2 lies inside $inside, which the recipe" \
            "writes: put it outside --work's orig/, tok/, raw/, trees/, bpe/, data-bin/ and .steps/"
    done
}

# check_directions: every word of DIRECTIONS is SRC-TGT or TGT-SRC, and there is one.
check_directions() {
    local direction seen=()
    [[ -n ${DIRECTIONS// /} ]] || die "--directions is empty: give $SRC-$TGT, $TGT-$SRC or both, separated by a space"
    for direction in $DIRECTIONS; do
        [[ $direction == "$SRC-$TGT" || $direction == "$TGT-$SRC" ]] || die "--directions: '$direction' is not" \
            "$SRC-$TGT or $TGT-$SRC (this recipe's languages; several directions are separated by a space)"
        [[ " ${seen[*]} " != *" $direction "* ]] || die "--directions: $direction given twice"
        seen+=("$direction")
    done
}

# step NAME [--out FILE]... CMD [ARGS...] [-- KEY...]: run CMD ARGS unless it finished before with the
# same arguments and keys and every FILE it writes is still there (a step whose output was deleted runs
# again; the steps that read it run again when it comes out different). The keys are what the output
# depends on besides the arguments: options, and the fingerprints of the input files. The --out files
# are no part of the marker's line.
step() {
    local name=$1 outputs=() missing=() output
    shift
    while [[ ${1:-} == --out ]]; do
        outputs+=("$2")
        shift 2
    done
    local command=() signature="$*"
    while (($#)) && [[ $1 != -- ]]; do
        command+=("$1")
        shift
    done
    local marker=$STEPS_DIR/$name
    if [[ -f $marker && "$(cat "$marker")" == "$signature" ]]; then
        for output in "${outputs[@]}"; do
            [[ -e $output ]] || missing+=("${output#"$WORK"/}")
        done
        if ((${#missing[@]} == 0)); then
            say "skip $name (done)"
            return 0
        fi
        say "$name: done before, but ${missing[*]} missing: again"
    fi
    rm -f "$marker"
    say "$name"
    "${command[@]}"
    printf '%s' "$signature" > "$marker"
}

# run CMD [ARGS...]: print the command, then run it.
run() {
    printf '    $ %s\n' "$*"
    "$@"
}

# download URL FILE: fetch URL to FILE (kept; fetched again only when missing).
download() {
    local url=$1 file=$2
    if [[ -f $file ]]; then
        say "have $file"
        return 0
    fi
    say "download $url"
    if command -v curl > /dev/null; then
        curl -fL --retry 2 --connect-timeout 20 -o "$file.part" "$url" || _download_failed "$url" "$file"
    elif command -v wget > /dev/null; then
        wget -q -T 20 -t 2 -O "$file.part" "$url" || _download_failed "$url" "$file"
    else
        _download_failed "$url" "$file"
    fi
    mv "$file.part" "$file"
}

_download_failed() {
    rm -f "$2.part"
    die "cannot download $1 (offline?). Fetch it by hand to $2 and run again${DOWNLOAD_HINT:+ ($DOWNLOAD_HINT)}, or run with --local DIR on tokenised text ({train,valid,test}.{$SRC,$TGT})"
}

# claim_work: record where this run's text comes from (download or local) in WORK/.steps/source. When
# WORK was made from the other, its tok/ (the other's text or links), raw/ (the download's references)
# and step markers are cleared, so that no step is skipped as done on the other's text and a --local
# data-bin gets no downloaded reference; orig/ and its extraction are kept.
claim_work() {
    local source=download was first=$WORK/tok/train.$SRC marker
    [[ -z $LOCAL ]] || source=local
    if [[ -f $STEPS_DIR/source ]]; then
        was=$(cat "$STEPS_DIR/source")
    elif [[ -L $first ]]; then  # a WORK made before the record: tok/ links to the files of --local
        was=local
    elif [[ -e $first ]]; then
        was=download
    else
        was=$source
    fi
    if [[ $was != "$source" ]]; then
        say "$WORK was made from $(source_name "$was"), this run is from $(source_name "$source"): tok/, raw/" \
            "and the step markers cleared (orig/ kept)"
        rm -rf "$WORK/raw"
        rm -f "$WORK"/tok/*
        for marker in "$STEPS_DIR"/*; do
            [[ $marker == "$STEPS_DIR/extract" ]] || rm -f "$marker"
        done
    fi
    printf '%s' "$source" > "$STEPS_DIR/source"
}

source_name() {
    if [[ $1 == local ]]; then echo "--local text"; else echo "the download"; fi
}

# link_local: tok/ are links to the files of --local.
link_local() {
    local split lang
    for split in "${SPLITS[@]}"; do
        for lang in "$SRC" "$TGT"; do
            run ln -sfn "$LOCAL/$split.$lang" "$WORK/tok/$split.$lang"
        done
    done
}

# straight_apostrophes: standard input to output with ’ as ' (fairseq's recipes do this before Moses
# tokenisation). For the tokenised text only: the raw reference sacreBLEU scores against stays the
# official text.
straight_apostrophes() {
    sed -e "s/\’/\'/g"
}

# check_text: every tokenised file has no line break inside a line (a lone CR would split the line
# in every Python reader after this, one side only) and is valid UTF-8.
check_text() {
    local split lang files=()
    for split in "${SPLITS[@]}"; do
        for lang in "$SRC" "$TGT"; do files+=("$WORK/tok/$split.$lang"); done
    done
    run "${TEXT_TOOLS[@]}" check-text "${files[@]}"
}

# same_line_counts [--step NAME] WHAT FILE...: stop unless the files have as many lines (a last line without its
# newline counted), so that no step has shifted the sentence pairs. With --step, the files after the first are
# what step NAME wrote: the message says how to have it write them again.
same_line_counts() {
    local step="" what file first=
    if [[ $1 == --step ]]; then
        step=$2
        shift 2
    fi
    what=$1
    shift
    for file in "$@"; do
        local count
        count=$(awk 'END { print NR }' "$file")
        if [[ -z $first ]]; then
            first=$count
        elif ((count != first)); then
            local rebuild=""
            if [[ -n $step ]]; then
                rebuild=" (cut short?); to rebuild it, remove the step's marker $STEPS_DIR/$step, or $file,"
                rebuild+=" and run again"
            fi
            die "$what: $file has $count lines, $1 has $first: the pairs no longer line up$rebuild"
        fi
    done
}

# fingerprint FILE...: changes when a file's content does (CRC and size), to key steps on their
# input. Not the time stamp: cp -p, rsync -a and tar put it back after an edit.
fingerprint() {
    cksum -- "$@" | awk '{ printf "%s:%s ", $1, $2 }'
}

source_langs() {
    local direction
    for direction in $DIRECTIONS; do echo "${direction%-*}"; done | sort -u
}

parse_trees() {
    local split=$1 lang=$2
    local args=(--input "$WORK/tok/$split.$lang" --output "$WORK/trees/$split.tree.$lang" --parser "$PARSER"
        --on-failure "$ON_FAILURE")
    case $PARSER in
        # --workers: spaCy, and stanza on the CPU, parse in --workers processes (each holds its own
        # model, ~360 MB for spaCy's small English one); stanza on a GPU in one. The trees are the same.
        stanza) args+=(--lang "${PARSE_LANG:-$lang}" ${STANZA_DIR:+--model-dir "$STANZA_DIR"}
                       ${STANZA_PACKAGE:+--stanza-package "$STANZA_PACKAGE"} $PARSE_CPU
                       ${PARSE_CPU:+--workers "$THREADS"}) ;;
        spacy) args+=(--spacy-model "$SPACY_MODEL" --dependency-tree-shape "$DEPENDENCY_SHAPE" --workers "$THREADS") ;;
        bracketed) args+=(--trees "$(parser_output "$split" "$lang")") ;;
        conllu) args+=(--trees "$(parser_output "$split" "$lang")" --dependency-tree-shape "$DEPENDENCY_SHAPE") ;;
    esac
    local heads=$WORK/trees/$split.heads.$lang
    rm -f "$heads"  # heads of an earlier run with other options, or with --heads left out now
    case $HEADS in
        '') ;;
        parser) args+=(--heads "$heads") ;;
        random) args+=(--heads "$heads" --heads-control random --heads-seed "$HEADS_SEED") ;;
        *) args+=(--heads "$heads" --heads-control "$HEADS") ;;
    esac
    run tree-fairseq-parse "${args[@]}"
}

# heads_key: what the parse and binarize steps depend on besides their inputs when --heads is given
# (nothing without it, so that the steps of a run without heads keep their signatures).
heads_key() {
    [[ -z $HEADS ]] || printf 'heads=%s%s' "$HEADS" "${HEADS_SEED:+ heads-seed=$HEADS_SEED}"
}

# parser_output SPLIT LANG: the file of --trees-dir that --parser bracketed or conllu reads.
parser_output() {
    if [[ $PARSER == conllu ]]; then
        echo "$TREES_DIR/$1.$2.conllu"
    else
        echo "$TREES_DIR/$1.tree.$2"
    fi
}

learn_bpe() {
    if [[ $BPE == sentencepiece ]]; then
        run "${TEXT_TOOLS[@]}" spm-train --inputs "$WORK/tok/train.$SRC" "$WORK/tok/train.$TGT" \
            --model-prefix "$WORK/bpe/spm" --vocab-size "$BPE_TOKENS"
    elif [[ -n $BPE_CODES ]]; then
        run cp "$BPE_CODES" "$WORK/bpe/codes"
    else
        echo "    \$ cat tok/train.$SRC tok/train.$TGT | subword-nmt learn-bpe -s $BPE_TOKENS > bpe/codes"
        cat "$WORK/tok/train.$SRC" "$WORK/tok/train.$TGT" |
            subword-nmt learn-bpe -s "$BPE_TOKENS" > "$WORK/bpe/codes.tmp"
        mv "$WORK/bpe/codes.tmp" "$WORK/bpe/codes"
    fi
}

apply_bpe() {
    local split=$1 lang=$2
    if [[ $BPE == sentencepiece ]]; then
        run "${TEXT_TOOLS[@]}" spm-encode --model "$WORK/bpe/spm.model" "$WORK/tok/$split.$lang" "$WORK/bpe/$split.$lang"
    else
        echo "    \$ subword-nmt apply-bpe -c bpe/codes < tok/$split.$lang > bpe/$split.$lang"
        subword-nmt apply-bpe -c "$WORK/bpe/codes" < "$WORK/tok/$split.$lang" > "$WORK/bpe/$split.$lang.tmp"
        mv "$WORK/bpe/$split.$lang.tmp" "$WORK/bpe/$split.$lang"
    fi
}

binarize() {
    local src=$1 tgt=$2 split
    local dest=$WORK/data-bin/$src-$tgt
    for split in "${SPLITS[@]}"; do
        ln -sfn "../trees/$split.tree.$src" "$WORK/bpe/$split.tree.$src"
        # tree-fairseq-preprocess writes the parents stream when it finds the heads beside the trees
        if [[ -n $HEADS ]]; then
            ln -sfn "../trees/$split.heads.$src" "$WORK/bpe/$split.heads.$src"
        else
            rm -f "$WORK/bpe/$split.heads.$src"
        fi
    done
    # never a data-bin rebuilt without the raw reference it had (raw/ deleted since)
    for split in "${SPLITS[@]}"; do
        [[ -n $LOCAL || ! -f $dest/$split.ref.raw.$tgt || -f $WORK/raw/$split.$tgt ]] || die "$WORK/raw/$split.$tgt" \
            "is missing, but $dest has its raw reference ($split.ref.raw.$tgt): rebuilding would lose it; run again" \
            "from the download's step that writes raw/ (delete WORK/.steps/tokenize-$split)"
    done
    rm -rf "$dest"  # a run cut short leaves a partial data-bin
    run tree-fairseq-preprocess --source-lang "$src" --target-lang "$tgt" \
        --trainpref "$WORK/bpe/train" --validpref "$WORK/bpe/valid" --testpref "$WORK/bpe/test" \
        --destdir "$dest" --workers "$THREADS" ${JOINED:+--joined-dictionary} \
        --subword-format "$BPE"
    # The untokenised reference where the recipe has one (raw/): sacreBLEU scores against it. --local
    # text has none: raw/ is the download's.
    for split in "${SPLITS[@]}"; do
        if [[ -z $LOCAL && -f $WORK/raw/$split.$tgt ]]; then
            same_line_counts "raw $split" "$WORK/tok/$split.$tgt" "$WORK/raw/$split.$tgt"
            run cp "$WORK/raw/$split.$tgt" "$dest/$split.ref.raw.$tgt"
        fi
    done
}

# prepare: the whole pipeline after parse_args.
prepare() {
    say "$DATASET: work directory $WORK"
    claim_work
    local split lang direction inputs=() tok_outputs=()
    if [[ -n $LOCAL ]]; then
        for split in "${SPLITS[@]}"; do
            for lang in "$SRC" "$TGT"; do
                inputs+=("$LOCAL/$split.$lang")
                tok_outputs+=(--out "$WORK/tok/$split.$lang")
            done
        done
        step text "${tok_outputs[@]}" link_local -- "$LOCAL" "$(fingerprint "${inputs[@]}")"
    else
        download_and_tokenize
    fi
    step check-text check_text -- "$(fingerprint "$WORK"/tok/*)"
    for split in "${SPLITS[@]}"; do
        same_line_counts "tokenised $split" "$WORK/tok/$split."{$SRC,$TGT}
    done
    # before the parse: a vocabulary larger than the text allows stops here, not after hours of parsing
    local model=$WORK/bpe/codes
    [[ $BPE == subword_nmt ]] || model=$WORK/bpe/spm.model
    step "learn-bpe" --out "$model" learn_bpe -- "$BPE" "$BPE_TOKENS" "$BPE_CODES" \
        "$(fingerprint "$WORK/tok/train.$SRC" "$WORK/tok/train.$TGT" ${BPE_CODES:+"$BPE_CODES"})"
    local parser_version  # an upgraded parser or pipeline parses again
    parser_version=$("${TEXT_TOOLS[@]}" parser-version --parser "$PARSER" --spacy-model "$SPACY_MODEL")
    for lang in $(source_langs); do
        for split in "${SPLITS[@]}"; do
            local parser_inputs=("$WORK/tok/$split.$lang")
            case $PARSER in bracketed|conllu) parser_inputs+=("$(parser_output "$split" "$lang")") ;; esac
            # The options a run leaves out add no key: a work directory parsed before they existed is kept.
            step "parse-$split.$lang" --out "$WORK/trees/$split.tree.$lang" \
                ${HEADS:+--out "$WORK/trees/$split.heads.$lang"} \
                parse_trees "$split" "$lang" -- "$PARSER" "$TREES_DIR" "$STANZA_DIR" \
                "$SPACY_MODEL" "$parser_version" "$DEPENDENCY_SHAPE" "$ON_FAILURE" "$(fingerprint "${parser_inputs[@]}")" \
                ${STANZA_PACKAGE:+"stanza-package=$STANZA_PACKAGE"} $(heads_key)
            same_line_counts --step "parse-$split.$lang" "parsed $split" "$WORK/tok/$split.$lang" \
                "$WORK/trees/$split.tree.$lang" \
                ${HEADS:+"$WORK/trees/$split.heads.$lang"}
        done
    done
    for lang in "$SRC" "$TGT"; do
        for split in "${SPLITS[@]}"; do
            step "apply-bpe-$split.$lang" --out "$WORK/bpe/$split.$lang" apply_bpe "$split" "$lang" -- "$BPE" \
                "$(fingerprint "$model" "$WORK/tok/$split.$lang")"
            same_line_counts --step "apply-bpe-$split.$lang" "BPE'd $split" "$WORK/tok/$split.$lang" \
                "$WORK/bpe/$split.$lang"
        done
    done
    for direction in $DIRECTIONS; do
        local src=${direction%-*} tgt=${direction#*-} dest=$WORK/data-bin/$direction binarize_inputs=() databin_outputs=()
        local stream
        for split in "${SPLITS[@]}"; do
            # every file tree-fairseq-preprocess writes, so that a data-bin missing one is made again: each split's
            # streams (the text's, the trees' and with --heads the parents'), its target text, and below the
            # dictionaries and the parser record (not preprocess.log, fairseq's log of the run)
            for stream in "$src" "$tgt" "$src.nodes" "$src.spans" ${HEADS:+"$src.parents"}; do
                databin_outputs+=(--out "$dest/$split.$direction.$stream.bin"
                    --out "$dest/$split.$direction.$stream.idx")
            done
            databin_outputs+=(--out "$dest/$split.ref.$tgt")
            binarize_inputs+=("$WORK/bpe/$split.$src" "$WORK/bpe/$split.$tgt" "$WORK/trees/$split.tree.$src")
            [[ -z $HEADS ]] || binarize_inputs+=("$WORK/trees/$split.heads.$src")
            # the parser record, copied into the data-bin: another package or pipeline version can
            # give the same trees
            [[ ! -f $WORK/trees/$split.tree.$src.parser.json ]] || binarize_inputs+=("$WORK/trees/$split.tree.$src.parser.json")
            if [[ -z $LOCAL && -f $WORK/raw/$split.$tgt ]]; then
                binarize_inputs+=("$WORK/raw/$split.$tgt")
                databin_outputs+=(--out "$dest/$split.ref.raw.$tgt")
            fi
        done
        databin_outputs+=(--out "$dest/dict.$src.txt" --out "$dest/dict.$tgt.txt" --out "$dest/dict.$src.nodes.txt"
            --out "$dest/parser.$src.json")
        step "binarize-$direction" "${databin_outputs[@]}" \
            binarize "$src" "$tgt" -- "$JOINED" "$(fingerprint "${binarize_inputs[@]}")" \
            $(heads_key)
    done
    say "done. data-bins:"
    for direction in $DIRECTIONS; do
        echo "    $WORK/data-bin/$direction"
    done
}
