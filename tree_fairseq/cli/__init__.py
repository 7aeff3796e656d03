"""Console scripts; they only parse arguments and call into the package."""

import argparse


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that adds each option's default to its help, but not where there is none
    to say (None, a flag's False) or where the help already says it ("default: ...")."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def overriding(defaults: list[str], given: list[str]) -> list[str]:
    """A command line of ``defaults`` (option and value pairs) and ``given``, where an option of
    ``given`` (``--opt VALUE`` or ``--opt=VALUE``) replaces the default's pair instead of following
    it: the command lines refuse an option given twice."""
    named = {word.split("=", 1)[0] for word in given if word.startswith("--")}
    kept = []
    for option, value in zip(defaults[::2], defaults[1::2], strict=True):
        if option not in named:
            kept += [option, value]
    return [*kept, *given]
