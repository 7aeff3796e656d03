"""scripts/benchmark_all.py: one benchmark_speed.py run per family and run, resumable, and the
table of medians it writes from the runs' JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tree_fairseq.analysis.benchmark_table import FAMILIES, figure, load_runs, table

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--embed-dim", "32", "--ffn-dim", "64", "--heads", "2", "--encoder-layers", "1", "--decoder-layers", "1",
        "--updates", "2", "--warmup", "1", "--max-tokens", "500", "--gen-sentences", "8", "--gen-rounds", "1",
        "--flop-batches", "1", "--memory-batches", "1", "--lengths", "16,32,64", "--sweep-batch-size", "2"]
TWO_FAMILIES = ["treeformer_iwslt_de_en", "constituent_transformer_iwslt_de_en"]


def benchmark_all(databin, out, *flags):
    return subprocess.run([sys.executable, ROOT / "scripts" / "benchmark_all.py", databin, "--out", out, *flags],
                          capture_output=True, text=True)


@pytest.mark.slow
def test_runs_every_family_once_and_tabulates_the_medians(tiny_databin, tmp_path):
    out = tmp_path / "bench"
    result = benchmark_all(tiny_databin, out, "--runs", "1", "--families", *TWO_FAMILIES, *TINY)
    assert result.returncode == 0, result.stderr
    for arch in TWO_FAMILIES:
        summary = json.loads((out / f"{arch}.run1.json").read_text())
        assert summary["tree_arch"] == arch and not summary["errors"]
        assert summary["dims"]["embed dim (enc/dec)"] == "32/32"
        for key in ("train_ratio", "train_ideal", "gen_ratio", "gen_ideal", "train_memory_ratio"):
            assert summary[key] > 0, (arch, key)
        assert set(summary["memory_growth_ratio"]["inference"]) == {"32", "64"}
        assert "measured / ideal" in (out / f"{arch}.run1.txt").read_text()
    table = (out / "table.md").read_text()
    assert result.stdout == table
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert "infer. memory growth 16->64" in rows[0]
    assert [row.split("`")[1] for row in rows[1:]] == ["constituent_transformer_iwslt_de_en", "treeformer_iwslt_de_en"]
    # the table's figures are the runs' own: the Treeformer row's generation speed and growth to 64 tokens
    summary = json.loads((out / "treeformer_iwslt_de_en.run1.json").read_text())
    cells = [cell.strip() for cell in rows[2].strip("|").split("|")]
    assert cells[5] == f"{summary['gen_ratio']:.2f}"
    assert cells[-1] == f"{summary['memory_growth_ratio']['inference']['64']:.2f}"

    # a finished run is not run again; --table-only rewrites the table from what is there
    before = (out / f"{TWO_FAMILIES[0]}.run1.json").stat().st_mtime_ns
    result = benchmark_all(tiny_databin, out, "--runs", "1", "--families", TWO_FAMILIES[0], *TINY)
    assert result.returncode == 0 and "run 1:" not in result.stderr, result.stderr
    assert (out / f"{TWO_FAMILIES[0]}.run1.json").stat().st_mtime_ns == before
    assert benchmark_all(tiny_databin, out, "--table-only").stdout == table


def test_the_table_in_the_docs_is_the_published_runs():
    """docs/performance.md's table is what benchmark_all.py makes of the runs published beside it."""
    runs = load_runs(ROOT / "docs" / "results" / "performance-cpu")
    assert set(runs) == set(FAMILIES)
    assert len(runs["treeformer_iwslt_de_en"]) >= 3 and len(runs["constituent_transformer_iwslt_de_en"]) >= 3
    assert table(runs) in (ROOT / "docs" / "performance.md").read_text()


def test_medians_and_ranges_over_runs(tmp_path):
    assert figure([0.9, 1.1, 0.5]) == "0.90 (0.50-1.10)"
    assert figure([None, 0.7]) == "0.70"
    assert figure([None]) == "n/a"
    for run, gen in enumerate([0.6, 0.9, 0.7], start=1):
        (tmp_path / f"treeformer_iwslt_de_en.run{run}.json").write_text(json.dumps({
            "tree_arch": "treeformer_iwslt_de_en", "device": "CPU", "date": f"2026-01-0{run}", "load_average": ["1.0", "n/a"],
            "lengths": [16, 256], "train_ratio": 0.5, "train_ideal": 0.5, "gen_ratio": gen, "gen_ideal": 0.75,
            "train_memory_ratio": 1.2, "memory_growth_ratio": {"inference": {"256": 1.0 + run / 10}}}))
    row = table(load_runs(tmp_path)).splitlines()[2]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1:] == ["3", "0.50 (0.50-0.50)", "0.50 (0.50-0.50)", "1.00 (1.00-1.00)", "0.70 (0.60-0.90)",
                         "0.75 (0.75-0.75)", "0.93 (0.80-1.20)", "1.20 (1.20-1.20)", "1.20 (1.10-1.30)"]


def test_table_only_writes_the_packages_table_of_the_runs_there(tmp_path):
    published = ROOT / "docs" / "results" / "performance-cpu"
    for path in published.glob("*.run*.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    result = benchmark_all("unused", tmp_path, "--table-only")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (tmp_path / "table.md").read_text() == table(load_runs(published))
