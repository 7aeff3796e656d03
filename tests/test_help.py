"""The scripts whose --help adds each option's default say it once, and say nothing for options
without one."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tree_fairseq.cli import DefaultsHelpFormatter

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def help_of(parser) -> str:
    return " ".join(parser.format_help().split())


def test_defaults_are_said_once_and_only_where_there_is_one():
    import argparse

    parser = argparse.ArgumentParser(prog="p", formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--lines", type=int, default=100, help="lines read")
    parser.add_argument("--tok", help="tokenised text (default: the text's words)")
    parser.add_argument("--out", help="where to write")
    parser.add_argument("--force", action="store_true", help="overwrite")
    text = help_of(parser)
    assert "lines read (default: 100)" in text
    assert text.count("default:") == 2 and "tokenised text (default: the text's words)" in text
    assert "where to write --force" in text and "overwrite" in text and "None" not in text and "False" not in text


@pytest.mark.parametrize("script", ["for2lam.py", "parse_as_translation.py", "benchmark_prep.py"])
def test_script_help_says_no_empty_default(script):
    result = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True,
                            check=True)
    text = " ".join(result.stdout.split())
    assert "(default: None)" not in text and "(default: False)" not in text
    assert not re.search(r"\(default: [^)]*\) \(default:", text)  # no default said twice
    assert "(default:" in text
