"""The training batches of a resumed run: those the same run would have trained on uninterrupted.

fairseq builds a training split's batches once, when the trainer first asks for them, and keeps them
for every later epoch, only shuffling their order with the seed and each epoch's number
(``FairseqTask.get_batch_iterator`` keeps the iterator across epochs, as it does for every task of
this package). To build them, it sorts the sentences by size, ties broken by a random permutation
drawn with the seed *plus the epoch the batches are built in*, and cuts the sorted sentences into
batches of at most ``--max-tokens``. An uninterrupted run builds them in epoch 1; a run resumed from
a checkpoint builds them in the epoch it resumes in (the next one after an end-of-epoch checkpoint,
the same one after a mid-epoch checkpoint of ``--save-interval-updates``). A resume in epoch 2 or
later therefore broke the ties with another permutation: sentences of the same sizes traded batches,
and where what ``--max-tokens`` counts is not one of the sort keys (``--batch-tokens tree`` counts
source leaves plus nodes, the sort is by source tokens and target tokens only) the batches also
held other numbers of sentences, and an epoch could have another number of them.

:class:`ResumedBatches` builds a kept iterator's batches as of epoch 1 whatever the epoch it is
asked for, then moves the iterator to that epoch: a resumed run shuffles, skips (mid-epoch) and
trains on exactly the batches of the uninterrupted one. An iterator fairseq builds anew in every
epoch (sharded data, ``--rebuild-batches``, ``--update-epoch-batch-itr``) is built in the same epoch
by an uninterrupted and a resumed run, and is left as fairseq builds it.

fairseq's own tasks (``--task translation``, the transformer) are not changed: their resumed runs
still break the ties with the epoch they resume in. So with ``--batch-tokens text`` a resumed tree
run trains on the batches of an *uninterrupted* translation run, which a translation run resumed in
epoch 2 or later does not (it keeps their sizes, not their sentences).
"""

import inspect
import logging

from fairseq.tasks import FairseqTask

logger = logging.getLogger(__name__)

_BATCH_ITERATOR = inspect.signature(FairseqTask.get_batch_iterator)


class ResumedBatches:
    """Mix in before a fairseq task class: its training batches do not depend on the epoch a run
    (re)starts in (module docstring)."""

    def get_batch_iterator(self, dataset, *args, **kwargs):
        try:
            asked = _BATCH_ITERATOR.bind(self, dataset, *args, **kwargs)
        except TypeError:  # not fairseq's signature: nothing to change
            return super().get_batch_iterator(dataset, *args, **kwargs)
        asked.apply_defaults()
        options = {name: value for name, value in asked.arguments.items() if name != "self"}
        epoch = options["epoch"]
        if epoch <= 1 or dataset in self.dataset_to_epoch_iter or not self._keeps_batches(dataset, options):
            # epoch 1, the iterator already built (fairseq hands it back), or one built anew every epoch
            return super().get_batch_iterator(dataset, *args, **kwargs)
        logger.info(f"building the training batches as of epoch 1, as an uninterrupted run built them, for a run "
                    f"(re)starting in epoch {epoch}")
        iterator = super().get_batch_iterator(**{**options, "epoch": 1})
        iterator.epoch = epoch  # the epoch it was asked for, as fairseq would have built it in
        dataset.set_epoch(epoch)
        return iterator

    def _keeps_batches(self, dataset, options) -> bool:
        """Whether fairseq keeps the iterator (its batches) from epoch to epoch, as it decides."""
        return (not options["disable_iterator_cache"] and not options["update_epoch_batch_itr"]
                and self.can_reuse_epoch_itr(dataset) and not getattr(self.cfg, "rebuild_batches", False))
