"""Share of the decoder's cross-attention on source nodes vs leaves, per decoder layer (the
analysis of Nguyen et al., ICLR 2020, Table 4), for a tree_transformer checkpoint.

The references of a split are scored with teacher forcing (no search); a forward hook on every decoder
layer's :class:`~tree_fairseq.modules.tree_attention.TreeCrossAttention` keeps its head-averaged
weights over ``[nodes; leaves]``. For each layer the script sums the weight on node
columns and on leaf columns (EOS is a leaf) over all target tokens of the split; each target
token's weights sum to 1, so the node share is also the mean over target tokens of the weight on
nodes. The ``uniform`` column is the node share that attention spread evenly over the keys would
give (nodes / (nodes + leaves) per sentence, weighted by target tokens), for reference.

    python scripts/attention_mass.py DATA-BIN --path checkpoints/tree/checkpoint_best.pt [--subset test]
"""

import argparse
import logging
import os
import sys
from contextlib import contextmanager

import torch

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.argtypes import positive_int
from tree_fairseq.cli.files import check_output, write_json


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """What every analysis of a trained model reads: the data-bin, the checkpoint, the split,
    the device (:func:`load` takes them)."""
    parser.add_argument("data", help="the data-bin (tree-fairseq-preprocess)")
    parser.add_argument("--path", required=True, help="a tree_transformer checkpoint")
    parser.add_argument("--subset", default="test", help="split (default: test)")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even when a GPU is present")


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description="Per decoder layer, the share of cross-attention mass on source nodes vs leaves of a "
        "tree_transformer checkpoint, over the references of a data-bin split (teacher forcing).")
    add_checkpoint_arguments(parser)
    parser.add_argument("--max-tokens", type=positive_int, default=4000, help="tokens per batch (default 4000)")
    parser.add_argument("--max-sentences", type=positive_int, metavar="N",
                        help="only the first N sentences of the split")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    return parser


def checkpoint_inputs(data: str, path: str) -> list[tuple[str, str]]:
    """The inputs of :func:`add_checkpoint_arguments` an output must not replace, as
    :func:`tree_fairseq.cli.files.check_output` takes them: the checkpoint and the data-bin's files."""
    inputs = [("--path", path)]
    if os.path.isdir(data):
        inputs += [(f"DATA {data}", os.path.join(data, name)) for name in sorted(os.listdir(data))
                   if os.path.isfile(os.path.join(data, name))]
    return inputs


def load(data: str, path: str, subset: str, cpu: bool):
    """The model (eval mode, on the GPU unless ``cpu``) and its task, with ``subset`` loaded."""
    import tree_fairseq
    from fairseq import checkpoint_utils

    tree_fairseq.register()  # the task and models; safe checkpoint loading

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": data})
    model = models[0].eval()
    if torch.cuda.is_available() and not cpu:
        model.cuda()
    task.load_dataset(subset)
    return model, task


def cross_attentions(model) -> list:
    """The decoder layers' :class:`~tree_fairseq.modules.tree_attention.TreeCrossAttention`."""
    from tree_fairseq.modules.tree_attention import TreeCrossAttention

    layers = getattr(getattr(model, "decoder", None), "layers", [])
    modules = [getattr(layer, "encoder_attn", None) for layer in layers]
    if not modules or not all(isinstance(m, TreeCrossAttention) for m in modules):
        raise ValueError("the model's decoder has no tree cross-attention (a tree_transformer checkpoint "
                         "trained without --no-tree-cross-attention is needed)")
    return modules


@contextmanager
def recording(model):
    """Within the block, ``records[l]`` collects ``(weights (B, T, m + n), m)`` of decoder layer ``l``
    at every forward pass.

    A forward pre-hook on each layer's cross-attention asks it for its head-averaged weights over
    ``[nodes; leaves]`` (which it computes anyway on the way to the decoder's alignment columns); a
    forward hook keeps them and, where the decoder had not asked for weights, hands it none, as
    without the hooks."""
    modules = cross_attentions(model)
    records: list[list[tuple[torch.Tensor, int]]] = [[] for _ in modules]
    asked: list[bool] = [False] * len(modules)

    def ask_for_weights(layer):
        def pre_hook(module, args, kwargs):
            asked[layer] = bool(kwargs.get("need_weights") or kwargs.get("need_head_weights"))
            return args, {**kwargs, "need_weights": True}
        return pre_hook

    def recorder(layer):
        def hook(module, args, kwargs, output):
            out, weights = output
            key = kwargs["key"] if "key" in kwargs else args[1]  # TreeSourceRows
            if weights.dim() == 4:  # need_head_weights: (1, B, T, m + n)
                weights = weights[0]
            records[layer].append((weights.detach(), key.source.nodes.size(1)))
            return output if asked[layer] else (out, None)
        return hook

    handles = []
    for layer, module in enumerate(modules):
        handles.append(module.register_forward_pre_hook(ask_for_weights(layer), with_kwargs=True))
        handles.append(module.register_forward_hook(recorder(layer), with_kwargs=True))
    try:
        yield records
    finally:
        for handle in handles:
            handle.remove()


