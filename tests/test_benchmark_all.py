"""scripts/benchmark_all.py: one benchmark_speed.py run per family and run, resumable, and the
table of medians it writes from the runs' JSON; PASCAL's runs on a data-bin with parents, its FLOP
ideal charged with the parent scaling's elementwise work."""

import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import by_length, collate
from helpers import build as build_model
from tree_fairseq.analysis.benchmark_models import MethodFlops, synthetic_parent_spans, task_for, train_target
from tree_fairseq.analysis.benchmark_table import FAMILIES, figure, load_runs, table
from tree_fairseq.modules.parent_scaled_attention import (
    ParentScaledSelfAttention,
    parent_positions,
    parent_weight_flops,
    parent_weights,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--embed-dim", "32", "--ffn-dim", "64", "--heads", "2", "--encoder-layers", "1", "--decoder-layers", "1",
        "--updates", "2", "--warmup", "1", "--max-tokens", "500", "--gen-sentences", "8", "--gen-rounds", "1",
        "--flop-batches", "1", "--memory-batches", "1", "--lengths", "16,32,64", "--sweep-batch-size", "2"]
TWO_FAMILIES = ["treeformer_iwslt_de_en", "constituent_transformer_iwslt_de_en"]
PASCAL = "pascal_transformer_iwslt_de_en"


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


def test_the_gpu_table_in_the_docs_is_the_published_gpu_runs():
    """The GPU table of docs/performance.md is what benchmark_all.py makes of the H100 runs."""
    runs = load_runs(ROOT / "docs" / "results" / "performance-gpu")
    assert set(runs) == set(FAMILIES)
    assert all(run["device"].startswith("GPU") for family in runs.values() for run in family)
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


# PASCAL: its task, its data-bin, and the work its FLOP ideal is charged with


@pytest.mark.slow
def test_pascal_runs_on_a_data_bin_with_parents_charged_with_its_parent_scaling(parent_databin, tmp_path):
    out = tmp_path / "bench"
    result = benchmark_all(parent_databin, out, "--runs", "1", "--families", PASCAL, *TINY)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / f"{PASCAL}.run1.json").read_text())
    assert summary["task"] == "dependency_translation" and not summary["errors"]
    assert summary["dims"]["heads (enc/dec)"] == "2/2"
    # the same matrix products as the transformer's, plus the parent scaling's elementwise work
    flops, method = summary["train_gflop"], summary["method_gflop"]
    assert 0 < method["train"] and 0 < method["generate"]
    assert flops["tree"] - method["train"] == pytest.approx(flops["transformer"], rel=1e-9)
    assert summary["train_ideal"] == pytest.approx(flops["transformer"] / flops["tree"]) and summary["train_ideal"] < 1
    report = (out / f"{PASCAL}.run1.txt").read_text()
    assert "fairseq's dependency_translation batching" in report and "text tokens" in report
    assert "of which the method's elementwise work" in report
    assert [line for line in report.splitlines() if line.startswith("  measured / ideal")][0].split()[-2] == "0.95"
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert rows[1].startswith(f"| parent-scaled self-attention (PASCAL) (`{PASCAL}`) | 1 | ")


def test_a_family_that_reads_parents_is_refused_a_data_bin_without_them(tiny_databin, tmp_path):
    out = tmp_path / "bench"
    result = benchmark_all(tiny_databin, out, "--families", TWO_FAMILIES[0], PASCAL)
    assert result.returncode == 1
    assert f"{PASCAL} read the sources' dependency parents" in result.stderr and "--parents-data" in result.stderr
    assert not list(out.glob("*"))


def test_tasks_and_targets():
    assert task_for(PASCAL) == task_for("pascal_transformer_tiny") == "dependency_translation"
    assert {task_for(arch) for arch in FAMILIES if arch != PASCAL} == {"tree_translation"}
    assert train_target(PASCAL) == 0.95 and train_target("treeformer_iwslt_de_en") == 0.9


