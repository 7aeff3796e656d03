"""The token dictionaries a run trained with, recorded in its SAVE-DIR: a data-bin whose
dictionaries changed since (re-made at the same path from other text, or another data-bin) would
give every embedding another word (same size), or fail to load (another size).

    python tree_fairseq/cli/dictionary_record.py start SAVE-DIR DATA-BIN
    python tree_fairseq/cli/dictionary_record.py resume SAVE-DIR DATA-BIN
    python tree_fairseq/cli/dictionary_record.py check SAVE-DIR DATA-BIN CHECKPOINT

scripts/train.sh records the SHA-256 of the data-bin's dict.LANG.txt files in SAVE-DIR/dictionaries.json
when a run starts (``start``: a SAVE-DIR without checkpoint_last.pt) and, at a resume, refuses a
data-bin whose dictionaries differ from the record, in one line naming the file (``resume``; a
SAVE-DIR without the record, made before it was kept, gets it written). scripts/generate.sh refuses
the same for a checkpoint whose folder holds the record (``check``; without one, nothing is said).
Run as a file, it imports neither fairseq nor torch.
"""

import hashlib
import json
import os
import sys

RECORD = "dictionaries.json"


def token_dictionaries(data: str) -> dict[str, str]:
    """``{dict.LANG.txt: SHA-256}`` of the data-bin's token dictionaries (not dict.LANG.nodes.txt,
    a tree stream's, which the task checks itself)."""
    digests = {}
    for name in sorted(os.listdir(data)):
        middle = name[len("dict."):-len(".txt")]
        if name.startswith("dict.") and name.endswith(".txt") and middle and "." not in middle:
            with open(os.path.join(data, name), "rb") as f:
                digests[name] = hashlib.sha256(f.read()).hexdigest()
    return digests


def record(save_dir: str, data: str) -> None:
    path = os.path.join(save_dir, RECORD)
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump({"data": os.path.abspath(data), "sha256": token_dictionaries(data)}, f, indent=1)
        f.write("\n")
    os.replace(path + ".part", path)


def recorded(save_dir: str) -> dict[str, str] | None:
    """The record of ``save_dir`` (None: it has none)."""
    try:
        with open(os.path.join(save_dir, RECORD), encoding="utf-8") as f:
            return json.load(f)["sha256"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{os.path.join(save_dir, RECORD)} cannot be read ({error}): remove it to record the "
                         "data-bin's dictionaries anew") from None


def changed(save_dir: str, data: str) -> str | None:
    """The first dictionary of the record that ``data`` holds otherwise, or lacks (None: none)."""
    digests = recorded(save_dir)
    if digests is None:
        return None
    now = token_dictionaries(data)
    return next((name for name, digest in sorted(digests.items()) if now.get(name) != digest), None)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[0] not in ("start", "resume", "check") or (len(argv) == 4) != (argv[0] == "check"):
        sys.exit(f"usage: {__doc__.split(chr(10) * 2)[1].strip()}")
    action, save_dir, data = argv[:3]
    program = "generate.sh" if action == "check" else "train.sh"
    try:
        if action == "start":
            record(save_dir, data)
            return
        name = changed(save_dir, data)
    except (OSError, ValueError) as error:
        sys.exit(f"{program}: error: {error}")
    if name is None:
        if action == "resume" and recorded(save_dir) is None:  # a SAVE-DIR of before the record: keep it now
            record(save_dir, data)
        return
    what = (f"{os.path.join(data, name)} is not" if os.path.exists(os.path.join(data, name)) else
            f"{data} lacks {name},")
    record_path = os.path.join(save_dir, RECORD)
    if action == "resume":
        sys.exit(f"train.sh: error: {what} the dictionary {save_dir}'s checkpoints were trained with ({record_path} "
                 "records another): every embedding would mean another word. Resume on the data-bin the run trained "
                 "on, or choose another SAVE-DIR to train afresh")
    sys.exit(f"generate.sh: error: {what} the dictionary {argv[3]} was trained with ({record_path} records another): "
             "translate a data-bin made with the dictionaries of its run")


if __name__ == "__main__":
    main()
