"""fairseq checkpoints on torch >= 2.6, and a reader that names a file that is none.

torch >= 2.6 unpickles with ``weights_only=True`` by default and refuses the
``argparse.Namespace`` (and, in checkpoints of other fairseq builds, the
omegaconf objects and numpy scalars) that fairseq writes into a checkpoint,
so fairseq-generate dies with ``UnpicklingError``. Instead of turning the safe
loader off, we allow exactly those classes. Every fairseq CLI imports
``--user-dir`` before it reads a checkpoint, so importing tree_fairseq is
enough.

:func:`load_checkpoint` reads a checkpoint for the plugin's own tools (averaging, train.sh's
checks before a resume, generate.sh): a file cut short or of another kind is named in one line
instead of torch's traceback.
"""

import argparse
import collections
import os
import pickle
import re
import typing
import zipfile

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


def load_checkpoint(path: str, mmap: bool = False, verify: bool = False) -> dict:
    """The fairseq checkpoint ``path``, read on the CPU (``mmap``: its tensors mapped from the file,
    not read). ValueError naming the file when it is none: empty, cut short (a run killed, or a disk
    that filled up, while fairseq wrote or copied it), damaged (``verify``: every member's checksum
    is checked, which reads the whole file), or another kind of file."""
    problem = _damage(path, verify)
    if problem is None:
        try:
            state = torch.load(path, map_location="cpu", mmap=mmap and zipfile.is_zipfile(path))
        except OSError:
            raise
        except pickle.UnpicklingError as error:
            if "weights only" in str(error).lower():
                raise ValueError(f"{path}: torch's safe loader refuses what it holds "
                                 f"({_first_line(error)})") from None
            problem = _first_line(error)
        except Exception as error:  # what torch's readers raise on bytes that are no checkpoint
            problem = _first_line(error)
        else:
            if isinstance(state, dict) and "model" in state:
                return state
            problem = "it holds no model parameters"
    raise ValueError(f"{path} is truncated or not a checkpoint ({problem})")


def _damage(path: str, verify: bool) -> str | None:
    """What makes ``path`` no file torch.save writes, from its bytes (None: nothing found)."""
    if os.path.isdir(path):
        return "it is a directory"
    size = os.path.getsize(path)
    if size == 0:
        return "it is empty"
    with open(path, "rb") as f:
        head = f.read(2)
    if head == b"PK":  # torch's zip format, whose table of contents is at the end of the file
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip() if verify else None
        except (zipfile.BadZipFile, EOFError):
            return f"cut short: {size:,} bytes, without the end of its zip archive"
        return f"damaged: {bad} fails its checksum" if bad else None
    if head[:1] != b"\x80":  # torch's legacy format is a pickle
        return "not a file torch.save writes"
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0][:200] if text else type(error).__name__)


_CHECKPOINT_NAME = re.compile(r"checkpoint(\d+|_\d+_\d+|_best|_last)\.pt")


def newest_readable_checkpoint(directory: str, but: str) -> str | None:
    """The newest checkpoint fairseq wrote in ``directory`` (checkpointN.pt, checkpoint_E_U.pt,
    checkpoint_best.pt, checkpoint_last.pt) other than ``but`` that can be read; None when none can."""
    found = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if _CHECKPOINT_NAME.fullmatch(name) and os.path.isfile(path) and not os.path.samefile(path, but):
            found.append((os.path.getmtime(path), path))
    for _, path in sorted(found, reverse=True):
        try:
            load_checkpoint(path, mmap=True, verify=True)
        except (ValueError, OSError):
            continue
        return path
    return None
