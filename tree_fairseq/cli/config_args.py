"""The fairseq-train flags of a YAML config of ``configs/`` (the configs fairseq-hydra-train reads).

    tree-fairseq-config-args configs/iwslt_tree_transformer.yaml [GROUP.KEY=VALUE ...]

prints one flag (and its value) per line; ``GROUP.KEY=VALUE`` overrides a value first, as on
fairseq-hydra-train's command line (``task.eval_bleu=false``, ``model._name=tree_transformer``).
The mapping is fairseq's own: ``KEY`` of any group becomes ``--key-with-dashes``; the ``_name`` of
``task``, ``model``, ``criterion``, ``optimizer``, ``lr_scheduler`` ... becomes ``--task``,
``--arch``, ``--criterion``, ``--optimizer``, ``--lr-scheduler``; ``task.data`` is the positional
data directory; ``true`` is a bare flag, ``false`` and ``null`` leave fairseq's default (all
booleans of fairseq-train default to false); lists are joined with commas (``lr: [0.0005]``).
The ``hydra`` group only concerns fairseq-hydra-train and is skipped.
"""

import argparse
import sys

import yaml

NAME_FLAGS = {"model": "--arch", "lr_scheduler": "--lr-scheduler"}
SKIPPED_GROUPS = {"hydra"}
MISSING = "???"


def load_config(path: str, overrides: list[str] = ()) -> dict:
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or "." not in key:
            raise ValueError(f"override {override!r} is not GROUP.KEY=VALUE")
        group, name = key.split(".", 1)
        config.setdefault(group, {})[name] = yaml.safe_load(value) if value else None
    return config


def config_to_args(config: dict) -> list[str]:
    """fairseq-train's argument list for ``config`` (the data directory first, when set)."""
    args: list[str] = []
    data = (config.get("task") or {}).get("data")
    if data not in (None, MISSING):
        args.append(str(data))
    for group, values in config.items():
        if group in SKIPPED_GROUPS or values is None:
            continue
        if not isinstance(values, dict):
            raise ValueError(f"group {group!r} is not a mapping")
        for key, value in values.items():
            if group == "task" and key == "data":
                continue
            if key == "_name":
                args += [NAME_FLAGS.get(group, "--" + group.replace("_", "-")), str(value)]
                continue
            flag = "--" + key.replace("_", "-")
            if value is None or value is False or value == MISSING:
                continue
            if value is True:
                args.append(flag)
            elif isinstance(value, list):
                args += [flag, ",".join(str(v) for v in value)]
            else:
                args += [flag, str(value)]
    return args


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tree-fairseq-config-args", description="Print the fairseq-train flags of a configs/*.yaml file, "
                                     "one per line.")
    parser.add_argument("config", help="a YAML config (fairseq-hydra-train's layout)")
    parser.add_argument("overrides", nargs="*", help="GROUP.KEY=VALUE, as on fairseq-hydra-train's command line")
    parser.add_argument("--null", action="store_true", help="separate the arguments with NUL instead of newlines")
    args = parser.parse_args(argv)
    try:
        flags = config_to_args(load_config(args.config, args.overrides))
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"tree-fairseq-config-args: error: {error}")
    sep = "\0" if args.null else "\n"
    sys.stdout.write("".join(flag + sep for flag in flags))


if __name__ == "__main__":
    main()
