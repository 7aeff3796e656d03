"""The scripts whose --help adds each option's default say it once, and say nothing for options
without one."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tree_fairseq.cli import DefaultsHelpFormatter

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


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


def _runs_main(node) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":`` calling ``main``."""
    return (isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'", "'__main__' == __name__")
            and any(isinstance(call, ast.Call) and ast.unparse(call.func) == "main"
                    for statement in node.body for call in ast.walk(statement)))


def test_every_module_with_a_main_runs_it_under_python_m():
    """A module with a ``main`` but no ``__main__`` block does nothing under ``python -m`` and exits 0."""
    checked, silent = [], []
    for path in sorted((ROOT / "tree_fairseq").rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in body):
            checked.append(path.name)
            if not any(_runs_main(node) for node in body):
                silent.append(str(path.relative_to(ROOT)))
    assert "reversed_children.py" in checked and "parse.py" in checked
    assert silent == []


@pytest.mark.parametrize("module", ["reversed_children", "same_batches", "drawing", "attention"])
def test_analysis_modules_answer_help_under_python_m(module):
    result = subprocess.run([sys.executable, "-m", f"tree_fairseq.analysis.{module}", "--help"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:") and "--help" in result.stdout
