"""What one tiny checkpoint of each method family computes, so that a change of the code can be
shown to leave the numbers alone: its greedy and beam translations of a few test sentences (from
the data-bin's trees and from raw text, as fairseq-interactive hands them over), a seeded training
loss (dropout on, so that the order of random draws counts), and the parameters a seeded build
starts from.

``tests/data/make_family_checkpoints.py`` trains the checkpoints and writes what they compute into
``tests/data/families/expected.json``; ``tests/test_family_checkpoints.py`` computes it again with
the code of the day and compares."""

import json
from pathlib import Path

import torch
from fairseq import checkpoint_utils, options, tasks
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from fairseq.sequence_generator import SequenceGenerator

import tree_fairseq

USER_DIR = str(Path(tree_fairseq.__file__).parent)
FAMILIES_DIR = Path(__file__).resolve().parent / "data" / "families"
DATABIN = FAMILIES_DIR / "bin"
EXPECTED = FAMILIES_DIR / "expected.json"

# Each family's tiny architecture and the task it trains with.
FAMILIES = {
    "tree_transformer": ("tree_transformer_tiny", "tree_translation"),
    "constituent_transformer": ("constituent_transformer_tiny", "tree_translation"),
    "tree_pe_transformer": ("tree_pe_transformer_tiny", "tree_translation"),
    "treeformer": ("treeformer_tiny", "tree_translation"),
    "tree_composition_transformer": ("tree_composition_transformer_tiny", "tree_translation"),
    "pascal_transformer": ("pascal_transformer_tiny", "dependency_translation"),
}
# Smaller than the tiny architectures' own sizes, so that each checkpoint is a few dozen KB.
SIZE_FLAGS = [
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
    "--decoder-ffn-embed-dim", "32", "--dropout", "0.1",
]
# How raw text gets its trees and heads (the data-bin's trivial trees are recorded as unknown).
RAW_TEXT = {"inference_parser": "balanced", "inference_heads": "next"}
SENTENCES = [0, 1, 2, 3, 4, 5]  # test-split indices translated
MAX_LEN_B = 10
SAMPLE_VALUES = 6  # values of each parameter kept of a seeded build


def checkpoint_path(family: str) -> Path:
    return FAMILIES_DIR / f"{family}.pt"


def train_flags(family: str) -> list[str]:
    arch, task = FAMILIES[family]
    return ["--task", task, "--arch", arch, *SIZE_FLAGS]


def load(family: str):
    """The family's checkpoint read by fairseq (the data-bin where it is now): ``(task, model)``,
    the model in eval mode."""
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint_path(family))], arg_overrides={"data": str(DATABIN), **RAW_TEXT})
    task.load_dataset("test")
    return task, models[0].eval()


def _hypotheses(task, model, sample, beam: int) -> list:
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=0,
                                  max_len_b=MAX_LEN_B)
    with torch.no_grad():
        hypos = task.inference_step(generator, [model], sample)
    by_id = dict(zip(sample["id"].tolist(), hypos))
    return [[{"tokens": hypo["tokens"].tolist(), "scores": hypo["positional_scores"].tolist()}
             for hypo in by_id[index]] for index in sorted(by_id)]


def translations(task, model) -> dict:
    """Greedy and beam-3 hypotheses of :data:`SENTENCES`, from the data-bin's sample and from raw
    text (src_tokens and src_lengths only: the task adds the trees, as for fairseq-interactive)."""
    dataset = task.dataset("test")
    sample = dataset.collater([dataset[i] for i in SENTENCES])
    raw = {**sample, "net_input": {key: sample["net_input"][key] for key in ("src_tokens", "src_lengths")}}
    sources = [dataset[i]["source"] for i in SENTENCES]
    inference = task.build_dataset_for_inference(sources, [len(source) for source in sources])
    inferred = inference.collater([inference[i] for i in range(len(sources))])
    inferred["id"] = torch.tensor(SENTENCES)[inferred["id"]]
    return {
        "greedy": _hypotheses(task, model, sample, 1),
        "beam": _hypotheses(task, model, sample, 3),
        "raw_greedy": _hypotheses(task, model, raw, 1),
        "inference_beam": _hypotheses(task, model, inferred, 3),
    }


def seeded_loss(task, model) -> float:
    """The label-smoothed loss of :data:`SENTENCES` in training mode (dropout on) after
    ``torch.manual_seed(3)``: the model is left in eval mode."""
    dataset = task.dataset("test")
    sample = dataset.collater([dataset[i] for i in SENTENCES])
    criterion = LabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1)
    model.train()
    torch.manual_seed(3)
    with torch.no_grad():
        loss, _, _ = criterion(model, sample)
    model.eval()
    return float(loss)


def seeded_parameters(family: str) -> dict:
    """Each parameter of the family's model built after ``torch.manual_seed(1)``, in the order the
    model lists them: its shape, sum and first :data:`SAMPLE_VALUES` values."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(DATABIN), "--user-dir", USER_DIR, "--cpu", *train_flags(family),
    ])
    task = tasks.setup_task(args)
    torch.manual_seed(1)
    model = task.build_model(args)
    return {name: {"shape": list(p.shape), "sum": float(p.detach().double().sum()),
                   "values": p.detach().flatten()[:SAMPLE_VALUES].tolist()}
            for name, p in model.named_parameters()}


def compute(family: str) -> dict:
    task, model = load(family)
    return {
        "state_dict_keys": list(model.state_dict()),
        "translations": translations(task, model),
        "loss": seeded_loss(task, model),
        "seeded_parameters": seeded_parameters(family),
    }


def read_expected() -> dict:
    return json.loads(EXPECTED.read_text(encoding="utf-8"))
