"""One rank of fairseq's training engine, for tests/test_distributed.py: parses fairseq-train's
arguments, joins the process group through fairseq's own ``call_main`` (``--distributed-*``
options), runs ``--max-update`` updates with fairseq's Trainer, and saves the parameters and the
per-update losses of this rank to ``OUT``.

    python tests/distributed_worker.py OUT FAIRSEQ-TRAIN-ARGS...

fairseq-train itself saves only on the first rank; this keeps every rank's parameters, so that
the test can check that the ranks end identical."""

import sys

import numpy
import torch
from fairseq import distributed_utils, options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.logging import metrics
from fairseq.trainer import Trainer


def train(cfg, out: str) -> None:
    # as fairseq-train: the same seed on every rank gives every rank the same initial model
    numpy.random.seed(cfg.common.seed)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    initial = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    trainer = Trainer(cfg, task, model, criterion)
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=True)
    batches = epoch_itr.next_epoch_itr(shuffle=False)
    update_freq = cfg.optimization.update_freq[0]
    losses = []
    group = []
    for sample in batches:
        group.append(sample)
        if len(group) < update_freq:
            continue
        with metrics.aggregate("train_inner"):
            log = trainer.train_step(group)
        group = []
        losses.append(float(log["loss"]))
        if trainer.get_num_updates() >= cfg.optimization.max_update:
            break
    params = {name: tensor.detach().clone() for name, tensor in trainer.model.state_dict().items()}
    torch.save({"initial": initial, "params": params, "losses": losses, "rank": cfg.distributed_training.distributed_rank}, out)


def main(argv: list[str]) -> None:
    out, train_args = argv[0], argv[1:]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, train_args)
    cfg = convert_namespace_to_omegaconf(args)
    distributed_utils.call_main(cfg, train, out=out)


if __name__ == "__main__":
    main(sys.argv[1:])
