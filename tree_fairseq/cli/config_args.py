"""The fairseq-train flags of a YAML config of ``configs/`` (the configs fairseq-hydra-train reads).

    tree-fairseq-config-args configs/iwslt_tree_transformer.yaml [GROUP.KEY=VALUE ...]

prints one flag (and its value) per line; ``GROUP.KEY=VALUE`` overrides a value first, as on
fairseq-hydra-train's command line (``task.eval_bleu=false``, ``model._name=tree_transformer``).
Hydra's ``+GROUP.KEY=VALUE`` (add a key the config lacks; one it sets is refused, as hydra refuses
it) and ``++GROUP.KEY=VALUE`` (add or override) are taken too, so that scripts/train.sh gives
the same overrides in both its modes.
The mapping is fairseq's own: ``KEY`` of any group becomes ``--key-with-dashes``; the ``_name`` of
``task``, ``model``, ``criterion``, ``optimizer``, ``lr_scheduler`` ... becomes ``--task``,
``--arch``, ``--criterion``, ``--optimizer``, ``--lr-scheduler``; ``task.data`` is the positional
data directory; a boolean is a bare flag when it differs from that key's default in fairseq (most
default to false, so ``true`` is ``--flag``; ``task.left_pad_source`` defaults to true, and fairseq's
``--left-pad-source`` sets it false), nothing when it is the default; ``null`` leaves fairseq's
default; lists are joined with commas (``lr: [0.0005]``).
The ``hydra`` group only concerns fairseq-hydra-train and is skipped. A group or key fairseq does
not know is refused, with the closest known key (``--check`` only checks, for fairseq-hydra-train).
"""

import difflib
import sys

import yaml

from tree_fairseq.cli import ArgumentParser

NAME_FLAGS = {"model": "--arch", "lr_scheduler": "--lr-scheduler"}
SKIPPED_GROUPS = {"hydra"}
MISSING = "???"


def load_config(path: str, overrides: list[str] = ()) -> dict:
    """The config at ``path`` with ``overrides`` applied. ValueError naming ``path`` unless it is a mapping of
    groups, each a mapping of keys (:func:`check_layout`), and naming both for a key overridden twice."""
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    config = {} if config is None else config
    check_layout(config, path)
    given = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        plus = len(key) - len(key.lstrip("+"))
        key = key[plus:]
        if not sep or "." not in key or plus > 2:
            raise ValueError(f"override {override!r} is not GROUP.KEY=VALUE (or +GROUP.KEY=VALUE, ++GROUP.KEY=VALUE)")
        if key in given:  # hydra and this reading would keep the last silently
            raise ValueError(f"override {override!r}: {key} is given twice ({given[key]!r}, then {override!r}): "
                             "give it once")
        given[key] = override
        group, name = key.split(".", 1)
        if plus == 1 and name in (config.get(group) or {}):
            raise ValueError(f"override {override!r}: the config sets {key} already, and + only adds a key: write "
                             f"{key}={value}, or ++{key}={value}")
        config.setdefault(group, {})[name] = yaml.safe_load(value) if value else None
    return config


def check_layout(config, path: str) -> None:
    """ValueError naming ``path`` unless ``config`` is a mapping whose groups are mappings. A group left empty
    (``checkpoint:`` with nothing under it, YAML's null) is refused too, not read as an empty group:
    fairseq-hydra-train refuses it (``field 'checkpoint' is not Optional``), so the config would train in
    one of scripts/train.sh's modes and not in the other."""
    if not isinstance(config, dict):
        raise ValueError(f"{path}: the config is a {type(config).__name__}, not a mapping of groups "
                         "(task:, model:, ... each with its keys under it)")
    for group, values in config.items():
        if group in SKIPPED_GROUPS or isinstance(values, dict):
            continue
        if values is None:
            raise ValueError(f"{path}: group {group!r} is empty (nothing under {group}:): give it its keys or remove "
                             "it (fairseq-hydra-train refuses an empty group)")
        raise ValueError(f"{path}: group {group!r} is a {type(values).__name__}, not a mapping of keys: write them "
                         f"indented under {group}: (KEY: VALUE, one a line)")


def check_config(config: dict, path: str) -> dict[tuple[str, str], object]:
    """ValueError for a group or key that fairseq does not know: a misspelt key would otherwise be
    dropped by fairseq-hydra-train, or taken by fairseq-train's argparse as the abbreviation of
    another flag (``dropou`` for ``dropout``), and the run would train something else with exit 0.
    Returns fairseq's default of each key it knows, ``{(group, key): default}``.

    Groups are fairseq's config groups; keys of ``common``, ``dataset``, ``optimization``, ...
    are their dataclass's fields, and keys of ``model``, ``task``, ``criterion``, ``optimizer``,
    ``lr_scheduler``, ``bpe``, ``tokenizer`` and ``scoring`` the fields of the dataclass their
    ``_name`` registers (plugin models and tasks included: the plugin is imported first)."""
    defaults = {}
    for group, values, known, where in _groups(config, path, strict=True):
        unknown = sorted(set(values) - set(known) - {"_name"})
        if unknown:
            keys = set(known) | {"_name"}
            close = {key: difflib.get_close_matches(key, keys, n=1) for key in unknown}
            hints = ", ".join(f"{key!r}" + (f" (did you mean {close[key][0]!r}?)" if close[key] else "")
                              for key in unknown)
            raise ValueError(f"{path}: {where} has no key {hints}")
        defaults.update(((group, key), default) for key, default in known.items())
    return defaults


