#!/usr/bin/env bash
# IWSLT'14 German-English, both directions: data-bins de-en and en-de for --task tree_translation.
#
# Text as fairseq's examples/translation/prepare-iwslt14.sh makes it: TED talk transcripts without
# their XML, Moses-tokenised (sacremoses, escaping on), train cleaned (1-175 tokens, length ratio
# <= 1.5), lowercased; valid = every 23rd train pair, test = dev2010 + dev2012 + tst2010-2012.
# Then the source side of each direction is parsed (tree-fairseq-parse), BPE is learnt jointly on
# train (32k merges, as Nguyen et al. 2020, appendix 7.4) and applied, and tree-fairseq-preprocess
# binarises each direction.
#
#   bash data-prep/prepare-iwslt14.sh                       # download (needs the network)
#   bash data-prep/prepare-iwslt14.sh --local DIR --parser balanced --bpe-codes DIR/bpe.codes
#
# Resumable: run the same command again after an interruption; finished steps are skipped.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/iwslt.sh"

DATASET=iwslt14.de-en
SRC=de
TGT=en
SPLITS=(train valid test)
DIRECTIONS="de-en en-de"
BPE_TOKENS=32000
URL=http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz


# The IWSLT text steps are in common.sh (iwslt_download_and_tokenize).
ARCHIVE=de-en
VALID_SETS=()  # valid: every 23rd train pair
TEST_SETS=(IWSLT14.TED.dev2010 IWSLT14.TEDX.dev2012 IWSLT14.TED.tst2010 IWSLT14.TED.tst2011 IWSLT14.TED.tst2012)
download_and_tokenize() { iwslt_download_and_tokenize; }

parse_args "$@"
prepare
