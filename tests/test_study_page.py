"""The en-de study page's figures that no other test reads: each group of its breakdown by source
length, quoted as tree-fairseq-compare prints it, is comparison-by-length.json's, and its table of what
five seeds could detect is tree_fairseq.analysis.power's on comparison.json's spreads."""

import json
import re
from pathlib import Path

import pytest

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
