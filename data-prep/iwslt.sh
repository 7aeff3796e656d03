#!/usr/bin/env bash
# The IWSLT download and tokenisation, shared by prepare-iwslt14.sh and prepare-iwslt13-en-fr.sh
# (source it after common.sh; it does nothing by itself).
#
# IWSLT (TED talks from WIT3), as fairseq's prepare-iwslt14.sh: a recipe sets URL, ARCHIVE (the
# archive's directory and language pair, e.g. de-en), TEST_SETS and VALID_SETS (xml file stems;
# no VALID_SETS: every 23rd train pair).

# The <seg> lines of an IWSLT xml file.
iwslt_segments() {
    grep '<seg id' "$1" | sed -e 's/<seg id="[0-9]*">\s*//g' -e 's/\s*<\/seg>\s*//g' |
        "${TEXT_TOOLS[@]}" one-line
}

# Train transcripts without their metadata lines and tags.
iwslt_train_text() {
    grep -v -e '<url>' -e '<talkid>' -e '<keywords>' "$1" |
        sed -e 's/<title>//g' -e 's/<\/title>//g' -e 's/<description>//g' -e 's/<\/description>//g' |
        "${TEXT_TOOLS[@]}" one-line
}

# tok/ may hold links to a --local directory of an earlier run: never write through them.
iwslt_tokenize_train() {
    local lang orig=$WORK/orig/$ARCHIVE
    rm -f "$WORK"/tok/{train,valid}.{$SRC,$TGT}
    for lang in "$SRC" "$TGT"; do
        echo "    \$ (train.tags.$ARCHIVE.$lang without metadata) | text_tools.py one-line | sacremoses -l $lang tokenize > orig/train.tok.$lang"
        iwslt_train_text "$orig/train.tags.$ARCHIVE.$lang" |
            sacremoses -l "$lang" -j "$THREADS" -q tokenize > "$WORK/orig/train.tok.$lang"
    done
    run "${TEXT_TOOLS[@]}" clean --src-in "$WORK/orig/train.tok.$SRC" --tgt-in "$WORK/orig/train.tok.$TGT" \
        --src-out "$WORK/orig/train.clean.$SRC" --tgt-out "$WORK/orig/train.clean.$TGT" \
        --min 1 --max 175 --ratio 1.5
    for lang in "$SRC" "$TGT"; do
        if ((${#VALID_SETS[@]})); then
            run "${TEXT_TOOLS[@]}" lowercase "$WORK/orig/train.clean.$lang" "$WORK/tok/train.$lang"
        else
            run "${TEXT_TOOLS[@]}" lowercase "$WORK/orig/train.clean.$lang" "$WORK/orig/train.lc.$lang"
            echo "    \$ every 23rd line of orig/train.lc.$lang to tok/valid.$lang, the others to tok/train.$lang"
            awk 'NR % 23 == 0' "$WORK/orig/train.lc.$lang" > "$WORK/tok/valid.$lang"
            awk 'NR % 23 != 0' "$WORK/orig/train.lc.$lang" > "$WORK/tok/train.$lang"
        fi
    done
}

# iwslt_tokenize_xml SPLIT STEM...: the <seg>s of the xml files, tokenised and lowercased; and
# untokenised but lowercased in raw/, the reference sacreBLEU scores the split against.
iwslt_tokenize_xml() {
    local split=$1 lang stem
    shift
    rm -f "$WORK"/tok/"$split".{$SRC,$TGT} "$WORK"/raw/"$split".{$SRC,$TGT}
    mkdir -p "$WORK/raw"
    for lang in "$SRC" "$TGT"; do
        echo "    \$ (<seg>s of $*, $lang) | text_tools.py one-line > orig/$split.seg.$lang"
        for stem in "$@"; do
            iwslt_segments "$WORK/orig/$ARCHIVE/$stem.$ARCHIVE.$lang.xml"
        done > "$WORK/orig/$split.seg.$lang"
        echo "    \$ (’ as ') < orig/$split.seg.$lang | sacremoses -l $lang tokenize | lowercase > tok/$split.$lang"
        straight_apostrophes < "$WORK/orig/$split.seg.$lang" |
            sacremoses -l "$lang" -j "$THREADS" -q tokenize > "$WORK/orig/$split.tok.$lang"
        "${TEXT_TOOLS[@]}" lowercase "$WORK/orig/$split.tok.$lang" "$WORK/tok/$split.$lang"
        run "${TEXT_TOOLS[@]}" lowercase "$WORK/orig/$split.seg.$lang" "$WORK/raw/$split.$lang"
    done
}

iwslt_download_and_tokenize() {
    download "$URL" "$WORK/orig/$ARCHIVE.tgz"
    step extract --out "$WORK/orig/$ARCHIVE" \
        run tar -xzf "$WORK/orig/$ARCHIVE.tgz" -C "$WORK/orig" -- "$(fingerprint "$WORK/orig/$ARCHIVE.tgz")"
    local orig=$WORK/orig/$ARCHIVE
    local train_outputs=(--out "$WORK/tok/train.$SRC" --out "$WORK/tok/train.$TGT")
    ((${#VALID_SETS[@]})) || train_outputs+=(--out "$WORK/tok/valid.$SRC" --out "$WORK/tok/valid.$TGT")
    local lang valid_outputs=() test_outputs=()
    for lang in "$SRC" "$TGT"; do
        valid_outputs+=(--out "$WORK/tok/valid.$lang" --out "$WORK/raw/valid.$lang")
        test_outputs+=(--out "$WORK/tok/test.$lang" --out "$WORK/raw/test.$lang")
    done
    step tokenize-train "${train_outputs[@]}" iwslt_tokenize_train -- "${VALID_SETS[*]}" \
        "$(fingerprint "$orig/train.tags.$ARCHIVE."{$SRC,$TGT})"
    if ((${#VALID_SETS[@]})); then
        step tokenize-valid "${valid_outputs[@]}" \
            iwslt_tokenize_xml valid "${VALID_SETS[@]}" -- "$(fingerprint "$orig/"*.xml)"
    fi
    step tokenize-test "${test_outputs[@]}" iwslt_tokenize_xml test "${TEST_SETS[@]}" -- "$(fingerprint "$orig/"*.xml)"
}
