"""Whether scripts/train.sh may resume a SAVE-DIR with a command: what it checks before fairseq-train
reads SAVE-DIR/checkpoint_last.pt.

    python tree_fairseq/cli/resume_check.py SAVE-DIR fairseq-train DATA-BIN FLAG ...

(run as a file, it imports fairseq only once its logging is quiet; with --hydra, train.sh gives the
fairseq-train flags of the same config and overrides) prints
nothing and exits 0 when the resume can go on, and otherwise stops with one line (exit status 2)
naming what to do, when

- checkpoint_last.pt is no checkpoint: cut short (a run killed, or a disk that filled up, while
  fairseq copied it there), damaged (every member's checksum is checked) or of another kind. The
  line names the newest readable checkpoint of SAVE-DIR to resume from instead;
- checkpoint_last.pt is of another model: another architecture (``--arch``), or the same one with
  other sizes (the ``*_dim``, ``*_layers`` and ``*_heads`` of its model config against those fairseq
  resolves for the command). fairseq would fail to load its parameters, or load them into a model
  that differs;
- checkpoint_last.pt is mid-epoch (saved with --save-interval-updates, or by a run stopped there)
  and the command builds other training batches: another ``--max-tokens``, ``--batch-size``,
  ``--required-batch-size-multiple``, ``--seed`` (the epoch's shuffle) or ``--batch-tokens``.
  fairseq resumes such a checkpoint by skipping as many batches of the epoch as it had trained on,
  batches that the command builds anew, so sentences of the epoch would be skipped or seen twice.
  From an end-of-epoch checkpoint (the next epoch at its first batch) nothing is skipped: the next
  epoch's batches are built afresh with the command's options, a deliberate change that is allowed
  (as with ``--reset-dataloader``, which does not resume the epoch);
- train.log is the log of another run. A run is its data-bin, task, architecture and language
  pair: the last command line of the log (``$ ...``, one per sitting of train.sh) naming another of
  these than the command is another run, whose checkpoint_last.pt fairseq would continue (or whose
  patience count would find it done, and train.sh would exit without training). Every other flag may
  change between sittings (a higher max_update, a smaller max_tokens at an epoch's end, ...); a
  data-bin given by another path to the same directory, or by a path that no longer exists, is taken
  as the same.
"""

import argparse
import logging
import os
import re
import sys

# Model options that change the parameters' shapes or what they compute.
_SIZE_KEYS = re.compile(r".*_(dim|layers|heads)")
# The options that build the training batches: (config group, key, fairseq-train flag).
_BATCH_KEYS = (("dataset", "max_tokens", "--max-tokens"), ("dataset", "batch_size", "--batch-size"),
               ("dataset", "required_batch_size_multiple", "--required-batch-size-multiple"),
               ("common", "seed", "--seed"), ("task", "batch_tokens", "--batch-tokens"))
# The options that make a run (fairseq-train flag, then the same for fairseq-hydra-train).
_RUN_KEYS = {"task": ("--task", "task._name"), "arch": ("--arch", "model._name"),
             "source_lang": ("--source-lang", "task.source_lang"), "target_lang": ("--target-lang", "task.target_lang")}


def check(save_dir: str, command: list[str]) -> str | None:
    """Why ``command`` (``fairseq-train DATA-BIN FLAG ...``) cannot resume ``save_dir`` (None: it can)."""
    last = os.path.join(save_dir, "checkpoint_last.pt")
    if os.path.exists(last):
        from tree_fairseq.compat.checkpoints import load_checkpoint

        try:
            state = load_checkpoint(last, mmap=True, verify=True)
        except ValueError as error:
            return f"{error}: {_resume_instead(save_dir)}"
        problem = _other_model(state, command)
        if problem:
            return (f"{save_dir} holds a checkpoint of another {problem}: choose another SAVE-DIR, or move "
                    f"{save_dir}/checkpoint*.pt and train.log away to train afresh there")
        problem = _other_batches_mid_epoch(state, command, save_dir)
        if problem:
            return problem
    return _other_run(os.path.join(save_dir, "train.log"), command)


