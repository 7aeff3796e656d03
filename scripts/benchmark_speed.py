#!/usr/bin/env python
"""Speed and memory of a tree model against fairseq's transformer.

``--tree-arch`` names any architecture of this package: the Tree Transformer (default),
``constituent_transformer_*``, ``treeformer_*``, ``tree_pe_transformer_*``,
``tree_composition_transformer_*`` or ``pascal_transformer_*``. The targets printed are the
project's targets for the Tree Transformer; for the other methods only the training one (measured
>= 0.9 x ideal; >= 0.95 for PASCAL, whose method is a small elementwise addition to the
transformer) is a target, and the rest are reported for comparison.

Reads a tree data-bin (made with the README's tree-fairseq-parse / tree-fairseq-preprocess
commands; for PASCAL, which reads each source token's dependency parent, one with parents:
tree-fairseq-parse --heads); writes nothing, prints one report. In one run, with the same
dimensions for both models and the same batches (fairseq's own batching of the tree model's task,
``--task tree_translation``, or ``--task dependency_translation`` for PASCAL; the transformer gets
them without the tree and parent keys, i.e. exactly what ``--task translation`` collates for those
sentences):

1. trains fairseq's ``transformer`` (``--baseline-arch``) and the tree model
   (``--tree-arch``) with fairseq's Trainer (Adam, label_smoothed_cross_entropy 0.1, the IWSLT
   recipe) for ``--warmup`` untimed and ``--updates`` timed updates, alternating the models
   update by update (ABBA), and compares training target words per second (fairseq's ``wps``)
   with the ideal ratio: FLOPs of one training step (forward + backward, counted by
   ``torch.utils.flop_counter.FlopCounterMode``, attention on the math backend, which it can
   count) of the transformer divided by the tree transformer's, summed over the same batches.
   The counter counts matrix products; a method whose own work is elementwise says how much
   (PASCAL: its Gaussian weights and their product with the scores of its parent-scaled heads,
   :mod:`tree_fairseq.analysis.benchmark_models`), and that is added to its FLOPs.
   Target: measured >= 0.9 x ideal (0.95 for PASCAL);
2. generation sentences per second with fairseq's SequenceGenerator (``task.build_generator``,
   ``task.inference_step``; beam 5) on the same valid sentences and batches. By default every
   hypothesis is forced to the same length (``min_len = max_len``: the mean reference length),
   so that both models do the same decoding work however little they were trained;
   ``--free-length`` uses fairseq-generate's stopping (max-len-a 0, max-len-b 200) instead.
   Target: ratio >= 0.8. As for training, the ideal ratio is printed too: the FLOPs of generating
   the same batches (encoder and every decoder step, counted the same way) of the transformer
   divided by the tree model's, with measured / ideal (>= 0.9: no overhead beyond the work the
   model's own equations ask for, e.g. Treeformer's decoder attending to every chart cell);
3. peak memory of a training step (total, and above the resident parameters and Adam
   state). Target: ratio <= 1.5;
4. peak memory of one encoder forward over synthetic sentences of 16, 32, 64, 128 and 256 tokens
   with balanced trees, with autograd (training) and without (inference). Target: growth from
   16 to 256 no worse than 2x the transformer's.

Memory: on CUDA, ``torch.cuda.max_memory_allocated``; on CPU, the running sum of the CPU
allocator's allocation and free events recorded by ``torch.profiler`` (``profile_memory=True``),
checked at start-up on allocations of known size. The profiler does not see the release of memory
allocated before it started, so gradients are freed before a measured step. (On torch 2.13 this
agreed to 0.1 MiB with ``torch.distributed._tools.mem_tracker.MemTracker`` on training steps and
encoder forwards of both models.)

Speeds are wall-clock. On a CPU shared with other jobs they are noisy even with the models
alternated: the report adds the same ratios on the process CPU clock, the spread of the ratios of
back-to-back batch pairs, the ratio in each half of the training and each generation round,
and the load average, so that a reader can tell noise from a real gap.
On a shared CPU, ``--threads 1`` gives much steadier ratios: no thread waits for a partner thread
that another job has descheduled.

Exit status 0 whether targets pass or fail; 1 if a measurement could not be made.

Example (CPU, small dimensions; under 5 minutes on a busy 2-core machine)::

    python scripts/benchmark_speed.py data-bin/iwslt14.de-en \\
        --embed-dim 256 --ffn-dim 512 --heads 4 --encoder-layers 3 --decoder-layers 3 \\
        --updates 30 --max-tokens 2048 --threads 1

On a GPU, leave the dimensions out to benchmark the architectures as registered.
"""

import argparse
import logging
import os
import sys

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # above kineto's highest level: no profiler start/stop lines

