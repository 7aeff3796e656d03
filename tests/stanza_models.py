"""A tiny English stanza model, trained here by stanza's own trainers, so that the tests run a real
``stanza.Pipeline`` offline: its tokenizer (pretokenised), tagger and constituency parser, with
stanza's own batching, length sorting and tree objects.

:func:`train_tiny_english` writes a model folder laid out as ``stanza.download`` lays one out
(``resources.json``, ``en/pos/tiny.pt``, ``en/constituency/tiny.pt``, ``en/pretrain/tiny.pt``),
trained on :func:`treebank`: a few dozen small Penn-Treebank-style trees drawn from a toy grammar,
with random 8-dimensional word vectors. The trees it gives are poor; they are stanza's own.

stanza's trainers are run as they are, with two exceptions: the constituency trainer scores its
dev set with CoreNLP (Java), so its evaluator is replaced by one under which the last epoch's
model is the best; and it
does not retag its trees (retagging would fetch stanza's own tagger). The tagger's data carries
each PTB tag in both tag columns: a parser trained without retagging reads UPOS in a Pipeline.

Run as a script (``python tests/stanza_models.py DIR``), it trains into DIR; the ``stanza_models``
fixture of ``conftest.py`` does so once per test session, in a subprocess on one thread, so that
stanza's seeds and loggers stay out of the tests' process.
"""

import json
import os
import random
import shutil
import sys
import time
import types
from pathlib import Path

PACKAGE = "tiny"
LANG = "en"

# The toy grammar's words, by preterminal.
_WORDS = {
    "DT": ["the", "a", "every", "this"],
    "JJ": ["small", "old", "red", "happy", "new"],
    "NN": ["cat", "dog", "man", "house", "book", "garden", "city", "film"],
    "NNS": ["cats", "people", "books", "years"],
    "NNP": ["John", "Mary", "Paris", "London"],
    "PRP": ["he", "she", "it", "they", "we"],
    "VBD": ["saw", "liked", "found", "took", "wrote"],
    "VBD_INTRANSITIVE": ["sat", "slept", "ran", "arrived"],
    "VB": ["see", "take", "find", "read"],
    "MD": ["will", "can", "must"],
    "IN": ["in", "on", "with", "near", "from"],
    "VBD_SAY": ["said", "thought", "knew"],
    "RB": ["never", "often", "quickly"],
    "CD": ["two", "three", "10"],
}


def treebank(num_trees: int, seed: int) -> list[str]:
    """``num_trees`` bracketed trees (one per line, ``(ROOT (S ...))``) of the toy grammar: noun
    phrases with determiners, adjectives, numbers, possessives (``'s``), prepositional phrases and a
    bracketed aside (``-LRB-``/``-RRB-``); transitive, intransitive, modal and saying verbs (the
    last with an SBAR), adverbs and commas."""
    rng = random.Random(seed)

    def word(tag: str) -> str:
        label = tag.split("_")[0]
        return f"({label} {rng.choice(_WORDS[tag])})"

    def noun_phrase(depth: int) -> str:
        r = rng.random()
        if r < 0.12:
            return f"(NP {word('NNP')})"
        if r < 0.22:
            return f"(NP {word('PRP')})"
        if r < 0.30:
            return f"(NP {word('CD')} {word('NNS')})"
        if r < 0.36 and depth < 2:
            return f"(NP (NP {word('NNP')} (POS 's)) {word('NN')})"
        adjective = f" {word('JJ')}" if rng.random() < 0.3 else ""
        phrase = f"(NP {word('DT')}{adjective} {word('NN')})"
        if depth < 2 and rng.random() < 0.2:
            return f"(NP {phrase} {prepositional_phrase(depth + 1)})"
        if depth < 1 and rng.random() < 0.1:
            return f"(NP {phrase} (PRN (-LRB- -LRB-) {noun_phrase(depth + 1)} (-RRB- -RRB-)))"
        return phrase

    def prepositional_phrase(depth: int) -> str:
        return f"(PP {word('IN')} {noun_phrase(depth)})"

    def verb_phrase(depth: int) -> str:
        r = rng.random()
        if r < 0.3:
            phrase = f"(VP {word('VBD')} {noun_phrase(depth)})"
        elif r < 0.5:
            phrase = f"(VP {word('VBD_INTRANSITIVE')} {prepositional_phrase(depth)})"
        elif r < 0.65:
            phrase = f"(VP {word('MD')} (VP {word('VB')} {noun_phrase(depth)}))"
        elif r < 0.8 and depth < 1:
            phrase = f"(VP {word('VBD_SAY')} (SBAR (IN that) {clause(depth + 1)}))"
        else:
            phrase = f"(VP {word('VBD')} {noun_phrase(depth)} {prepositional_phrase(depth)})"
        if rng.random() < 0.15:
            phrase = f"(VP {word('RB')} {phrase})"
        return phrase

    def clause(depth: int) -> str:
        return f"(S {noun_phrase(depth)} {verb_phrase(depth)})"

    trees = []
    for _ in range(num_trees):
        body = clause(0)[len("(S "):-1]
        if rng.random() < 0.15:
            body = f"{prepositional_phrase(1)} (, ,) {body}"
        trees.append(f"(ROOT (S {body} (. .)))")
    return trees


