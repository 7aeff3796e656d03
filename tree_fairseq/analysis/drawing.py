"""Draw one source tree with the decoder's cross-attention weights on its nodes and leaves (PNG).

Sentence ``--index`` of a data-bin split is scored with its reference (teacher forcing) by a
tree_transformer checkpoint; the head-averaged cross-attention weights of ``--layer`` (or the mean
of all decoder layers) are averaged over the target tokens (or taken at ``--target-position``).
The tree is drawn with the leaves (BPE pieces, then EOS) on a line at the bottom and every node
above its span, at the height of its subtree; each node and leaf is labelled with its weight
(percent of the attention of one target token) and coloured from the lowest to the highest weight. Needs matplotlib (pip install
"tree_fairseq[analysis]").

    python scripts/draw_tree_attention.py DATA-BIN --path checkpoint_best.pt --index 3 --output tree.png
"""

import argparse
import logging
import sys

import torch

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.analysis.attention import add_checkpoint_arguments, checkpoint_inputs, load, recording
from tree_fairseq.cli.argtypes import nonnegative_int, positive_int
from tree_fairseq.cli.files import check_output, replacing


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description="Draw a source tree of a data-bin split with the cross-attention weights of a "
        "tree_transformer checkpoint on its nodes and leaves, to a PNG file.")
    add_checkpoint_arguments(parser)
    parser.add_argument("--index", type=nonnegative_int, default=0, help="sentence number in the split (default 0)")
    parser.add_argument("--layer", type=positive_int, help="decoder layer, 1-based (default: the mean of all layers)")
    parser.add_argument("--target-position", type=nonnegative_int,
                        help="one target token, 0-based (default: the mean over the target tokens)")
    parser.add_argument("--output", required=True, help="the PNG file to write, named *.png (written as named)")
    return parser


def sentence_attention(model, task, subset: str, index: int, layer: int | None, position: int | None):
    """``(source pieces incl. EOS, node labels, node spans (m, 2), weights (m + n,), target string)``."""
    dataset = task.dataset(subset)
    if not 0 <= index < len(dataset):
        raise ValueError(f"--index {index}: {subset!r} has {len(dataset)} sentences")
    sample = dataset.collater([dataset[index]])
    if next(model.parameters()).is_cuda:
        from fairseq import utils

        sample = utils.move_to_cuda(sample)
    with torch.no_grad(), recording(model) as records:
        model(**sample["net_input"])
    per_layer = torch.stack([weights[0] for [(weights, _)] in records])  # (L, T, m + n)
    if layer is not None:
        if not 1 <= layer <= len(per_layer):
            raise ValueError(f"--layer {layer}: the decoder has {len(per_layer)} layers")
        weights = per_layer[layer - 1]
    else:
        weights = per_layer.mean(0)
    target = sample["target"][0]
    if position is not None:
        if not 0 <= position < len(target):
            raise ValueError(f"--target-position {position}: the target has {len(target)} tokens")
        weights = weights[position]
    else:
        weights = weights.mean(0)
    net_input = sample["net_input"]
    pieces = [task.source_dictionary[i] for i in net_input["src_tokens"][0].tolist()]
    labels = [task.node_dictionary[i] for i in net_input["src_node_labels"][0].tolist()]
    spans = net_input["src_node_spans"][0].cpu()
    target_text = task.target_dictionary.string(target)
    if position is not None:
        target_text += f"   [target token {position}: {task.target_dictionary[target[position]]}]"
    return pieces, labels, spans, weights.cpu(), target_text