import torch  # noqa: E402

logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING, stream=sys.stderr)

# the measurements and the report (importing it registers the plugin with fairseq)
from tree_fairseq.cli import ArgumentParser
from tree_fairseq.analysis.benchmark_speed import measure, report, summary  # noqa: E402
from tree_fairseq.cli.argtypes import nonnegative_int, positive_int, probability, seed  # noqa: E402
from tree_fairseq.cli.files import check_output, write_json  # noqa: E402


def lengths(text: str) -> str:
    """--lengths: whole numbers of 1 or more, comma-separated (kept as the text measure() reads)."""
    for length in text.split(","):
        positive_int(length)
    return text


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="tree data-bin (tree-fairseq-preprocess)")
    parser.add_argument("--source-lang", default=None, help="default: inferred from the data-bin, as fairseq")
    parser.add_argument("--target-lang", default=None)
    parser.add_argument("--baseline-arch", default="transformer_iwslt_de_en")
    parser.add_argument("--tree-arch", default="tree_transformer_iwslt_de_en")
    dims = parser.add_argument_group("dimensions, applied to both models (default: the architectures')")
    dims.add_argument("--embed-dim", type=positive_int, help="encoder and decoder embedding dimension")
    dims.add_argument("--ffn-dim", type=positive_int, help="encoder and decoder feed-forward dimension")
    dims.add_argument("--heads", type=positive_int, help="encoder and decoder attention heads")
    dims.add_argument("--encoder-layers", type=nonnegative_int)
    dims.add_argument("--decoder-layers", type=positive_int)
    train = parser.add_argument_group("training")
    train.add_argument("--updates", type=positive_int, default=30, help="timed updates per model (default: 30)")
    train.add_argument("--warmup", type=nonnegative_int, default=5, help="untimed updates per model first (default: 5)")
    train.add_argument("--max-tokens", type=positive_int, default=4096,
                       help="batch size as in fairseq-train; tree_translation counts leaves + nodes, "
                            "dependency_translation text tokens (default: 4096)")
    train.add_argument("--dropout", type=probability, default=0.3, help="(default: 0.3, the IWSLT recipe)")
    train.add_argument("--fp16", action="store_true", help="fairseq's --fp16 (CUDA only)")
    train.add_argument("--flop-batches", type=positive_int, default=5,
                       help="timed batches whose training-step FLOPs are counted (default: 5)")
    train.add_argument("--memory-batches", type=positive_int, default=3,
                       help="timed batches whose training-step peak memory is measured; the max is kept (default: 3)")
    gen = parser.add_argument_group("generation")
    gen.add_argument("--gen-split", default="valid")
    gen.add_argument("--gen-sentences", type=positive_int, default=128,
                     help="first N sentences of --gen-split (default: 128)")
    gen.add_argument("--gen-batch-size", type=positive_int, default=32, help="sentences per batch (default: 32)")
    gen.add_argument("--beam", type=positive_int, default=5)
    gen.add_argument("--gen-rounds", type=positive_int, default=2,
                     help="times each batch is generated per model, alternating (default: 2)")
    gen.add_argument("--free-length", action="store_true",
                     help="stop hypotheses as fairseq-generate does (max-len-a 0, max-len-b 200) instead of "
                          "forcing every hypothesis to the mean reference length")
    sweep = parser.add_argument_group("encoder memory over source length")
    sweep.add_argument("--lengths", type=lengths, default="16,32,64,128,256",
                       help="source lengths in tokens (default: 16,...,256)")
    sweep.add_argument("--sweep-batch-size", type=positive_int, default=16, help="sentences per batch (default: 16)")
    parser.add_argument("--seed", type=seed, default=1)
    parser.add_argument("--cpu", action="store_true", help="use the CPU even when CUDA is available")
    parser.add_argument("--threads", type=positive_int, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--json", metavar="PATH",
                        help="also write the run's ratios and raw figures to PATH as JSON (scripts/benchmark_all.py "
                             "reads them)")
    a = parser.parse_args(argv)
    if a.json:
        try:  # before the measurements, which take minutes
            check_output("--json", a.json, [("DATA", a.data)])
        except ValueError as error:
            parser.error(str(error))
    return a


def main():
    a = parse_args()
    if a.fp16 and not (torch.cuda.is_available() and not a.cpu):
        sys.exit("--fp16 needs CUDA")
    if a.threads:
        torch.set_num_threads(a.threads)
    measurements = measure(a)
    report(a, measurements)
    if a.json:
        write_json(a.json, summary(a, measurements))
    return 1 if measurements.errors else 0


if __name__ == "__main__":
    sys.exit(main())