def test_synthetic_parents_are_a_tree_over_the_words_with_eos_its_own():
    spans = synthetic_parent_spans(7, 3)
    assert spans.shape == (3, 8, 2) and (spans == spans[:1]).all()
    assert spans[0, 7].tolist() == [7, 7] and (spans[0, :7, 0] == spans[0, :7, 1]).all()
    roots = [i for i in range(7) if spans[0, i, 0] == i]
    assert len(roots) == 1


class Operations(TorchDispatchMode):
    """Output elements of every elementwise or reduction operation, by name: what the FLOP
    counter of benchmark_speed.py (matrix products only) leaves out."""

    COUNTED = {"add", "sub", "rsub", "mul", "div", "neg", "exp", "pow", "square", "abs", "lt", "mean", "sum",
               "masked_fill", "_softmax", "_softmax_backward_data", "where"}

    def __init__(self):
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__.rstrip("_") in self.COUNTED:
            self.elements += out.numel()
        return out


@pytest.mark.parametrize("weight,position", [("normal", "middle"), ("uniform", "first")])
def test_parent_weight_flops_are_the_operations_done(weight, position):
    spans = torch.randint(0, 9, (3, 9, 1)).expand(3, 9, 2).contiguous()
    with Operations() as counted:
        parent_weights(parent_positions(spans, position), weight)
    assert parent_weight_flops(3, 9, weight, position) == counted.elements


@pytest.mark.parametrize("parent_ignoring", [0.0, 0.3])
def test_scaling_flops_are_the_operations_beyond_standard_heads(parent_ignoring):
    """Forward and backward of 2 parent-scaled heads of 4 against the same module with none."""
    torch.manual_seed(1)
    x, weights = torch.randn(3, 9, 16), torch.rand(3, 9, 9)
    padding = torch.zeros(3, 9, dtype=torch.bool)
    padding[0, :2] = True
    counts = []
    for heads in (2, 0):
        module = ParentScaledSelfAttention(16, 4, heads, parent_ignoring=parent_ignoring).train()
        with Operations() as counted:
            module(x, weights, padding)[0].sum().backward()
        counts.append(counted.elements)
    assert module.scaling_flops(3, 9, backward=True) == 0
    scaled = ParentScaledSelfAttention(16, 4, 2, parent_ignoring=parent_ignoring).train()
    # Beyond the method's work, autograd sums the gradients of the two slices the scores are cut into
    # (one B·H·n² addition: the code's way of scaling P of the H heads, not charged to the method).
    assert counts[0] - counts[1] == scaled.scaling_flops(3, 9, backward=True) + 3 * 4 * 9 * 9
    assert scaled.eval().scaling_flops(3, 9, backward=False) == 3 * 2 * 9 * 9


def test_method_flops_count_each_encoder_forward_with_its_backward_in_training(parent_databin):
    task, model = build_model(parent_databin, arch="pascal_transformer_tiny", task="dependency_translation")
    batch = collate(task, by_length(task)[-5:])
    batch_size, length = batch["net_input"]["src_tokens"].shape
    encoder = model.encoder
    model.train()
    with MethodFlops(model) as method:
        model(**batch["net_input"])
        model(**batch["net_input"])
    assert method.total == 2 * encoder.method_flops(batch_size, length, backward=True)
    assert encoder.method_flops(batch_size, length, backward=True) == (
        parent_weight_flops(batch_size, length) + encoder.layers[0].self_attn.scaling_flops(batch_size, length, True))
    model.eval()
    with torch.no_grad(), MethodFlops(model) as method:
        model(**batch["net_input"])
    assert method.total == encoder.method_flops(batch_size, length, backward=False)
    before = method.total
    model(**batch["net_input"])  # outside the count
    assert method.total == before and "forward" not in vars(encoder)
    # fairseq's beam search runs the encoder once per batch, through forward_torchscript
    generator = task.build_generator([model], Namespace(beam=2, max_len_a=0, max_len_b=3, min_len=1))
    with torch.no_grad(), MethodFlops(model) as method:
        task.inference_step(generator, [model], batch)
    assert method.total == encoder.method_flops(batch_size, length, backward=False)


