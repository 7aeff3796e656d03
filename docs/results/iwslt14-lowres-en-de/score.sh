#!/usr/bin/env bash
# The figures of scores.json from the files beside this script (run it in this folder).
set -euo pipefail
cd "$(dirname "$0")"
sacrebleu ref.de -i transformer.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.fed-balanced.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.fed-unlabelled.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.fed-spacy.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.fed-spacy-shape.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.left.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.right.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i transformer.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i transformer.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.spacy.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.random.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.spacy.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.random.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.spacy.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.random.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i transformer.seed4.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.spacy.seed4.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.text-batches.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i transformer.seed5.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i pascal_transformer.spacy.seed5.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.text-batches.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.text-batches.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.text-batches.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.text-batches.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.text-batches.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.text-batches.seed4.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.seed4.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.seed4.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.text-batches.seed4.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.seed5.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.seed5.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.spacy.text-batches.seed5.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_transformer.balanced.text-batches.seed5.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.spacy.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.spacy.reversed-children.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_pe_transformer.spacy.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_pe_transformer.spacy.reversed-children.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.spacy.positions.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i constituent_transformer.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i treeformer.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_pe_transformer.balanced.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.balanced.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i treeformer.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.spacy.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.balanced.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i constituent_transformer.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.spacy.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_pe_transformer.balanced.seed2.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i tree_composition_transformer.balanced.seed3.hyp.de -m bleu chrf -w 2 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.fed-balanced.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.fed-unlabelled.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.fed-spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.fed-spacy-shape.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.left.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.right.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de transformer.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de transformer.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.random.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.random.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.spacy.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.random.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de transformer.seed4.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.spacy.seed4.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.text-batches.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de transformer.seed5.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de pascal_transformer.spacy.seed5.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.text-batches.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.text-batches.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.text-batches.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.text-batches.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.text-batches.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.text-batches.seed4.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.seed4.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.seed4.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.text-batches.seed4.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.seed5.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.seed5.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.spacy.text-batches.seed5.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_transformer.balanced.text-batches.seed5.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.spacy.reversed-children.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_pe_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_pe_transformer.spacy.reversed-children.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.spacy.positions.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de constituent_transformer.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de treeformer.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_pe_transformer.balanced.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.balanced.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de treeformer.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.balanced.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de constituent_transformer.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.spacy.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_pe_transformer.balanced.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.hyp.de tree_composition_transformer.balanced.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.balanced.hyp.de tree_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.spacy.hyp.de tree_transformer.spacy.fed-balanced.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.spacy.hyp.de tree_transformer.spacy.fed-unlabelled.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.balanced.hyp.de tree_transformer.balanced.fed-spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.balanced.hyp.de tree_transformer.balanced.fed-spacy-shape.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.left.hyp.de tree_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.right.hyp.de tree_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.balanced.seed2.hyp.de tree_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.seed2.hyp.de tree_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i transformer.seed2.hyp.de tree_transformer.balanced.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.spacy.hyp.de tree_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.balanced.hyp.de tree_transformer.balanced.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i pascal_transformer.random.hyp.de pascal_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i pascal_transformer.random.seed2.hyp.de pascal_transformer.spacy.seed2.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i pascal_transformer.random.seed3.hyp.de pascal_transformer.spacy.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_transformer.balanced.seed3.hyp.de tree_transformer.spacy.seed3.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_composition_transformer.spacy.hyp.de tree_composition_transformer.spacy.positions.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_pe_transformer.balanced.hyp.de tree_pe_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
sacrebleu ref.de -i tree_composition_transformer.balanced.hyp.de tree_composition_transformer.spacy.hyp.de -m bleu -w 2 --paired-bs --paired-bs-n 1000 --format json
