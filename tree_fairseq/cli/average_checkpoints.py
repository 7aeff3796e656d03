"""Average the parameters of several fairseq checkpoints into one (what fairseq's own averaging
script does; that script ships with fairseq's sources, not with its wheels).

The averaged checkpoint is the first input (newest, when the inputs are picked from a directory)
with its ``model`` parameters replaced by the element-wise mean of all inputs' parameters. All
inputs must hold the same parameter names. Floating-point parameters are summed in float64 and
written back in their own dtype; integer buffers get the floor of the mean, as in fairseq.
An input that is no checkpoint (cut short by a run killed, or a disk that filled up, while it was
written) stops the run naming it, with the upper bound that averages the ones before it.
"""

import argparse
import os
import re
import sys


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tree-fairseq-average-checkpoints",
        description="Average the parameters of fairseq checkpoints: given files, or the last N epoch "
        "(checkpointN.pt) or update (checkpoint_E_U.pt) checkpoints of a directory. Writes one checkpoint.")
    parser.add_argument("--inputs", nargs="+", required=True,
                        help="checkpoint files, or one directory with --num-epoch-checkpoints/--num-update-checkpoints")
    parser.add_argument("--output", required=True, help="the averaged checkpoint to write")
    last = parser.add_mutually_exclusive_group()
    last.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpointN.pt of the directory")
    last.add_argument("--num-update-checkpoints", type=int,
                      help="average the last N checkpoint_E_U.pt of the directory")
    parser.add_argument("--checkpoint-upper-bound", type=int,
                        help="only checkpoints of epochs (or updates) <= this number")
    return parser


def last_checkpoints(directory: str, n: int, by_update: bool, upper_bound: int | None = None) -> list[str]:
    """The last ``n`` epoch (or update) checkpoints of ``directory``, newest first."""
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt" if by_update else r"checkpoint(\d+)\.pt")
    found = []
    for name in os.listdir(directory):
        match = pattern.fullmatch(name)
        if match and (upper_bound is None or int(match.group(1)) <= upper_bound):
            found.append((int(match.group(1)), os.path.join(directory, name)))
    if len(found) < n:
        kind = "update" if by_update else "epoch"
        raise ValueError(f"{directory}: {len(found)} {kind} checkpoints found, {n} asked for")
    return [path for _, path in sorted(found, reverse=True)[:n]]


def average_checkpoints(paths: list[str]) -> dict:
    """The first checkpoint with its model parameters replaced by the mean over ``paths``."""
    import torch

    from tree_fairseq.checkpoint_compat import load_checkpoint

    averaged = None
    sums: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for path in paths:
        try:
            state = load_checkpoint(path)
        except ValueError as error:
            raise ValueError(f"{error}: {_without(path)}") from None
        params = state["model"]
        if averaged is None:
            averaged = state
            dtypes = {name: p.dtype for name, p in params.items()}
        else:
            _check_same_model(params, sums, path, paths[0])
        for name, p in params.items():
            p = p.double() if p.is_floating_point() else p.long()
            sums[name] = sums[name] + p if name in sums else p.clone()
    n = len(paths)
    averaged["model"] = {
        name: (total / n if total.is_floating_point() else total // n).to(dtypes[name])
        for name, total in sums.items()
    }
    return averaged


def _without(path: str) -> str:
    """How to average without the unreadable checkpoint ``path``."""
    match = re.fullmatch(r"checkpoint(\d+)\.pt|checkpoint_\d+_(\d+)\.pt", os.path.basename(path))
    number = match and int(match.group(1) or match.group(2))
    bound = f", or stop below it with --checkpoint-upper-bound {number - 1}" if number else ""
    return f"average without it (give the others as --inputs{bound})"


def _check_same_model(params: dict, first: dict, path: str, first_path: str) -> None:
    """ValueError naming the first parameter in which ``path`` differs from ``first_path``."""
    for name in sorted(set(params) ^ set(first)):
        holder, other = (path, first_path) if name in params else (first_path, path)
        raise ValueError(f"{holder} has a parameter {name} that {other} has not: checkpoints of different models")
    for name, p in params.items():
        if p.shape != first[name].shape:
            raise ValueError(f"parameter {name} is {tuple(p.shape)} in {path} but {tuple(first[name].shape)} in "
                             f"{first_path}: checkpoints of different models")


def main(argv: list[str] | None = None) -> None:
    args = get_parser().parse_args(argv)
    try:
        if args.num_epoch_checkpoints or args.num_update_checkpoints:
            if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
                raise ValueError("--num-*-checkpoints needs exactly one directory as --inputs")
            paths = last_checkpoints(args.inputs[0], args.num_epoch_checkpoints or args.num_update_checkpoints,
                                     by_update=bool(args.num_update_checkpoints),
                                     upper_bound=args.checkpoint_upper_bound)
        else:
            paths = args.inputs
        print("averaging " + " ".join(paths), flush=True)
        state = average_checkpoints(paths)
    except (OSError, ValueError) as error:
        sys.exit(f"tree-fairseq-average-checkpoints: error: {error}")
    import torch  # only now: --help answers without it

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    torch.save(state, args.output + ".tmp")
    os.replace(args.output + ".tmp", args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
