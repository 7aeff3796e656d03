#!/usr/bin/env bash
# Gigaword headline generation (Rush et al. 2015): the data-bin article-title for
# --task tree_translation (joined dictionary; ROUGE with tree-fairseq-score --metrics rouge).
#
# The text is the usual preprocessed release of harvardnlp/sent-summary, as distributed by UniLM
# (org_data/{train,dev,test}.{src,tgt}.txt: 3.8M / 189k / 1951 pairs, already tokenised and
# lowercased, digits as #, rare words as UNK), so there is no Moses step. The pairs with an empty
# side or a token over 1,000 characters are dropped from the download's train and valid (test is kept
# whole); --local text is taken as it is, nothing dropped. The articles are parsed (tree-fairseq-parse --lang en),
# BPE is learnt jointly (30k merges) and tree-fairseq-preprocess binarises with one dictionary.
#
#   bash data-prep/prepare-gigaword.sh                      # download (needs the network)
#   bash data-prep/prepare-gigaword.sh --local DIR          # DIR/{train,valid,test}.{article,title}
#
# Resumable: run the same command again after an interruption; finished steps are skipped.
#
# Time and disk (docs/performance.md, "Data preparation", measured on IWSLT'14's line lengths;
# Gigaword's articles are longer, scale by their mean length): parsing with spaCy's small English
# pipeline and binarising take about 3.2 hours on one core, 0.40 on 8 and 0.10 on 32 (--workers,
# default: every core; each spaCy worker holds ~360 MB); BPE comes on top. Disk: about 5 GB in
# WORK besides the download.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DATASET=gigaword
SRC=article
TGT=title
PARSE_LANG=en
SPLITS=(train valid test)
DIRECTIONS="article-title"
BPE_TOKENS=30000
JOINED=yes
# A Google Drive file: when the download fails, fetch it in a browser (or with gdown) from the page
# below into WORK/orig/gigaword.archive.
URL="https://drive.usercontent.google.com/download?id=1USoQ8lJgN8kAWnUnRrupMGrPMLlDVqlV&export=download&confirm=t"
DOWNLOAD_HINT="the page is https://drive.google.com/open?id=1USoQ8lJgN8kAWnUnRrupMGrPMLlDVqlV"

extract_archive() {
    run "${PYTHON:-python3}" - "$WORK/orig/gigaword.archive" "$WORK/orig" <<'PY'
import sys, tarfile, zipfile
archive, dest = sys.argv[1:]
if tarfile.is_tarfile(archive):
    with tarfile.open(archive) as f:
        f.extractall(dest, filter="data")
elif zipfile.is_zipfile(archive):
    with zipfile.ZipFile(archive) as f:
        f.extractall(dest)
else:
    sys.exit(f"{archive} is neither a tar nor a zip archive (a Google Drive web page instead?): delete it "
             "and fetch https://drive.google.com/open?id=1USoQ8lJgN8kAWnUnRrupMGrPMLlDVqlV by hand")
PY
}

# tok/ may hold links to a --local directory of an earlier run: never write through them.
copy_text() {
    local split from org=$WORK/orig/org_data
    rm -f "$WORK"/tok/*.{$SRC,$TGT}
    for split in train valid test; do
        from=$split
        [[ $split != valid ]] || from=dev
        [[ -f $org/$from.src.txt ]] || die "$org/$from.src.txt missing: not the expected archive"
        if [[ $split == test ]]; then
            run cp "$org/test.src.txt" "$WORK/tok/test.$SRC"
            run cp "$org/test.tgt.txt" "$WORK/tok/test.$TGT"
        else
            run "${TEXT_TOOLS[@]}" clean --src-in "$org/$from.src.txt" --tgt-in "$org/$from.tgt.txt" \
                --src-out "$WORK/tok/$split.$SRC" --tgt-out "$WORK/tok/$split.$TGT" \
                --min 1 --max 1000000 --ratio 1000000
        fi
    done
}

download_and_tokenize() {
    download "$URL" "$WORK/orig/gigaword.archive"
    step extract --out "$WORK/orig/org_data" extract_archive -- "$(fingerprint "$WORK/orig/gigaword.archive")"
    local split lang text=()
    for split in "${SPLITS[@]}"; do
        for lang in "$SRC" "$TGT"; do text+=(--out "$WORK/tok/$split.$lang"); done
    done
    step text "${text[@]}" copy_text -- "$(fingerprint "$WORK/orig/org_data/"*.txt)"
}

parse_args "$@"
prepare
