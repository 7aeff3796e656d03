"""Console scripts; they only parse arguments and call into the package."""

import argparse


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that adds each option's default to its help, but not where there is none
    to say (None, a flag's False) or where the help already says it ("default: ...")."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)
