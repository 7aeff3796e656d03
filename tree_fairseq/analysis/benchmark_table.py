"""The table of ``scripts/benchmark_all.py``: every family of this package against fairseq's
transformer, from the JSON each ``scripts/benchmark_speed.py --json`` run writes
(``OUT/ARCH.runR.json``).

Per family, the median over its runs (and the range when there are several) of training speed,
tree / transformer, with its FLOP ideal and measured / ideal; the same for generation; peak
training memory, tree / transformer; and inference memory growth from the first length to each
other, the tree's over the transformer's. Pure Python (json, statistics).
"""

import json
import statistics
from pathlib import Path

FAMILIES = {
    "tree_transformer_iwslt_de_en": "Tree Transformer (hierarchical accumulation)",
    "constituent_transformer_iwslt_de_en": "constituent attention",
    "tree_pe_transformer_iwslt_de_en": "tree positional encodings",
    "treeformer_iwslt_de_en": "Treeformer (chart)",
    "tree_composition_transformer_iwslt_de_en": "attention as tree composition",
    "pascal_transformer_iwslt_de_en": "parent-scaled self-attention (PASCAL)",
}


def load_runs(out: Path) -> dict[str, list[dict]]:
    """{arch: [summary, ...]} of the finished runs in ``out``, in run order."""
    runs = {}
    for path in sorted(out.glob("*.run*.json"), key=lambda p: (p.name.split(".run")[0], int(p.stem.split(".run")[1]))):
        runs.setdefault(path.name.split(".run")[0], []).append(json.loads(path.read_text()))
    return runs


def figure(values, digits=2):
    """Median of the runs' values, with their range when there are several; n/a if none was measured."""
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    median = f"{statistics.median(values):.{digits}f}"
    if len(values) == 1:
        return median
    return f"{median} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def growth(summary, mode, length):
    ratios = summary.get("memory_growth_ratio") or {}
    return ratios.get(mode, {}).get(str(length))


def ratio_to_ideal(summary, what):
    measured, ideal = summary.get(f"{what}_ratio"), summary.get(f"{what}_ideal")
    return None if measured is None or ideal is None else measured / ideal


def table(runs) -> str:
    lengths = sorted({n for summaries in runs.values() for s in summaries for n in s["lengths"][1:]})
    first = min((s["lengths"][0] for summaries in runs.values() for s in summaries), default=16)
    header = ["family (arch)", "runs", "train speed", "ideal", "measured / ideal", "generation speed", "ideal",
              "measured / ideal", "train memory"] + [f"infer. memory growth {first}->{n}" for n in lengths]
    rows = []
    for arch in [a for a in FAMILIES if a in runs] + sorted(set(runs) - set(FAMILIES)):
        summaries = runs[arch]
        rows.append([
            f"{FAMILIES.get(arch, arch)} (`{arch}`)", str(len(summaries)),
            figure([s["train_ratio"] for s in summaries]), figure([s["train_ideal"] for s in summaries]),
            figure([ratio_to_ideal(s, "train") for s in summaries]),
            figure([s["gen_ratio"] for s in summaries]), figure([s["gen_ideal"] for s in summaries]),
            figure([ratio_to_ideal(s, "gen") for s in summaries]),
            figure([s["train_memory_ratio"] for s in summaries]),
            *(figure([growth(s, "inference", n) for s in summaries]) for n in lengths),
        ])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    devices = sorted({s["device"] for summaries in runs.values() for s in summaries})
    dates = sorted(s["date"] for summaries in runs.values() for s in summaries)
    loads = [float(x) for summaries in runs.values() for s in summaries for x in s["load_average"] if x != "n/a"]
    notes = [
        "",
        "Every figure is tree / transformer, measured in the same run on the same batches: speeds as the tree "
        "model's speed over the transformer's (higher is faster), memory as the tree model's over the "
        "transformer's (lower is leaner), growth as the tree model's peak at the longer length over its peak at "
        f"{first} tokens, divided by the same for the transformer. Median over the runs, range in brackets.",
        "Targets: training measured / ideal >= 0.9 (every family; >= 0.95 for PASCAL); generation >= 0.8 of the "
        "transformer's speed for the Tree Transformer and >= 0.9 of the FLOP ideal for the others; training "
        "memory <= 1.5; inference memory growth <= 2 (<= 1.5 for constituent attention).",
        f"Device: {'; '.join(devices)}. Runs {dates[0]} to {dates[-1]}"
        + (f"; 1-minute load average {min(loads):.1f} to {max(loads):.1f}." if loads else "."),
    ]
    return "\n".join(lines + notes) + "\n"
