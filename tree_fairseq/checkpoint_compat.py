"""fairseq checkpoints on torch >= 2.6.

torch >= 2.6 unpickles with ``weights_only=True`` by default and refuses the
``argparse.Namespace`` (and, in checkpoints of other fairseq builds, the
omegaconf objects and numpy scalars) that fairseq writes into a checkpoint,
so fairseq-generate dies with ``UnpicklingError``. Instead of turning the safe
loader off, we allow exactly those classes. Every fairseq CLI imports
``--user-dir`` before it reads a checkpoint, so importing tree_fairseq is
enough.
"""

import argparse
import collections
import typing

import numpy as np
import torch
from omegaconf import DictConfig, ListConfig
from omegaconf.base import ContainerMetadata, Metadata
from omegaconf.nodes import AnyNode

_numpy_core = getattr(np, "_core", None) or np.core  # renamed in numpy 2

FAIRSEQ_CHECKPOINT_GLOBALS = [
    argparse.Namespace,
    collections.defaultdict,
    typing.Any,
    DictConfig,
    ListConfig,
    ContainerMetadata,
    Metadata,
    AnyNode,
    dict,
    list,
    int,
    float,
    bool,
    str,
    _numpy_core.multiarray.scalar,
    np.dtype,
    type(np.dtype(np.float64)),
    type(np.dtype(np.float32)),
]

torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_GLOBALS)
