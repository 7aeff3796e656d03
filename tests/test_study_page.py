"""The en-de study page's figures that no other test reads: each group of its breakdown by source
length, quoted as tree-fairseq-compare prints it, is comparison-by-length.json's (its differences and
each system's output length), and its table of what five seeds could detect is
tree_fairseq.analysis.power's on comparison.json's spreads."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_data
from helpers import code_blocks, commands

from tree_fairseq.analysis.power import detectable_difference

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "iwslt_lowres.md"
FOLDER = ROOT / "docs" / "results" / "iwslt14-lowres-en-de"
# The page's names of the systems in its table of what five seeds could detect.
POWER_ROWS = {
    "fairseq's transformer": "transformer",
    "tree transformer, spaCy trees": "tree_transformer.spacy",
    "tree transformer, balanced trees": "tree_transformer.balanced",
    "tree transformer, spaCy trees, transformer's batches": "tree_transformer.spacy.text-batches",
    "tree transformer, balanced trees, transformer's batches": "tree_transformer.balanced.text-batches",
    "PASCAL, spaCy's parents": "pascal_transformer.spacy",
}


def formatted(figure: dict) -> str:
    """A pair's figure as the tool's Markdown prints it: difference [interval], p."""
    low, high = figure["interval"]
    return f"{figure['difference']:+.2f} [{low:+.2f}, {high:+.2f}], {figure['p']:.4f}"


@pytest.mark.parametrize("metric", ["BLEU", "chrF"])
def test_the_page_quotes_every_group_of_the_breakdown_by_length(metric):
    breakdown = json.loads((FOLDER / "comparison-by-length.json").read_text())["by_length"]
    table = PAGE.read_text(encoding="utf-8").split(f"{metric} by source length", 1)[1]
    for index, pair in enumerate(breakdown["groups"][0]["pairs"]):
        name = f"{pair['a']} - {pair['b']}"
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert cells == [formatted(group["pairs"][index][metric]) for group in breakdown["groups"]], (name, metric)


def test_the_page_quotes_every_systems_output_length_by_source_length():
    breakdown = json.loads((FOLDER / "comparison-by-length.json").read_text())["by_length"]
    table = PAGE.read_text(encoding="utf-8").split("Output length by source length", 1)[1]
    for name in breakdown["groups"][0]["length"]:
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert cells == [f"{group['length'][name]['mean']:.3f} ± {group['length'][name]['sd']:.3f}"
                         for group in breakdown["groups"]], name


def test_the_seed_one_output_lengths_quoted_are_the_pages_command_recomputed(tmp_path):
    """The seed-1 sections' output lengths by source length are what the command under "Output
    lengths of the seed-1 runs" prints, run again on the published outputs: every system's four
    figures are quoted on the page as "a, b, c and d"."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("### Output lengths of the seed-1 runs", 1)[1].split("\n## ", 1)[0]
    (command,) = [command for _, block in code_blocks(section) for command in commands(block)]
    argv = shlex.split(command)
    assert argv[0] == "tree-fairseq-compare" and "--by-length" in argv
    shared_data(Path(argv[argv.index("--source") + 1]).parent.name)
    argv[argv.index("--json") + 1] = str(tmp_path / "lengths.json")
    subprocess.run([str(Path(sys.executable).parent / argv[0]), *argv[1:]], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    groups = json.loads((tmp_path / "lengths.json").read_text())["by_length"]["groups"]
    assert [group["sentences"] for group in groups] == ["<= 10", "11-20", "21-30", "> 30"]
    quoted = " ".join(text.split())
    for name in groups[0]["length"]:
        figures = [f"{group['length'][name]['mean']:.3f}" for group in groups]
        assert f"{', '.join(figures[:3])} and {figures[3]}" in quoted, name


def test_the_pages_detectable_differences_are_the_power_modules():
    systems = json.loads((FOLDER / "comparison.json").read_text())["systems"]
    text = PAGE.read_text(encoding="utf-8")
    seen = set()
    for line in text.splitlines():
        match = re.match(r"\| (.+) \((\d\.\d{3})\) \| (\d\.\d\d) \| (\d\.\d\d) \| (\d\.\d\d) \|$", line)
        if not match or match.group(1) not in POWER_ROWS:
            continue
        name = POWER_ROWS[match.group(1)]
        sd = systems[name]["BLEU"]["sd"]
        assert match.group(2) == f"{sd:.3f}", line
        expected = (detectable_difference(sd, 5, 0.05, 0.8), detectable_difference(sd, 5, 0.05 / 8, 0.8),
                    detectable_difference(sd, 5, 0.05 / 8, 0.5))
        assert [match.group(i) for i in (3, 4, 5)] == [f"{value:.2f}" for value in expected], line
        seen.add(name)
    assert seen == set(POWER_ROWS.values())
