"""Average the parameters of several fairseq checkpoints into one (what fairseq's own averaging
script does; that script ships with fairseq's sources, not with its wheels).

The averaged checkpoint is the first input (newest, when the inputs are picked from a directory)
with its ``model`` parameters replaced by the element-wise mean of all inputs' parameters. All
inputs must hold the same parameter names. Floating-point parameters are summed in float64 and
written back in their own dtype; integer buffers get the floor of the mean, as in fairseq.
An input that is no checkpoint (cut short by a run killed, or a disk that filled up, while it was
written) stops the run naming it, with the upper bound that averages the ones before it.

An input that is another input again stops the run naming both: the same file (by the same name or
another, a link), or the same training state (epoch, update) with the same parameters, which is
what fairseq's checkpoint_best.pt and checkpoint_last.pt are of an epoch checkpoint: given with
``--inputs SAVE-DIR/checkpoint*.pt``, that epoch would weigh two or three times in the mean.
Checkpoints of two runs at the same update are not the same checkpoint (their parameters differ).
"""

import argparse
import os
import re
import sys

from tree_fairseq.cli import ArgumentParser
from tree_fairseq.cli.argtypes import positive_int
from tree_fairseq.cli.files import check_output, replacing


def get_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="tree-fairseq-average-checkpoints",
        description="Average the parameters of fairseq checkpoints: given files, or the last N epoch "
        "(checkpointN.pt) or update (checkpoint_E_U.pt) checkpoints of a directory. Writes one checkpoint.")
    parser.add_argument("--inputs", nargs="+", required=True,
                        help="checkpoint files, or one directory with --num-epoch-checkpoints/--num-update-checkpoints")
    parser.add_argument("--output", required=True, help="the averaged checkpoint to write")
    last = parser.add_mutually_exclusive_group()
    last.add_argument("--num-epoch-checkpoints", type=positive_int, metavar="N",
                      help="average the last N checkpointN.pt of the directory")
    last.add_argument("--num-update-checkpoints", type=positive_int, metavar="N",
                      help="average the last N checkpoint_E_U.pt of the directory")
    parser.add_argument("--checkpoint-upper-bound", type=positive_int,
                        help="only checkpoints of epochs (or updates) <= this number (with --num-*-checkpoints)")
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

    from tree_fairseq.compat.checkpoints import load_checkpoint

    _check_distinct_files(paths)
    averaged = None
    sums: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    seen: dict[tuple, str] = {}  # (training state, parameters' digest) -> the input that has them
    for path in paths:
        try:
            state = load_checkpoint(path)
        except ValueError as error:
            raise ValueError(f"{error}: {_without(path)}") from None
        params = state["model"]
        training = _training_state(state)
        if training is not None:
            key = (training, _digest(params))
            if key in seen:
                copies = any(os.path.basename(p).startswith(("checkpoint_best", "checkpoint_last"))
                             for p in (path, seen[key]))
                raise ValueError(
                    f"{path} is the same checkpoint as {seen[key]} (the same training state: {_describe(training)}, "
                    "and the same parameters" + ("; checkpoint_best.pt and checkpoint_last.pt are copies of an epoch "
                                                 "checkpoint" if copies else "") +
                    "): it would weigh twice in the average. Give each checkpoint once (e.g. --inputs "
                    "SAVE-DIR/checkpoint[0-9]*.pt)")
            seen[key] = path
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


def _check_distinct_files(paths: list[str]) -> None:
    """ValueError naming an input given twice, by the same name or another (a link to it)."""
    files: dict[tuple[int, int], str] = {}
    for path in paths:
        if not os.path.exists(path):
            continue  # load_checkpoint says so
        stat = os.stat(path)
        key = (stat.st_dev, stat.st_ino)
        if key in files:
            if files[key] == path:
                raise ValueError(f"{path} is given twice: it would weigh twice in the average. Give each checkpoint "
                                 "once")
            raise ValueError(f"{path} is the file {files[key]}, given twice: it would weigh twice in the average. "
                             "Give each checkpoint once")
        files[key] = path


def _training_state(state: dict) -> tuple[int, int, int] | None:
    """(epoch, batches into it, updates) where fairseq's checkpoint says, None where it does not."""
    try:
        iterator = state["extra_state"]["train_iterator"]
        return (int(iterator["epoch"]), int(iterator.get("iterations_in_epoch", 0)),
                int(state["optimizer_history"][-1]["num_updates"]))
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _describe(training: tuple[int, int, int]) -> str:
    epoch, batches, updates = training
    where = f"epoch {epoch - 1} done" if batches == 0 else f"{batches} batches into epoch {epoch}"
    return f"{where}, {updates} updates"


def _digest(params: dict) -> str:
    """A digest of the parameters' names, shapes, types and values."""
    import hashlib

    import torch

    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(params):
        tensor = params[name]
        digest.update(f"{name} {tuple(tensor.shape)} {tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


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
    count = args.num_epoch_checkpoints or args.num_update_checkpoints  # argparse refuses 0 and less
    try:
        if count is not None:
            if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
                raise ValueError("--num-*-checkpoints needs exactly one directory as --inputs")
            paths = last_checkpoints(args.inputs[0], count, by_update=bool(args.num_update_checkpoints),
                                     upper_bound=args.checkpoint_upper_bound)
        else:
            if args.checkpoint_upper_bound is not None:
                raise ValueError("--checkpoint-upper-bound picks the checkpoints of a directory: it needs "
                                 "--num-epoch-checkpoints or --num-update-checkpoints (give only the files to average "
                                 "as --inputs)")
            for path in args.inputs:
                if os.path.isdir(path):
                    raise ValueError(f"--inputs {path} is a directory: give checkpoint files, or the directory with "
                                     "--num-epoch-checkpoints N or --num-update-checkpoints N")
            paths = args.inputs
        _check_output(args.output, paths)
        print("averaging " + " ".join(paths), flush=True)
        state = average_checkpoints(paths)
    except (OSError, ValueError) as error:
        sys.exit(f"tree-fairseq-average-checkpoints: error: {error}")
    import torch  # only now: --help answers without it

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with replacing(args.output) as partial:
        torch.save(state, partial)
    print(f"wrote {args.output}")


def _check_output(output: str, paths: list[str]) -> None:
    """Before any work: refuse an --output that is a folder or an input (files.check_output). A
    folder not there yet is made when the average is written, so it is refused only where a file
    stands in the way of making it."""
    folder = os.path.dirname(os.path.abspath(output))
    if os.path.isdir(folder):
        check_output("--output", output, [("--inputs", path) for path in paths])
        return
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"--output {output}: {folder} is a file, not a folder to write it in")


if __name__ == "__main__":
    main()