def _resume_instead(save_dir: str) -> str:
    """What to do about an unreadable checkpoint_last.pt: resume from the newest readable checkpoint."""
    from tree_fairseq.compat.checkpoints import newest_readable_checkpoint

    last = os.path.join(save_dir, "checkpoint_last.pt")
    instead = newest_readable_checkpoint(save_dir, but=last)
    if instead is None:
        return "no other checkpoint of SAVE-DIR can be read: remove it to train from scratch"
    return f"resume from the newest readable checkpoint (cp {instead} {last}), or remove it to train from scratch"


def _other_model(state: dict, command: list[str]) -> str | None:
    """How the model of ``state`` differs from the one ``command`` trains (None: it does not)."""
    saved = _model_config(state)
    if saved is None:
        return None
    trained = _resolved_model_args(command)
    if trained is None:
        return None
    old, new = saved.get("_name") or saved.get("arch"), trained.get("arch")
    if old and new and old != new:
        return f"architecture: checkpoint_last.pt is {old}, this command trains {new}"
    differ = [key for key in sorted(saved) if _SIZE_KEYS.fullmatch(key) and key in trained
              and saved[key] is not None and trained[key] is not None and saved[key] != trained[key]]
    if not differ:
        return None
    def sizes(config: dict) -> str:
        return ", ".join(f"{key} {config[key]}" for key in differ)

    return (f"model size: checkpoint_last.pt is {old} with {sizes(saved)}, "
            f"this command trains {new} with {sizes(trained)}")


def _other_batches_mid_epoch(state: dict, command: list[str], save_dir: str) -> str | None:
    """Why resuming ``state`` (checkpoint_last.pt) mid-epoch with ``command`` would skip or repeat
    sentences of the epoch: the command builds other batches (None: it does not, or the checkpoint is
    at an epoch's end, or the command resets the dataloader)."""
    try:
        iterator = state["extra_state"]["train_iterator"]
        epoch, batches = int(iterator["epoch"]), int(iterator.get("iterations_in_epoch", 0))
    except (KeyError, TypeError, ValueError):
        return None
    if batches == 0 or "--reset-dataloader" in command:
        return None
    saved = _saved_config(state)
    trained = _resolved_model_args(command)
    if saved is None or trained is None:
        return None
    changed = [(flag, saved[(group, key)], trained[key]) for group, key, flag in _BATCH_KEYS
               if (group, key) in saved and key in trained and str(saved[(group, key)]) != str(trained[key])]
    if not changed:
        return None
    history = state.get("optimizer_history") or [{}]
    updates = history[-1].get("num_updates")
    at = f"at update {updates} ({batches} batches into epoch {epoch})" if updates is not None else (
        f"{batches} batches into epoch {epoch}")
    last = os.path.join(save_dir, "checkpoint_last.pt")
    before = os.path.join(save_dir, f"checkpoint{epoch - 1}.pt")
    instead = f" (cp {before} {last})" if os.path.exists(before) else ""
    changes = ", ".join(f"{flag} {_shown(old)} to {_shown(new)}" for flag, old, new in changed)
    return (f"{last} is mid-epoch, {at}, and this command changes {changes}: fairseq's resume skips the "
            f"epoch's first {batches} batches as this command builds them, so sentences of epoch {epoch} would be "
            f"skipped or seen twice. Resume with the same {' and '.join(flag for flag, _, _ in changed)}, or from an "
            f"end-of-epoch checkpoint{instead}")


def _shown(value) -> str:
    return "none" if value is None else str(value)


def _saved_config(state: dict) -> dict | None:
    """``{(group, key): value}`` of the run that saved ``state``, for the keys of :data:`_BATCH_KEYS`."""
    cfg = state.get("cfg")
    if cfg:
        return {(group, key): cfg[group][key] for group, key, _ in _BATCH_KEYS
                if cfg.get(group) and key in cfg[group]}
    args = state.get("args")
    if isinstance(args, argparse.Namespace):  # checkpoints of fairseq before its hydra configs
        return {(group, key): getattr(args, key) for group, key, _ in _BATCH_KEYS if hasattr(args, key)}
    return None