def batches(task, model, subset: str, max_tokens: int, max_sentences: int | None = None):
    from fairseq import utils

    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset, max_tokens=max_tokens,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=True,
    ).next_epoch_itr(shuffle=False)
    device = next(model.parameters()).device
    seen = 0
    for sample in itr:
        if max_sentences is not None:
            keep = sample["id"].lt(max_sentences)
            if not keep.any():
                continue
            sample = _select(sample, keep)
        seen += len(sample["id"])
        yield utils.move_to_cuda(sample) if device.type == "cuda" else sample


def _select(sample, keep):
    def select(x):
        return x[keep] if torch.is_tensor(x) and x.dim() and x.size(0) == len(keep) else x
    return {key: ({k: select(v) for k, v in value.items()} if isinstance(value, dict) else select(value))
            for key, value in sample.items()}


def attention_mass(model, task, subset: str, max_tokens: int = 4000, max_sentences: int | None = None) -> dict:
    """``{"layers": [{"layer", "nodes", "leaves", "uniform"}...], "mean": {...}, "sentences", "tokens"}``,
    shares in percent."""
    pad = task.target_dictionary.pad()
    num_layers = len(cross_attentions(model))
    node_mass = torch.zeros(num_layers, dtype=torch.float64)
    leaf_mass = torch.zeros(num_layers, dtype=torch.float64)
    uniform = 0.0
    tokens = sentences = 0
    with torch.no_grad(), recording(model) as records:
        for sample in batches(task, model, subset, max_tokens, max_sentences):
            for record in records:
                record.clear()
            model(**sample["net_input"])
            target = sample["target"].ne(pad)  # (B, T)
            for layer, [(weights, num_nodes)] in enumerate(records):
                weights = weights.double() * target.unsqueeze(-1)
                node_mass[layer] += weights[..., :num_nodes].sum().cpu()
                leaf_mass[layer] += weights[..., num_nodes:].sum().cpu()
            net_input = sample["net_input"]
            keys_nodes = (~net_input["src_node_padding_mask"]).sum(1).double()
            keys_leaves = net_input["src_lengths"].double()
            uniform += float((keys_nodes / (keys_nodes + keys_leaves) * target.sum(1)).sum())
            tokens += int(target.sum())
            sentences += len(sample["id"])
    if not tokens:
        raise ValueError(f"no target tokens in {subset!r}")
    total = node_mass + leaf_mass
    layers = [{"layer": layer + 1, "nodes": float(100 * node_mass[layer] / total[layer]),
               "leaves": float(100 * leaf_mass[layer] / total[layer]), "uniform": 100 * uniform / tokens}
              for layer in range(num_layers)]
    mean = {key: sum(row[key] for row in layers) / num_layers for key in ("nodes", "leaves", "uniform")}
    return {"layers": layers, "mean": mean, "sentences": sentences, "tokens": tokens}


def report(result: dict) -> str:
    lines = [f"cross-attention mass over {result['sentences']} sentences, {result['tokens']} target tokens",
             "layer   nodes %  leaves %  uniform nodes %"]
    for row in result["layers"]:
        lines.append(f"{row['layer']:>5}  {row['nodes']:8.2f}  {row['leaves']:8.2f}  {row['uniform']:15.2f}")
    mean = result["mean"]
    lines.append(f"{'mean':>5}  {mean['nodes']:8.2f}  {mean['leaves']:8.2f}  {mean['uniform']:15.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, force=True)  # importing fairseq set the root logger to DEBUG
    try:
        if args.json:  # before the work: the checkpoint named as --json was overwritten
            check_output("--json", args.json, checkpoint_inputs(args.data, args.path))
        model, task = load(args.data, args.path, args.subset, args.cpu)
        result = attention_mass(model, task, args.subset, args.max_tokens, args.max_sentences)
    except (OSError, ValueError) as error:
        sys.exit(f"attention_mass.py: error: {error}")
    print(report(result))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
