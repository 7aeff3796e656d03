#!/usr/bin/env bash
# IWSLT'13 English-French, both directions: data-bins en-fr and fr-en for --task tree_translation.
#
# The text steps of prepare-iwslt14.sh on the IWSLT 2013 TED talks (WIT3): transcripts without
# their XML, Moses-tokenised (sacremoses, escaping on), train cleaned (1-175 tokens, length ratio
# <= 1.5), lowercased; valid = dev2010, test = tst2010 (edit VALID_SETS / TEST_SETS below for
# other sets of the archive). Then the source side of each direction is parsed
# (tree-fairseq-parse), BPE is learnt jointly on train (32k merges, as Nguyen et al. 2020, appendix
# 7.4) and tree-fairseq-preprocess binarises each direction.
#
#   bash data-prep/prepare-iwslt13-en-fr.sh                 # download (needs the network)
#   bash data-prep/prepare-iwslt13-en-fr.sh --local DIR --parser balanced
#
# Resumable: run the same command again after an interruption; finished steps are skipped.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/iwslt.sh"

DATASET=iwslt13.en-fr
SRC=en
TGT=fr
SPLITS=(train valid test)
DIRECTIONS="en-fr fr-en"
BPE_TOKENS=32000
# WIT3's 2013 release (https://wit3.fbk.eu/2013-01); when the address moves, put en-fr.tgz into
# WORK/orig/ by hand.
URL=https://wit3.fbk.eu/archive/2013-01/texts/en/fr/en-fr.tgz
ARCHIVE=en-fr
VALID_SETS=(IWSLT13.TED.dev2010)
TEST_SETS=(IWSLT13.TED.tst2010)


download_and_tokenize() { iwslt_download_and_tokenize; }

parse_args "$@"
prepare