def train_tiny_english(directory: Path) -> Path:
    """Train the tagger and the constituency parser into ``directory``/models (stanza's layout);
    returns that folder. The work files stay in ``directory``/work."""
    import torch
    from stanza.models import constituency_parser, tagger
    from stanza.models.common.pretrain import Pretrain
    from stanza.models.constituency import parser_training
    from stanza.models.constituency.tree_reader import read_trees

    work, models = directory / "work", directory / "models"
    work.mkdir(parents=True, exist_ok=True)
    files = {name: models / LANG / name / f"{PACKAGE}.pt" for name in ("pretrain", "pos", "constituency")}
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for split, size, seed in (("train", 60, 1), ("dev", 6, 2)):
        (work / f"{split}.mrg").write_text("\n".join(treebank(size, seed)) + "\n", encoding="utf-8")
        _write_conllu(work / f"{split}.conllu", read_trees((work / f"{split}.mrg").read_text(), use_tqdm=False))

    train_trees = read_trees((work / "train.mrg").read_text(), use_tqdm=False)
    rng = random.Random(0)
    words = sorted({leaf for tree in train_trees for leaf in tree.leaf_labels()})
    (work / "vectors.txt").write_text("".join(
        word + " " + " ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(8)) + "\n" for word in words))
    Pretrain(str(files["pretrain"]), str(work / "vectors.txt")).load()  # writes the .pt

    tagger.main([
        "--train_file", str(work / "train.conllu"), "--eval_file", str(work / "dev.conllu"),
        "--output_file", str(work / "dev.tagged.conllu"), "--wordvec_pretrain_file", str(files["pretrain"]),
        "--lang", LANG, "--shorthand", f"{LANG}_{PACKAGE}", "--save_dir", str(files["pos"].parent),
        "--save_name", files["pos"].name, "--hidden_dim", "16", "--char_hidden_dim", "16",
        "--deep_biaff_hidden_dim", "16", "--composite_deep_biaff_hidden_dim", "8", "--word_emb_dim", "8",
        "--char_emb_dim", "8", "--tag_emb_dim", "8", "--transformed_dim", "8", "--num_layers", "1",
        "--max_steps", "120", "--eval_interval", "60", "--batch_size", "64", "--lr", "0.02", "--cpu",
    ])

    class LaterIsBetter:
        """Stands in for CoreNLP's EvalB scorer (Java): each dev score beats the last, so that the
        model kept (the trainer keeps the best on the dev set) is the last epoch's."""

        calls = 0

        def __init__(self, kbest=None):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def process(self, results):
            LaterIsBetter.calls += 1
            score = LaterIsBetter.calls / 1000
            return types.SimpleNamespace(f1=score, treeF1=score, HasField=lambda name: False)

    parser_training.EvaluateParser = LaterIsBetter
    constituency_parser.main([
        "--train_file", str(work / "train.mrg"), "--eval_file", str(work / "dev.mrg"),
        "--wordvec_pretrain_file", str(files["pretrain"]), "--lang", LANG, "--shorthand", f"{LANG}_{PACKAGE}",
        "--save_dir", str(files["constituency"].parent), "--save_name", files["constituency"].name,
        "--no_retag", "--cpu", "--no_checkpoint", "--epochs", "12", "--epoch_size", "60", "--hidden_size", "16",
        # one optimiser, no dropout, no dynamic oracle: on 60 trees these learn some structure within seconds
        "--no_multistage", "--optim", "adamw", "--learning_rate", "0.01", "--train_batch_size", "10",
        "--word_dropout", "0", "--predict_dropout", "0", "--lstm_input_dropout", "0", "--oracle_initial_epoch", "100",
    ])

    with_pretrain = {"dependencies": [{"model": "pretrain", "package": PACKAGE}]}
    (models / "resources.json").write_text(json.dumps({LANG: {
        "lang_name": "English",
        "tokenize": {PACKAGE: {}}, "pos": {PACKAGE: with_pretrain}, "constituency": {PACKAGE: with_pretrain},
        "pretrain": {PACKAGE: {}},
        "default_processors": {"tokenize": PACKAGE, "pos": PACKAGE, "constituency": PACKAGE},
        "packages": {"default": {"tokenize": PACKAGE, "pos": PACKAGE, "constituency": PACKAGE}},
    }}, indent=1))
    return models


def _write_conllu(path: Path, trees) -> None:
    """The trees' words and tags as CoNLL-U, the PTB tag as both UPOS and XPOS (a chain of heads:
    the tagger reads no heads, but stanza's scorer wants some)."""
    blocks = []
    for number, tree in enumerate(trees, 1):
        lines = [f"# sent_id = {number}"]
        for i, preterminal in enumerate(tree.yield_preterminals(), 1):
            tag, form = preterminal.label, preterminal.children[0].label
            lines.append(f"{i}\t{form}\t_\t{tag}\t{tag}\t_\t{i - 1}\t{'root' if i == 1 else 'dep'}\t_\t_")
        blocks.append("\n".join(lines) + "\n\n")
    path.write_text("".join(blocks), encoding="utf-8")


def with_second_package(models: Path, destination: Path) -> Path:
    """A copy of the ``models`` folder whose default English package names a parser (``big``) that was
    never downloaded, beside the package ``small`` whose parser is the tiny one: only a run given
    ``small`` by name can parse."""
    shutil.copytree(models, destination)
    resources = json.loads((destination / "resources.json").read_text())
    english = resources["en"]
    english["constituency"]["big"] = english["constituency"]["tiny"]
    english["packages"] = {"default": {"tokenize": "tiny", "pos": "tiny", "constituency": "big"},
                           "small": {"tokenize": "tiny", "pos": "tiny", "constituency": "tiny"}}
    (destination / "resources.json").write_text(json.dumps(resources))
    return destination


if __name__ == "__main__":
    start = time.monotonic()
    train_tiny_english(Path(sys.argv[1]))
    print(f"trained the tiny stanza models in {time.monotonic() - start:.1f} s", file=sys.stderr)