def fairseq_defaults(config: dict) -> dict[tuple[str, str], object]:
    """fairseq's default of each key of ``config`` it knows, ``{(group, key): default}`` (a group or
    ``_name`` fairseq cannot describe is left out: :func:`check_config` says so)."""
    return {(group, key): default for group, _, known, _ in _groups(config, "config", strict=False)
            for key, default in known.items()}


def _groups(config: dict, path: str, strict: bool):
    """``(group, values, {key: default} of the keys fairseq knows there, where)`` for each group of
    ``config`` whose keys fairseq can describe; a group fairseq does not know is a ValueError when
    ``strict``, left out otherwise."""
    import dataclasses

    import tree_fairseq
    from fairseq import registry, tasks

    tree_fairseq.register()
    from fairseq.dataclass.configs import FairseqConfig

    groups = {field.name: field.type for field in dataclasses.fields(FairseqConfig) if field.name != "_name"}

    def keys_of(dataclass_registry):
        return lambda name: _fields(dataclass_registry[name]) if name in dataclass_registry else None

    named = {"model": _model_keys, "task": keys_of(tasks.TASK_DATACLASS_REGISTRY),
             **{group: keys_of(registry.REGISTRIES[group]["dataclass_registry"]) for group in registry.REGISTRIES}}
    for group, values in config.items():
        if group in SKIPPED_GROUPS:
            continue
        if group not in groups:
            if not strict:
                continue
            raise ValueError(f"{path}: unknown group {group!r}; fairseq's groups: {', '.join(sorted(groups))}")
        if not isinstance(values, dict):
            continue
        if group in named:
            name = values.get("_name")
            known = named[group](name) if name else None
            if known is None:
                continue  # no name, or a name fairseq cannot describe: fairseq itself says what it lacks
            yield group, values, known, f"{group} {name!r}"
        else:
            yield group, values, _fields(groups[group]), f"group {group!r}"


def _model_keys(name: str) -> dict[str, object] | None:
    """The options of a model (or architecture) name with their defaults: its dataclass's fields,
    or what its ``add_args`` declares (fairseq's transformer and the plugin's models declare them so)."""
    import argparse

    from fairseq import models

    name = models.ARCH_MODEL_NAME_REGISTRY.get(name, name)  # an architecture: its model
    if name in models.MODEL_DATACLASS_REGISTRY:
        return _fields(models.MODEL_DATACLASS_REGISTRY[name])
    if name not in models.MODEL_REGISTRY:
        return None
    parser = argparse.ArgumentParser(add_help=False)
    models.MODEL_REGISTRY[name].add_args(parser)
    # add_args may leave a flag's default out (fairseq fills it in later); a store_false flag's is true
    return {action.dest: True if isinstance(action, argparse._StoreFalseAction) else action.default
            for action in parser._actions}


def _fields(dataclass) -> dict[str, object]:
    """Each field of ``dataclass`` with its default (None where it has none of its own)."""
    import dataclasses

    def default(field):
        if field.default is not dataclasses.MISSING:
            return field.default
        if field.default_factory is not dataclasses.MISSING:
            return field.default_factory()
        return None

    return {field.name: default(field) for field in dataclasses.fields(dataclass)}


def config_to_args(config: dict, defaults: dict[tuple[str, str], object] | None = None) -> list[str]:
    """fairseq-train's argument list for ``config`` (the data directory first, when set). A boolean
    is given as a bare flag exactly when it differs from the key's default in fairseq (``defaults``,
    as :func:`check_config` returns them; looked up when not given): fairseq-train makes the flag of
    a key whose default is true a ``store_false`` (``--left-pad-source`` sets it false)."""
    if defaults is None:
        defaults = fairseq_defaults(config)
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
            if value is None or value == MISSING:
                continue
            if isinstance(value, bool):
                if value != (defaults.get((group, key)) is True):
                    args.append(flag)
            elif isinstance(value, list):
                args += [flag, ",".join(str(v) for v in value)]
            else:
                args += [flag, str(value)]
    return args


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="tree-fairseq-config-args",
                            description="Print the fairseq-train flags of a configs/*.yaml file, one per line.")
    parser.add_argument("config", help="a YAML config (fairseq-hydra-train's layout)")
    parser.add_argument("overrides", nargs="*", help="GROUP.KEY=VALUE, as on fairseq-hydra-train's command line")
    parser.add_argument("--null", action="store_true", help="separate the arguments with NUL instead of newlines")
    parser.add_argument("--check", action="store_true",
                        help="only check that fairseq knows every group and key (scripts/train.sh --hydra)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.overrides)
        flags = config_to_args(config, check_config(config, args.config))
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"tree-fairseq-config-args: error: {error}")
    if args.check:
        return
    sep = "\0" if args.null else "\n"
    sys.stdout.write("".join(flag + sep for flag in flags))


if __name__ == "__main__":
    main()
