"""Console scripts; they only parse arguments and call into the package."""

import argparse
import shlex


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that adds each option's default to its help, but not where there is none
    to say (None, a flag's False) or where the help already says it ("default: ...")."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def overriding(defaults: list[str], given: list[str]) -> list[str]:
    """A command line of ``defaults`` (option and value pairs) and ``given``, where an option of
    ``given`` (``--opt VALUE``, ``--opt=VALUE``, or argparse's abbreviation of it) replaces the
    default's pair instead of following it: the command lines refuse an option given twice."""
    named = [word.split("=", 1)[0] for word in given if word.startswith("--") and len(word) > 2]
    kept = []
    for option, value in zip(defaults[::2], defaults[1::2], strict=True):
        if not any(option.startswith(name) for name in named):
            kept += [option, value]
    return [*kept, *given]


class _StoreOnce(argparse._StoreAction):
    """argparse's "store", refusing an option met a second time in one command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        if self.option_strings:
            given = parser._given
            said = shlex.join([option_string, *map(str, values if isinstance(values, list) else [values])])
            if self.dest in given:
                parser.error(f"argument {option_string}: given twice ({given[self.dest]}, then {said}): give it once")
            given[self.dest] = said
        super().__call__(parser, namespace, values, option_string)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, but an option that takes one value (or one list) is refused when given
    twice, naming both: argparse keeps the last silently, so ``--gold A --gold B`` read B and a
    repeated ``--out`` wrote where the earlier words did not say. Options meant to be repeated use
    ``action="append"``; flags (store_true) may repeat. Subcommands' parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)
        refusing_repeats(self)


def refusing_repeats(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with each option that takes one value refusing a second occurrence, each parse
    counting its own command line: the one place of the rule. :class:`ArgumentParser` calls it when
    made (its later options are made refusing); a parser built elsewhere (fairseq's preprocessing
    parser) is given to it once it has all its options."""
    for action in parser._actions:
        if type(action) is argparse._StoreAction:
            action.__class__ = _StoreOnce
    parse = parser.parse_known_args

    def parse_afresh(args=None, namespace=None):  # each command line counts its own options
        parser._given = {}
        return parse(args, namespace)

    parser.parse_known_args = parse_afresh
    return parser