def test_runs_made_otherwise_are_not_pooled(tmp_path):
    """Runs of other dimensions, or on another data-bin, in one --out were pooled into one median."""
    out, data, other = tmp_path / "out", tmp_path / "data", tmp_path / "other"
    data.mkdir(), other.mkdir()
    family = TWO_FAMILIES[0]
    # a data-bin benchmark_speed.py cannot read: the run fails at once, but it is the --out's first
    first = benchmark_all(data, out, "--runs", "1", "--families", family, "--embed-dim", "32")
    assert first.returncode == 1 and (out / f"{family}.run1.txt").exists()
    (out / f"{family}.run1.txt").unlink()
    (out / f"{family}.run1.json").write_text("{}")  # a finished run (without one, the record is replaced)
    cases = ((data, ["--embed-dim", "64"], "--embed-dim 64"), (other, ["--embed-dim", "32"], f"ran on {data}, now {other}"))
    for directory, flags, said in cases:
        result = benchmark_all(directory, out, "--runs", "2", "--families", family, *flags)
        assert result.returncode == 1 and "holds runs made otherwise" in result.stderr and said in result.stderr
        assert not (out / f"{family}.run1.txt").exists()  # refused before anything ran
    # runs whose JSON say they were made otherwise (an --out from before settings.json, or copied runs)
    run = {"tree_arch": family, "device": "CPU", "lengths": [16, 256], "train_ratio": 0.5, "data": str(data),
           "dims": {"embed dim (enc/dec)": "32/32"}}
    (out / f"{family}.run1.json").write_text(json.dumps(run))
    (out / f"{family}.run2.json").write_text(json.dumps({**run, "dims": {"embed dim (enc/dec)": "64/64"}}))
    result = benchmark_all("unused", out, "--table-only")
    assert result.returncode == 1 and "were not made alike" in result.stderr and "dims" in result.stderr
    assert not (out / "table.md").exists()


def test_runs_must_be_one_or_more(tmp_path):
    result = benchmark_all("unused", tmp_path, "--runs", "0")
    assert result.returncode == 2 and "--runs: '0': a whole number, 1 or more" in result.stderr


def test_a_record_without_a_finished_run_is_replaced(tmp_path):
    """A mistyped first command (every run failed) wrote settings.json, and the corrected one was
    refused as "holds runs made otherwise" though no run existed."""
    out, data = tmp_path / "out", tmp_path / "data"
    data.mkdir()
    family = TWO_FAMILIES[0]
    first = benchmark_all(data, out, "--runs", "1", "--families", family, "--embed-dimm", "32")
    assert first.returncode == 1 and not (out / f"{family}.run1.json").exists()
    result = benchmark_all(data, out, "--runs", "1", "--families", family, "--embed-dim", "32")
    assert "holds runs made otherwise" not in result.stderr
    assert f"{out / 'settings.json'} records other settings" in result.stderr and "replacing it" in result.stderr
    assert json.loads((out / "settings.json").read_text())["flags"][-2:] == ["--embed-dim", "32"]


@pytest.mark.parametrize("text", ["", "{not json", "[]"])
def test_a_record_that_cannot_be_read_is_named(tmp_path, text):
    # an empty or corrupt settings.json ended in a JSONDecodeError traceback
    out, data = tmp_path / "out", tmp_path / "data"
    out.mkdir(), data.mkdir()
    family = TWO_FAMILIES[0]
    (out / "settings.json").write_text(text)
    (out / f"{family}.run1.json").write_text("{}")
    result = benchmark_all(data, out, "--runs", "1", "--families", family)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(  # after fairseq's import messages
        f"benchmark_all.py: error: {out / 'settings.json'} cannot be read (")
    assert (out / "settings.json").read_text() == text