def _model_config(state: dict) -> dict | None:
    cfg = state.get("cfg")
    model = cfg.get("model") if cfg else None
    if model is None:
        model = state.get("args")
    if model is None:
        return None
    return dict(vars(model) if isinstance(model, argparse.Namespace) else model.items())


def _resolved_model_args(command: list[str]) -> dict | None:
    """The options of the command's model as fairseq resolves them (its architecture's defaults
    filled in); None when fairseq's parser refuses the command (fairseq-train will say why)."""
    from fairseq import options

    try:
        args = options.parse_args_and_arch(options.get_training_parser(), command[1:])
    except SystemExit:
        return None
    return vars(args)


def _other_run(log: str, command: list[str]) -> str | None:
    """Why ``log`` is the log of another run than ``command``'s (None: it is not, or cannot tell)."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            recorded = [line.rstrip("\n")[2:] for line in f if line.startswith("$ ")]
    except FileNotFoundError:
        return None
    if not recorded:
        return None
    before, now = run_of_line(recorded[-1]), run_of_args(command)
    differ = []
    if before.get("data") and now.get("data") and not _same_directory(before["data"], now["data"]):
        differ.append(f"data-bin {before['data']} (this command: {now['data']})")
    for key, (flag, _) in _RUN_KEYS.items():
        if before.get(key) and now.get(key) and before[key] != now[key]:
            differ.append(f"{flag} {before[key]} (this command: {now[key]})")
    if not differ:
        return None
    return (f"{log} is the log of another run: its last command trained {', '.join(differ)}. Resuming would "
            f"continue that run's checkpoint_last.pt. To start afresh, choose another SAVE-DIR, or move "
            f"{os.path.dirname(log) or '.'}/checkpoint*.pt and train.log away")


def run_of_args(command: list[str]) -> dict[str, str]:
    """Data-bin, task, architecture and languages of ``fairseq-train DATA-BIN FLAG ...``."""
    run = {"data": command[1]} if len(command) > 1 and not command[1].startswith("-") else {}
    for key, (flag, _) in _RUN_KEYS.items():
        if flag in command[:-1]:
            run[key] = command[len(command) - 1 - command[::-1].index(flag) + 1]
    return run


def run_of_line(line: str) -> dict[str, str]:
    """The same of a command line as train.sh logs it (its words joined by spaces): fairseq-train's
    data-bin is what comes before the first flag; fairseq-hydra-train's are its overrides."""
    program, _, rest = line.partition(" ")
    words = rest.split()
    if program.endswith("fairseq-hydra-train"):
        overrides = dict(word.lstrip("+").split("=", 1) for word in words if "=" in word)  # hydra's +KEY, ++KEY
        run = {key: overrides[override] for key, (_, override) in _RUN_KEYS.items() if override in overrides}
        if "task.data" in overrides:
            run["data"] = overrides["task.data"]
        return run
    if not program.endswith("fairseq-train"):
        return {}
    run = run_of_args([program, *words])
    run.pop("data", None)
    data = rest.split(" --", 1)[0].strip()
    if data and not data.startswith("-"):
        run["data"] = data
    return run


def _same_directory(recorded: str, given: str) -> bool:
    if recorded == given or not os.path.exists(recorded):
        return True
    try:
        return os.path.samefile(recorded, given)
    except OSError:
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="resume_check.py", description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("save_dir", help="the SAVE-DIR of scripts/train.sh (checkpoint_last.pt, train.log)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="fairseq-train DATA-BIN FLAG ...")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, force=True)  # fairseq's INFO lines, from its imports on
    problem = check(args.save_dir, args.command)
    if problem:
        print(f"train.sh: error: {problem}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