def tree_layout(num_leaves: int, spans: torch.Tensor):
    """Positions ``(x, y)`` of nodes (bottom-up order) and leaves, and the parent of each node and
    leaf (None at the root and outside every span, like EOS)."""
    spans = [tuple(span) for span in spans.tolist()]
    node_parent: list[int | None] = []
    for i, (start, end) in enumerate(spans):
        # Nodes are stored bottom-up: the first later node containing a node is its parent.
        node_parent.append(next((j for j in range(i + 1, len(spans))
                                 if spans[j][0] <= start and end <= spans[j][1]), None))
    leaf_parent = []
    for leaf in range(num_leaves):
        containing = [j for j, (start, end) in enumerate(spans) if start <= leaf <= end]
        leaf_parent.append(min(containing, key=lambda j: spans[j][1] - spans[j][0]) if containing else None)
    height = [1] * len(spans)
    for i, parent in enumerate(node_parent):
        if parent is not None:
            height[parent] = max(height[parent], height[i] + 1)
    node_xy = [((start + end) / 2, height[i]) for i, (start, end) in enumerate(spans)]
    leaf_xy = [(float(leaf), 0.0) for leaf in range(num_leaves)]
    return node_xy, leaf_xy, node_parent, leaf_parent


def draw(pieces, labels, spans, weights, title: str, output: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError('matplotlib is not installed: pip install "tree_fairseq[analysis]" (or matplotlib)') from None
    num_nodes = len(labels)
    node_xy, leaf_xy, node_parent, leaf_parent = tree_layout(len(pieces), spans)
    node_weights, leaf_weights = weights[:num_nodes].tolist(), weights[num_nodes:].tolist()
    low, high = weights.min().item(), weights.max().item()
    cmap = plt.get_cmap("Reds")
    height = max((y for _, y in node_xy), default=0)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(pieces)), 1.6 + 1.1 * (height + 1)))
    for xy, parent in list(zip(node_xy, node_parent)) + list(zip(leaf_xy, leaf_parent)):
        if parent is not None:
            px, py = node_xy[parent]
            ax.plot([xy[0], px], [xy[1], py], color="0.7", linewidth=1, zorder=1)
    for (x, y), text, weight in list(zip(node_xy, labels, node_weights)) + list(zip(leaf_xy, pieces, leaf_weights)):
        ax.text(x, y, f"{text}\n{100 * weight:.1f}%", ha="center", va="center", fontsize=8, zorder=2,
                bbox=dict(boxstyle="round,pad=0.3", facecolor=cmap(0.05 + 0.75 * (weight - low) / max(high - low, 1e-9)),
                          edgecolor="0.3" if y > 0 else "0.6"))
    ax.set_xlim(-0.8, len(pieces) - 0.2)
    ax.set_ylim(-0.7, height + 0.7)
    ax.axis("off")
    ax.set_title(title, fontsize=9, wrap=True)
    fig.tight_layout()
    try:
        with replacing(output) as partial:  # whole or not at all, at exactly the path given
            fig.savefig(partial, dpi=150, format="png")
    finally:
        plt.close(fig)


def check_png_output(output: str, inputs) -> None:
    """Refuse an --output not named *.png (matplotlib added .png to a name without a suffix, and
    wrote a JPEG for *.jpg: neither was the PNG at the path said), or that files.check_output refuses."""
    if not output.lower().endswith(".png"):
        raise ValueError(f"--output {output}: the drawing is a PNG; name a file ending in .png")
    check_output("--output", output, inputs)


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, force=True)  # importing fairseq set the root logger to DEBUG
    try:
        check_png_output(args.output, checkpoint_inputs(args.data, args.path))  # before the work
        model, task = load(args.data, args.path, args.subset, args.cpu)
        pieces, labels, spans, weights, target = sentence_attention(
            model, task, args.subset, args.index, args.layer, args.target_position)
        which = f"layer {args.layer}" if args.layer else "mean of the decoder layers"
        nodes = 100 * weights[:len(labels)].sum().item()
        title = (f"{args.subset} #{args.index}, cross-attention ({which}): {nodes:.1f}% on nodes\n"
                 f"reference: {target}")
        draw(pieces, labels, spans, weights, title, args.output)
    except (OSError, ValueError) as error:
        sys.exit(f"draw_tree_attention.py: error: {error}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
