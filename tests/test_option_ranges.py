"""Numeric model options outside their range are refused at model build, in one line naming the
option and its value (``option(..., minimum=/above=/maximum=)`` and ``refuse_out_of_range``),
before any silent fallback or a traceback at the first forward pass; the edge values still build."""

import pytest
from fairseq import tasks

import helpers

pytestmark = pytest.mark.usefixtures("one_thread")

TREE = "tree_translation"
PARENTS = "dependency_translation"

# (databin fixture, task, arch, option, refused value, message's range, an edge value that builds)
REFUSED = [
    ("parent_databin", PARENTS, "pascal_transformer_tiny", "--pascal-window", "-1", "at least 0", "0"),
    # 0 was read as unset (``x or default``): the heads' number of branches, max(1, d // 2k) weights
    ("tiny_databin", TREE, "tree_composition_transformer_tiny", "--composition-branches", "0", "at least 1", "1"),
    ("tiny_databin", TREE, "tree_pe_transformer_tiny", "--tree-pe-num-weights", "0", "at least 1", "1"),
    # tracebacks: an index -1 at the first forward pass, a ZeroDivisionError, torch's size errors
    ("tiny_databin", TREE, "tree_transformer_tiny", "--hier-embed-size", "0", "at least 1", "1"),
    ("tiny_databin", TREE, "tree_transformer_tiny", "--hier-embed-size", "-3", "at least 1", "1"),
    ("tiny_databin", TREE, "tree_pe_transformer_tiny", "--tree-pe-max-depth", "0", "at least 1", "1"),
    ("tiny_databin", TREE, "tree_pe_transformer_tiny", "--tree-pe-num-weights", "-1", "at least 1", "1"),
    ("tiny_databin", TREE, "tree_composition_transformer_tiny", "--composition-branches", "-4", "at least 1", "1"),
    ("tiny_databin", TREE, "tree_composition_transformer_tiny", "--composition-layers", "0", "at least 1", "1"),
    ("tiny_databin", TREE, "treeformer_tiny", "--chart-max-height", "0", "at least 1", "1"),
    ("parent_databin", PARENTS, "pascal_transformer_tiny", "--pascal-heads", "-1", "at least 0", "0"),
    ("parent_databin", PARENTS, "pascal_transformer_tiny", "--pascal-sigma", "0.0", "above 0", "0.5"),
    ("parent_databin", PARENTS, "pascal_transformer_tiny", "--pascal-parent-ignoring", "1.5", "from 0 to 1", "1.0"),
    ("parent_databin", PARENTS, "pascal_transformer_tiny", "--pascal-parent-ignoring", "-0.1", "from 0 to 1", "0.0"),
]


def build_model(databin, *flags, arch, task):
    args = helpers.parse(databin, *flags, arch=arch, task=task)
    return tasks.setup_task(args).build_model(args)


@pytest.mark.parametrize("fixture, task, arch, flag, value, valid, edge", REFUSED,
                         ids=[f"{row[3]} {row[4]}" for row in REFUSED])
def test_out_of_range_is_refused_in_one_line(request, fixture, task, arch, flag, value, valid, edge):
    databin = request.getfixturevalue(fixture)
    with pytest.raises(ValueError) as refused:
        build_model(databin, flag, value, arch=arch, task=task)
    assert str(refused.value) == f"{flag} {value}: must be {valid}"
    model = build_model(databin, flag, edge, arch=arch, task=task)
    assert str(getattr(model.cfg, flag[2:].replace("-", "_"))) == edge


@pytest.mark.parametrize("arch, flag, default", [
    ("tree_composition_transformer_tiny", "--composition-branches", "composition_branches"),
    ("tree_pe_transformer_tiny", "--tree-pe-num-weights", "tree_pe_num_weights"),
])
def test_unset_still_means_the_default(tiny_databin, arch, flag, default):
    model = build_model(tiny_databin, arch=arch, task=TREE)
    assert getattr(model.cfg, default) is None
    if flag == "--composition-branches":
        assert model.encoder.compositions[0].num_branches == model.cfg.encoder.attention_heads
    else:
        encoding = model.encoder.tree_positions
        assert encoding.num_weights == max(1, model.cfg.encoder.embed_dim // (2 * model.cfg.tree_pe_max_depth))
