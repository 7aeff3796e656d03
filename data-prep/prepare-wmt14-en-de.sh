#!/usr/bin/env bash
# WMT'14 English-German: the data-bin en-de for --task tree_translation (joined dictionary).
#
# Text as fairseq's examples/translation/prepare-wmt14en2de.sh makes it: Europarl v7, Common Crawl
# and News Commentary v9, punctuation-normalised (control characters removed) and Moses-tokenised
# with aggressive dash splits (sacremoses); test = newstest2014 (full). One deviation, so that no
# sentence is parsed only to be dropped: the pairs are cleaned (1-250 tokens, length ratio <= 1.5)
# on the tokenised words, before parsing and BPE, where fairseq cleans the BPE pieces; valid is
# then every 100th pair of the cleaned train (the download only: --local text is taken as it is). The
# English side is parsed (tree-fairseq-parse; about 4.5M sentences: run stanza on a GPU), BPE is learnt
# jointly (32k merges, as Nguyen et al. 2020, appendix 7.4) and tree-fairseq-preprocess binarises with
# one dictionary.
#
#   bash data-prep/prepare-wmt14-en-de.sh                   # download (needs the network)
#   bash data-prep/prepare-wmt14-en-de.sh --local DIR --parser stanza
#
# Resumable: run the same command again after an interruption; finished steps are skipped.
#
# Time and disk (docs/performance.md, "Data preparation", measured on IWSLT'14's line lengths):
# parsing with spaCy's small English pipeline and binarising take about 3.8 hours on one core,
# 0.48 on 8 and 0.12 on 32 (--workers, default: every core; each spaCy worker holds ~360 MB);
# the download, Moses tokenisation and BPE come on top. Disk: about 6 GB in WORK besides the
# downloads (2 GB of data-bin, 1.2 GB of trees, 2 GB of tokenised and BPE'd text).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DATASET=wmt14.en-de
SRC=en
TGT=de
SPLITS=(train valid test)
DIRECTIONS="en-de"
BPE_TOKENS=32000
JOINED=yes
URLS=(
    http://statmt.org/wmt13/training-parallel-europarl-v7.tgz
    http://statmt.org/wmt13/training-parallel-commoncrawl.tgz
    http://statmt.org/wmt14/training-parallel-nc-v9.tgz
    http://statmt.org/wmt14/test-full.tgz
)
CORPORA=(training/europarl-v7.de-en commoncrawl.de-en training/news-commentary-v9.de-en)

extract_all() {
    local url
    for url in "${URLS[@]}"; do
        run tar -xzf "$WORK/orig/$(basename "$url")" -C "$WORK/orig"
    done
}

# tok/ may hold links to a --local directory of an earlier run: never write through them.
tokenize_train() {
    local lang corpus files
    rm -f "$WORK"/tok/{train,valid}.{$SRC,$TGT}
    for corpus in "${CORPORA[@]}"; do
        same_line_counts "corpus $corpus" "$WORK/orig/$corpus."{$SRC,$TGT}
    done
    for lang in "$SRC" "$TGT"; do
        # joined by one-line, not cat: a corpus whose last line lacks its newline would glue it to the next's first
        echo "    \$ text_tools.py one-line ${CORPORA[*]/%/.$lang} | sacremoses -l $lang normalize -c tokenize -a" \
            "> orig/train.tok.$lang"
        files=("${CORPORA[@]/#/$WORK/orig/}")
        "${TEXT_TOOLS[@]}" one-line "${files[@]/%/.$lang}" |
            sacremoses -l "$lang" -j "$THREADS" -q normalize -c tokenize -a > "$WORK/orig/train.tok.$lang"
    done
    run "${TEXT_TOOLS[@]}" clean --src-in "$WORK/orig/train.tok.$SRC" --tgt-in "$WORK/orig/train.tok.$TGT" \
        --src-out "$WORK/orig/train.clean.$SRC" --tgt-out "$WORK/orig/train.clean.$TGT" \
        --min 1 --max 250 --ratio 1.5
    for lang in "$SRC" "$TGT"; do
        echo "    \$ every 100th line of orig/train.clean.$lang to tok/valid.$lang, the others to tok/train.$lang"
        awk 'NR % 100 == 0' "$WORK/orig/train.clean.$lang" > "$WORK/tok/valid.$lang"
        awk 'NR % 100 != 0' "$WORK/orig/train.clean.$lang" > "$WORK/tok/train.$lang"
    done
}

# The test set tokenised, and untokenised in raw/: the reference sacreBLEU scores it against.
tokenize_test() {
    local lang side
    rm -f "$WORK"/tok/test.{$SRC,$TGT} "$WORK"/raw/test.{$SRC,$TGT}
    mkdir -p "$WORK/raw"
    for lang in "$SRC" "$TGT"; do
        side=ref
        [[ $lang != "$SRC" ]] || side=src
        echo "    \$ (<seg>s of newstest2014-deen-$side.$lang.sgm) | text_tools.py one-line > raw/test.$lang"
        grep '<seg id' "$WORK/orig/test-full/newstest2014-deen-$side.$lang.sgm" |
            sed -e 's/<seg id="[0-9]*">\s*//g' -e 's/\s*<\/seg>\s*//g' |
            "${TEXT_TOOLS[@]}" one-line > "$WORK/raw/test.$lang"
        echo "    \$ (’ as ') < raw/test.$lang | sacremoses -l $lang tokenize -a > tok/test.$lang"
        straight_apostrophes < "$WORK/raw/test.$lang" |
            sacremoses -l "$lang" -j "$THREADS" -q tokenize -a > "$WORK/tok/test.$lang"
    done
}

download_and_tokenize() {
    local url archives=()
    for url in "${URLS[@]}"; do
        download "$url" "$WORK/orig/$(basename "$url")"
        archives+=("$WORK/orig/$(basename "$url")")
    done
    local corpora=() corpus extracted=(--out "$WORK/orig/test-full")
    for corpus in "${CORPORA[@]}"; do
        corpora+=("$WORK/orig/$corpus".{$SRC,$TGT})
        extracted+=(--out "$WORK/orig/$corpus.$SRC" --out "$WORK/orig/$corpus.$TGT")
    done
    step extract "${extracted[@]}" extract_all -- "$(fingerprint "${archives[@]}")"
    step tokenize-train --out "$WORK/tok/train.$SRC" --out "$WORK/tok/train.$TGT" --out "$WORK/tok/valid.$SRC" \
        --out "$WORK/tok/valid.$TGT" tokenize_train -- "$(fingerprint "${corpora[@]}")"
    step tokenize-test --out "$WORK/tok/test.$SRC" --out "$WORK/tok/test.$TGT" --out "$WORK/raw/test.$SRC" \
        --out "$WORK/raw/test.$TGT" tokenize_test -- "$(fingerprint "$WORK/orig/test-full/newstest2014-deen-"*.sgm)"
}

parse_args "$@"
prepare
