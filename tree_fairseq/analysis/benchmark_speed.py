"""Speed and memory of a tree model against fairseq's transformer: the measurements and the report
of ``scripts/benchmark_speed.py``, whose docstring says what is measured, how, and against which
targets, and whose command line gives the options (the namespace ``a`` here).

:func:`measure` runs every measurement (training speed and its FLOP ideal, generation speed and
its ideal, training-step memory, encoder memory over source length) and collects them in
:class:`Measurements`, with what could not be measured in its ``errors``; :func:`report` prints
them as the script's report, :func:`summary` gives them as the script's ``--json``
(``scripts/benchmark_all.py`` and :mod:`.benchmark_table` read it). What a family needs beyond
fairseq's transformer (its task, its elementwise FLOPs) is :mod:`.benchmark_models`.
"""

import itertools
import math
import os
import sys
import time
import traceback
from argparse import Namespace
from dataclasses import dataclass, field

import torch
from fairseq import options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

import tree_fairseq  # noqa: F401  (registers the plugin's tasks and models with fairseq)
from tree_fairseq.analysis.benchmark_models import (
    MethodFlops,
    reads_parents,
    synthetic_parent_spans,
    task_for,
    train_target,
)
from tree_fairseq.data import collate_trees
from tree_fairseq.models.common import TreeSourceTransformerModel
from tree_fairseq.trees import node_tensors, trivial_tree

MIB = 2**20
TEXT_KEYS = ("src_tokens", "src_lengths", "prev_output_tokens")
# Training's target is the family's (benchmark_models.train_target); generation's measured / ideal is 0.9.
TARGETS = {"train": 0.9, "generate": 0.8, "memory": 1.5, "growth": 2.0}


# --- devices and measurement -------------------------------------------------------------------


class Device:
    """Where the models run; times and measures peak memory there."""

    def __init__(self, use_cuda: bool):
        self.cuda = use_cuda

    def describe(self) -> str:
        if self.cuda:
            return f"GPU ({torch.cuda.get_device_name()}), torch {torch.__version__}"
        return f"CPU (torch threads: {torch.get_num_threads()}), torch {torch.__version__}"

    def to(self, sample):
        return utils.move_to_cuda(sample) if self.cuda else sample

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def timed(self, fn):
        """``(fn(), wall-clock seconds, process CPU seconds)``."""
        self.sync()
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        self.sync()
        return result, time.perf_counter() - wall, time.process_time() - cpu

    def peak(self, fn):
        """``(fn(), bytes)``: the most memory allocated at once during ``fn`` above the level at
        its start (tensors alive before and after ``fn`` are not counted)."""
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            result = fn()
            torch.cuda.synchronize()
            return result, torch.cuda.max_memory_allocated() - before
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            result = fn()
        events = [e for e in prof.profiler.kineto_results.events()
                  if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
        events.sort(key=lambda e: e.start_ns())  # stable: same-time events keep their recorded order
        level = top = 0
        for event in events:
            level += event.nbytes()
            top = max(top, level)
        return result, top

    def method(self) -> str:
        if self.cuda:
            return "torch.cuda.max_memory_allocated (caching allocator statistics)"
        return ("running sum of the CPU allocator's allocation/free events (torch.profiler, "
                "profile_memory=True); resident state = unique storages of parameters, buffers "
                "and optimizer state")

    def self_check(self) -> tuple[float, float]:
        """Peak of a known pattern: 4 MiB and 8 MiB alive together, both freed, then 2 MiB:
        ``(expected, measured)`` in MiB."""
        device = "cuda" if self.cuda else "cpu"

        def pattern():
            a = torch.empty(MIB, device=device)  # float32: 4 MiB
            b = torch.empty(2 * MIB, device=device)
            del a, b
            return torch.ones(MIB // 2, device=device)

        _, measured = self.peak(pattern)
        return 12.0, measured / MIB


# --- the two systems ----------------------------------------------------------------------------


class System:
    """One model with its fairseq task, criterion and Trainer, built as fairseq-train builds them."""

    def __init__(self, name, arch, fairseq_argv, seed, text_only):
        self.name = name
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(parser, input_args=fairseq_argv)
        self.cfg = convert_namespace_to_omegaconf(args)
        utils.set_torch_seed(seed)
        self.task = tasks.setup_task(self.cfg.task)
        self.model = self.task.build_model(self.cfg.model)
        self.criterion = self.task.build_criterion(self.cfg.criterion)
        self.trainer = Trainer(self.cfg, self.task, self.model, self.criterion)
        self.model = self.trainer.model  # moved to the device (and to fp16)
        self.text_only = text_only
        # Models that read the source text only (constituent attention, Treeformer) accept the
        # tree keys of a tree_translation batch in forward, but their encoder takes the text only.
        self.encoder_reads_trees = isinstance(self.trainer.get_model(), TreeSourceTransformerModel)
        # PASCAL's encoder reads the text and each token's parent (src_parent_spans).
        self.encoder_reads_parents = reads_parents(arch)
        # The method's elementwise work that the FLOP counter leaves out (0 for most models), per phase.
        self.method_flops = {"train": 0, "generate": 0}
        self.losses = []

    def view(self, sample):
        """The batch as this model's task collates it: the transformer gets no tree keys."""
        if not self.text_only:
            return sample
        return {**sample, "net_input": {k: sample["net_input"][k] for k in TEXT_KEYS}}

    def train_step(self, sample):
        log = self.trainer.train_step([self.view(sample)])
        if log is not None and "loss" in log:
            self.losses.append(float(log["loss"]))

    def step_flops(self, sample) -> int:
        self.model.train()
        # The counter has no formula for the CPU flash-attention kernel; the math backend
        # counts scaled_dot_product_attention as its matmuls, on every device alike.
        with (sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter,
              MethodFlops(self.trainer.get_model()) as method):
            loss, _, _ = self.criterion(self.model, self.view(sample))
            loss.backward()
        self.trainer.zero_grad()
        self.method_flops["train"] += method.total
        return counter.get_total_flops() + method.total

    def resident_bytes(self) -> int:
        """Parameters, buffers, gradients and optimizer state: unique storages, in bytes."""
        tensors = list(self.model.parameters()) + list(self.model.buffers())
        tensors += [p.grad for p in self.model.parameters() if p.grad is not None]
        for state in self.trainer.optimizer.optimizer.state.values():
            tensors += [v for v in state.values() if torch.is_tensor(v)]
        storages = {}
        for t in tensors:
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())

    def encoder_forward(self, net_input):
        if self.encoder_reads_parents:
            return self.model.encoder(net_input["src_tokens"], net_input["src_lengths"], net_input["src_parent_spans"])
        if not self.encoder_reads_trees:
            return self.model.encoder(net_input["src_tokens"], net_input["src_lengths"])
        return self.model.encoder(**{k: v for k, v in net_input.items() if k != "prev_output_tokens"})

    def dims(self) -> dict:
        encoder, decoder = self.model.encoder, self.model.decoder
        # An encoder may have no transformer layers (the attention composition over embeddings).
        ffn = encoder.layers[0].fc1.out_features if len(encoder.layers) else "-"
        heads = encoder.layers[0].self_attn.num_heads if len(encoder.layers) else "-"
        return {
            "embed dim (enc/dec)": f"{encoder.embed_tokens.embedding_dim}/{decoder.embed_tokens.embedding_dim}",
            "ffn dim (enc/dec)": f"{ffn}/{decoder.layers[0].fc1.out_features}",
            "heads (enc/dec)": f"{heads}/{decoder.layers[0].self_attn.num_heads}",
            "layers (enc+dec)": f"{len(encoder.layers)}+{len(decoder.layers)}",
        }


def fairseq_argv(a, device, task, arch):
    argv = [
        a.data, "--task", task, "--arch", arch,
        "--share-decoder-input-output-embed",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
        "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4000",
        "--dropout", str(a.dropout), "--weight-decay", "0.0001",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--max-tokens", str(a.max_tokens), "--seed", str(a.seed),
    ]
    if a.source_lang:
        argv += ["--source-lang", a.source_lang]
    if a.target_lang:
        argv += ["--target-lang", a.target_lang]
    for option, value in (("embed-dim", a.embed_dim), ("ffn-embed-dim", a.ffn_dim),
                          ("attention-heads", a.heads)):
        if value is not None:
            argv += [f"--encoder-{option}", str(value), f"--decoder-{option}", str(value)]
    if a.encoder_layers is not None:
        argv += ["--encoder-layers", str(a.encoder_layers)]
    if a.decoder_layers is not None:
        argv += ["--decoder-layers", str(a.decoder_layers)]
    if not device.cuda:
        argv.append("--cpu")
    if a.fp16:
        argv.append("--fp16")
    return argv


# --- the measurements ---------------------------------------------------------------------------


def training_batches(task, systems, a, count):
    """``count`` batches of fairseq's training iterator for the tree task (next epochs if needed)."""
    max_positions = utils.resolve_max_positions(task.max_positions(), *(s.model.max_positions() for s in systems))
    batches, epoch = [], 1
    while len(batches) < count:
        iterator = task.get_batch_iterator(
            dataset=task.dataset("train"), max_tokens=a.max_tokens, max_positions=max_positions,
            ignore_invalid_inputs=True, required_batch_size_multiple=8, seed=a.seed, epoch=epoch,
        ).next_epoch_itr(shuffle=True)
        batches += list(itertools.islice(iterator, count - len(batches)))
        epoch += 1
    return batches


def alternating(pair, index):
    """ABBA order, so that slow and fast moments of a shared machine hit both models alike."""
    return pair if index % 2 == 0 else pair[::-1]


class Timings:
    """Seconds per timed unit (one batch) and model, on the wall clock and on the process CPU
    clock (all threads; less sensitive to other jobs taking the cores, though it counts
    spin-waiting). Both models do the same work per unit."""

    def __init__(self):
        self.wall = {"transformer": [], "tree": []}
        self.cpu = {"transformer": [], "tree": []}

    def add(self, name, wall, cpu):
        self.wall[name].append(wall)
        self.cpu[name].append(cpu)

    def total(self, name, clock="wall"):
        return sum(getattr(self, clock)[name])

    def speed_ratio(self, clock="wall"):
        """tree speed / transformer speed over all units."""
        return self.total("transformer", clock) / self.total("tree", clock)

    def chunk_ratios(self, chunks):
        """:meth:`speed_ratio` of each of ``chunks`` consecutive runs of units (rounds, halves)."""
        size = len(self.wall["tree"]) // chunks
        return [sum(self.wall["transformer"][k * size:(k + 1) * size]) / sum(self.wall["tree"][k * size:(k + 1) * size])
                for k in range(chunks)]

    def paired(self):
        """Wall-clock speed ratio per unit (the two models ran back to back): 10th, 50th, 90th percentile."""
        ratios = sorted(b / t for b, t in zip(self.wall["transformer"], self.wall["tree"]))
        return tuple(ratios[min(len(ratios) - 1, int(q * len(ratios)))] for q in (0.1, 0.5, 0.9))


def measure_training(device, pair, batches, warmup):
    """Timings of the updates after ``warmup`` and the target words they trained on."""
    timings, words = Timings(), 0
    for i, sample in enumerate(batches):
        for system in alternating(pair, i):
            _, wall, cpu = device.timed(lambda: system.train_step(sample))
            if i >= warmup:
                timings.add(system.name, wall, cpu)
        if i >= warmup:
            words += sample["ntokens"]
    return timings, words


def measure_flops(pair, batches):
    return {s.name: sum(s.step_flops(b) for b in batches) for s in pair}


def measure_training_memory(device, pair, batches):
    """Per system: (total peak, peak above the resident parameters, buffers and optimizer
    state), in bytes, maximised over ``batches``. The gradients are freed before the step (the
    step frees them first anyway): the CPU profiler does not see the release of memory
    allocated before it started."""
    result = {}
    for system in pair:
        total = above = 0
        for sample in batches:
            system.trainer.zero_grad()
            # this system's own tensors: on CUDA, memory_allocated() would also count the other
            # model, its optimizer state and the batches, and pull every ratio towards 1
            resident = system.resident_bytes()
            _, peak = device.peak(lambda: system.train_step(sample))
            total, above = max(total, resident + peak), max(above, peak)
        result[system.name] = (total, above)
    return result


def generation_batches(task, a):
    dataset = task.dataset(a.gen_split)
    examples = sorted((dataset[i] for i in range(min(a.gen_sentences, len(dataset)))),
                      key=lambda example: -len(example["source"]))
    return [dataset.collater(examples[k:k + a.gen_batch_size]) for k in range(0, len(examples), a.gen_batch_size)]


def build_generators(pair, batches, a):
    """``({system name: SequenceGenerator}, what the length rule is)`` for the generation rows."""
    if a.free_length:
        length_args = {"max_len_a": 0, "max_len_b": 200, "min_len": 1}
        length_note = "fairseq-generate's stopping: max-len-a 0, max-len-b 200"
    else:
        reference = sum(int(b["target"].ne(pair[0].task.target_dictionary.pad()).sum()) - b["nsentences"]
                        for b in batches) / sum(b["nsentences"] for b in batches)
        length = max(1, round(reference))
        length_args = {"max_len_a": 0, "max_len_b": length, "min_len": length}
        length_note = f"every hypothesis forced to {length} tokens + EOS (min_len = max_len = mean reference length)"
    generators = {s.name: s.task.build_generator([s.model], Namespace(beam=a.beam, **length_args)) for s in pair}
    return generators, length_note


def measure_generation(device, pair, batches, a):
    generators, length_note = build_generators(pair, batches, a)
    for system in pair:
        system.model.eval()
    timings, sentences = Timings(), 0
    tokens = {s.name: 0 for s in pair}
    with torch.no_grad():
        # The first batch once more first, untimed, as warm-up.
        for i, sample in enumerate([batches[0]] + batches * a.gen_rounds):
            for system in alternating(pair, i):
                hypos, wall, cpu = device.timed(lambda: system.task.inference_step(
                    generators[system.name], [system.model], system.view(sample)))
                if i > 0:
                    timings.add(system.name, wall, cpu)
                    tokens[system.name] += sum(len(h[0]["tokens"]) for h in hypos)
            if i > 0:
                sentences += sample["nsentences"]
    return timings, sentences, tokens, length_note


def measure_generation_flops(pair, batches, a):
    """FLOPs of generating every batch once (encoder and every decoder step of the beam search),
    per system: the work each model has to do, whatever its speed. Counted as for training
    (math-backend attention; matmul ops, and the method's elementwise work where it has some)."""
    generators, _ = build_generators(pair, batches, a)
    result = {}
    with torch.no_grad():
        for system in pair:
            system.model.eval()
            with (sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter,
                  MethodFlops(system.trainer.get_model()) as method):
                for sample in batches:
                    system.task.inference_step(generators[system.name], [system.model], system.view(sample))
            system.method_flops["generate"] = method.total
            result[system.name] = counter.get_total_flops() + method.total
    return result


def synthetic_batch(task, length, batch_size, device):
    """``batch_size`` random sentences of ``length`` tokens (+ EOS) with balanced trees, in the
    layout of :mod:`tree_fairseq.data.tree_pair_dataset`; with each token's parent (a random
    projective tree) for a task that gives parents."""
    dictionary, node_dict = task.source_dictionary, task.node_dictionary
    tokens = torch.randint(dictionary.nspecial, len(dictionary), (batch_size, length + 1))
    tokens[:, -1] = dictionary.eos()
    lengths = torch.full((batch_size,), length + 1, dtype=torch.long)
    tree = trivial_tree([str(i) for i in range(length)], "balanced")
    labels, spans = node_tensors(tree, node_dict.index)
    net_input = {"src_tokens": tokens, "src_lengths": lengths}
    net_input.update(collate_trees([labels] * batch_size, [spans] * batch_size, tokens, lengths,
                                   left_pad=True, label_pad=node_dict.pad()))
    if getattr(task, "source_parents", False):
        net_input["src_parent_spans"] = synthetic_parent_spans(length, batch_size)
    return device.to(net_input)


def measure_encoder_memory(device, pair, task, lengths, batch_size):
    """{(mode, system name): [peak bytes per length]} for one encoder forward."""
    inputs = [synthetic_batch(task, n, batch_size, device) for n in lengths]
    result = {}
    for mode in ("training", "inference"):
        for system in pair:
            system.model.train(mode == "training")
            with torch.set_grad_enabled(mode == "training"):
                for net_input in inputs:  # warm-up: lazily grown tables, first-call allocations
                    system.encoder_forward(net_input)
                peaks = []
                for net_input in inputs:
                    _, peak = device.peak(lambda: system.encoder_forward(net_input))
                    peaks.append(peak)
            result[mode, system.name] = peaks
    return result


# --- report -------------------------------------------------------------------------------------


def verdict(value, target, at_least):
    if value is None or not math.isfinite(value):
        return "ERROR"
    return "PASS" if (value >= target if at_least else value <= target) else "FAIL"


def mib(x):
    return f"{x / MIB:.1f} MiB"


def table(rows, header):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def load_note():
    if not hasattr(os, "getloadavg"):
        return "n/a"
    return f"{os.getloadavg()[0]:.1f}"


def repeatability(timings, chunks, what):
    """Print the speed ratio of each chunk; warn when they differ by more than 10%."""
    ratios = timings.chunk_ratios(chunks)
    print(f"  speed ratio per {what}: {', '.join(f'{r:.3f}' for r in ratios)}")
    if max(ratios) > 1.1 * min(ratios):
        advice = "on an idle machine" if torch.get_num_threads() == 1 else "on an idle machine or with --threads 1"
        print(f"  NOTE: these differ by more than 10%, so the ratio is uncertain (a busy machine, or too few "
              f"batches); rerun {advice}, or with more --updates / --gen-rounds")


@dataclass
class Measurements:
    """What :func:`measure` took, for :func:`report`; a measurement that failed is None and named in
    ``errors``."""

    device: Device
    pair: tuple  # (baseline System, tree System)
    task: object
    lengths: list
    timed_batches: list
    flop_batches: list
    memory_batches: list
    gen_batches: list
    train: tuple | None
    memory: dict | None
    flops: dict | None
    generation: tuple | None
    gen_flops: dict | None
    sweep: dict | None
    memory_self_check: tuple  # (expected, measured) MiB
    load_at_start: str
    started: float
    errors: list = field(default_factory=list)


def measure(a) -> Measurements:
    """Every measurement of one run, the two models alternated on the same batches; prints only
    progress (stderr) and the tracebacks of what failed. Counts below 1 are refused before any
    measurement (the report divides by them); the command line's argument types refuse them first."""
    for name in ("updates", "flop_batches", "memory_batches", "gen_rounds"):
        if getattr(a, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(a, name)}: a whole number, 1 or more")
    device = Device(torch.cuda.is_available() and not a.cpu)
    lengths = [int(x) for x in a.lengths.split(",")]
    errors = []

    def attempt(what, fn):
        try:
            return fn()
        except Exception:  # a benchmark reports what it could not measure and goes on
            errors.append(what)
            print(f"ERROR in {what}:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            return None

    def progress(message):
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    started, load_at_start = time.perf_counter(), load_note()
    baseline = System("transformer", a.baseline_arch, fairseq_argv(a, device, "translation", a.baseline_arch), a.seed,
                      text_only=True)
    tree = System("tree", a.tree_arch, fairseq_argv(a, device, task_for(a.tree_arch), a.tree_arch), a.seed,
                  text_only=False)
    pair = (baseline, tree)
    task = tree.task
    task.load_dataset("train", combine=True)  # as fairseq-train: train, train1, ...
    task.load_dataset(a.gen_split)
    expected, measured = device.self_check()

    batches = [device.to(b) for b in training_batches(task, pair, a, a.warmup + a.updates)]
    timed_batches = batches[a.warmup:]
    flop_batches = timed_batches[:a.flop_batches]
    memory_batches = timed_batches[:a.memory_batches]
    progress(f"training {a.warmup} + {a.updates} updates per model")
    train = attempt("training speed", lambda: measure_training(device, pair, batches, a.warmup))
    progress("training-step peak memory")
    memory = attempt("training memory", lambda: measure_training_memory(device, pair, memory_batches))
    progress("training-step FLOPs")
    flops = attempt("FLOPs", lambda: measure_flops(pair, flop_batches))
    progress("generation")
    gen_batches = [device.to(b) for b in generation_batches(task, a)]
    generation = attempt("generation speed", lambda: measure_generation(device, pair, gen_batches, a))
    progress("generation FLOPs")
    gen_flops = attempt("generation FLOPs", lambda: measure_generation_flops(pair, gen_batches, a))
    progress("encoder memory over source length")
    sweep = attempt("encoder memory", lambda: measure_encoder_memory(device, pair, task, lengths, a.sweep_batch_size))
    return Measurements(device, pair, task, lengths, timed_batches, flop_batches, memory_batches, gen_batches,
                        train, memory, flops, generation, gen_flops, sweep, (expected, measured), load_at_start,
                        started, errors)


def report(a, m: Measurements) -> None:
    """The setup, the results against the targets, the memory sweep and how each was measured."""
    device, pair, task, lengths = m.device, m.pair, m.task, m.lengths
    baseline, tree = pair
    timed_batches, flop_batches, memory_batches, gen_batches = (
        m.timed_batches, m.flop_batches, m.memory_batches, m.gen_batches)
    train, memory, flops, generation, gen_flops, sweep = m.train, m.memory, m.flops, m.generation, m.gen_flops, m.sweep
    expected, measured = m.memory_self_check
    memory_check_ok = abs(measured - expected) <= 0.01 * expected

    # --- setup
    print(f"\n== {a.tree_arch} vs fairseq's {a.baseline_arch}: speed and memory ==")
    print(f"device: {device.describe()}; 1-min load average {m.load_at_start} at start, {load_note()} at end "
          f"({os.cpu_count()} CPUs; a busy machine makes the speed rows noisy)")
    print(f"data-bin: {a.data} ({task.cfg.source_lang} -> {task.cfg.target_lang}); "
          f"batches: fairseq's {task_for(a.tree_arch)} batching, --max-tokens {a.max_tokens} ("
          f"{'leaves + nodes' if task.cfg.batch_tokens == 'tree' else 'text tokens, as --task translation'}), "
          f"the same batches for both models")
    baseline_dims, tree_dims = baseline.dims(), tree.dims()
    rows = [["arch", a.baseline_arch, a.tree_arch]]
    rows += [[k, baseline_dims[k], tree_dims[k]] for k in baseline_dims]
    rows.append(["parameters", *(f"{sum(p.numel() for p in s.model.parameters()) / 1e6:.2f} M" for s in pair)])
    if train is not None:
        rows.append([f"train loss, update {a.warmup + 1} -> {a.warmup + a.updates}",
                     *(f"{s.losses[a.warmup]:.2f} -> {s.losses[-1]:.2f}" if len(s.losses) > a.warmup else "n/a"
                       for s in pair)])
    print(table(rows, ["", "transformer", "tree"]))
    if baseline_dims != tree_dims:
        print("WARNING: the two models' dimensions differ; the ratios below compare different sizes")
    leaves = sum(int(b["net_input"]["src_lengths"].sum()) for b in timed_batches)
    nodes = sum(int((~b["net_input"]["src_node_padding_mask"]).sum()) for b in timed_batches)
    sentences = sum(b["nsentences"] for b in timed_batches)
    print(f"timed training batches: {len(timed_batches)}; per batch on average {sentences / len(timed_batches):.0f} "
          f"sentences, {leaves / len(timed_batches):.0f} source leaves (EOS incl.), "
          f"{nodes / len(timed_batches):.0f} nodes, "
          f"{sum(b['ntokens'] for b in timed_batches) / len(timed_batches):.0f} target tokens")

    # --- results
    rows = []

    def result(label, base="", tre="", ratio=None, target=None, at_least=True):
        shown = "" if ratio is None and target is None else "n/a" if ratio is None else f"{ratio:.3f}"
        rows.append([label, base, tre, shown,
                     ((">= " if at_least else "<= ") + f"{target}") if target else "",
                     verdict(ratio, target, at_least) if target else ""])

    if train is not None:
        timings, words = train
        wps = {n: words / timings.total(n) for n in timings.wall}
        result("1 training target words/s (wall clock)", f"{wps['transformer']:.0f}", f"{wps['tree']:.0f}",
               timings.speed_ratio())
    if flops is not None:
        ideal = flops["transformer"] / flops["tree"]
        per_step = {n: flops[n] / len(flop_batches) / 1e9 for n in flops}
        result("  ideal = FLOPs transf. / FLOPs tree", f"{per_step['transformer']:.1f} GFLOP/step",
               f"{per_step['tree']:.1f} GFLOP/step", ideal)
    if train is not None and flops is not None:
        if tree.method_flops["train"]:
            result("    of which the method's elementwise work", "",
                   f"{tree.method_flops['train'] / len(flop_batches) / 1e6:.2f} MFLOP/step")
        result("  measured / ideal", ratio=timings.speed_ratio() / ideal, target=train_target(a.tree_arch))
        if not device.cuda:
            cpu_wps = {n: words / timings.total(n, "cpu") for n in timings.cpu}
            result("  cross-check, process CPU time: words/s", f"{cpu_wps['transformer']:.0f}",
                   f"{cpu_wps['tree']:.0f}", timings.speed_ratio("cpu"))
            result("    measured / ideal (CPU time)", ratio=timings.speed_ratio("cpu") / ideal,
                   target=train_target(a.tree_arch))
    else:
        result("1 training words/s: measured / ideal", ratio=None, target=train_target(a.tree_arch))
    if generation is not None:
        gen_timings, gen_sentences, tokens, length_note = generation
        sps = {n: gen_sentences / gen_timings.total(n) for n in gen_timings.wall}
        result(f"2 generation sentences/s, beam {a.beam} (wall clock)", f"{sps['transformer']:.2f}",
               f"{sps['tree']:.2f}", gen_timings.speed_ratio(), TARGETS["generate"])
        if not device.cuda:
            cpu_sps = {n: gen_sentences / gen_timings.total(n, "cpu") for n in gen_timings.cpu}
            result("  cross-check, process CPU time", f"{cpu_sps['transformer']:.2f}", f"{cpu_sps['tree']:.2f}",
                   gen_timings.speed_ratio("cpu"), TARGETS["generate"])
        if gen_flops is not None:
            gen_ideal = gen_flops["transformer"] / gen_flops["tree"]
            result("  ideal = FLOPs transf. / FLOPs tree", f"{gen_flops['transformer'] / 1e9:.1f} GFLOP",
                   f"{gen_flops['tree'] / 1e9:.1f} GFLOP", gen_ideal)
            if tree.method_flops["generate"]:
                result("    of which the method's elementwise work", "",
                       f"{tree.method_flops['generate'] / 1e6:.2f} MFLOP")
            result("  measured / ideal", ratio=gen_timings.speed_ratio() / gen_ideal, target=TARGETS["train"])
        result("  mean output length (tokens + EOS)", f"{tokens['transformer'] / gen_sentences:.1f}",
               f"{tokens['tree'] / gen_sentences:.1f}")
    else:
        result("2 generation sentences/s", ratio=None, target=TARGETS["generate"])
    if memory is not None:
        result("3 peak training memory, total", mib(memory["transformer"][0]), mib(memory["tree"][0]),
               memory["tree"][0] / memory["transformer"][0], TARGETS["memory"], at_least=False)
        result("  above resident params + Adam state", mib(memory["transformer"][1]), mib(memory["tree"][1]),
               memory["tree"][1] / memory["transformer"][1], TARGETS["memory"], at_least=False)
    else:
        result("3 peak training memory", ratio=None, target=TARGETS["memory"], at_least=False)
    if sweep is not None:
        for mode in ("training", "inference"):
            growth = {s.name: sweep[mode, s.name][-1] / sweep[mode, s.name][0] for s in pair}
            result(f"4 encoder-forward memory growth {lengths[0]}->{lengths[-1]} ({mode})",
                   f"{growth['transformer']:.1f}x", f"{growth['tree']:.1f}x",
                   growth["tree"] / growth["transformer"], TARGETS["growth"], at_least=False)
    else:
        result("4 encoder-forward memory growth", ratio=None, target=TARGETS["growth"], at_least=False)
    print()
    print(table(rows, ["measurement", "transformer", "tree", "tree/transf.", "target", "result"]))

    if sweep is not None:
        print(f"\npeak memory of one encoder forward, batch of {a.sweep_batch_size} synthetic sentences "
              f"(n tokens + EOS, balanced tree: n - 1 nodes), above the inputs and weights:")
        rows = []
        for i, n in enumerate(lengths):
            row = [str(n)]
            for mode in ("training", "inference"):
                base, tre = sweep[mode, "transformer"][i], sweep[mode, "tree"][i]
                row += [mib(base), mib(tre), f"{tre / base:.2f}"]
            rows.append(row)
        print(table(rows, ["n", "train: transf.", "tree", "tree/transf.", "infer: transf.", "tree", "tree/transf."]))

    print("\nhow:")
    if train is not None:
        low, median, high = timings.paired()
        print(f"- training: fairseq Trainer, Adam, label_smoothed_cross_entropy 0.1, dropout {a.dropout}; "
              f"{a.warmup} untimed + {a.updates} timed updates per model, alternated ABBA; {words} target tokens "
              f"(EOS incl., fairseq's wps) in {timings.total('transformer'):.1f} s (transformer) and "
              f"{timings.total('tree'):.1f} s (tree); speed ratio per batch pair: median {median:.2f}, "
              f"10-90% {low:.2f}-{high:.2f}")
        repeatability(timings, 2, "half of the updates")
    print(f"- FLOPs: torch.utils.flop_counter.FlopCounterMode over forward + backward of the criterion "
          f"(matmul ops; scaled_dot_product_attention counted as its math-backend matmuls, without flash "
          f"attention's recomputation; elementwise ops are not counted, except a method's own where the model "
          f"states them: tree_fairseq.analysis.benchmark_models), summed over the first {len(flop_batches)} timed "
          f"batches")
    if generation is not None:
        low, median, high = gen_timings.paired()
        print(f"- generation: SequenceGenerator via task.build_generator / task.inference_step, beam {a.beam}, "
              f"{sum(b['nsentences'] for b in gen_batches)} "
              f"sentences of {a.gen_split} in batches of {a.gen_batch_size} (longest first), {a.gen_rounds} rounds "
              f"after one untimed warm-up batch, alternated ABBA; {length_note}; speed ratio per batch pair: "
              f"median {median:.2f}, 10-90% {low:.2f}-{high:.2f}")
        if a.gen_rounds > 1:
            repeatability(gen_timings, a.gen_rounds, "round")
    if gen_flops is not None:
        print("- generation FLOPs: the same counter over one pass of the generation batches (encoder forward and "
              "every decoder step of the beam search)")
    print(f"- memory: {device.method()}; training: max over the first {len(memory_batches)} timed batches")
    check = "OK" if memory_check_ok else "FAIL (the memory rows are unreliable)"
    print(f"- memory method self-check (4 MiB and 8 MiB alive together, freed, then 2 MiB): expected "
          f"{expected:.2f} MiB, measured {measured:.2f} MiB: {check}")
    print(f"- total time {time.perf_counter() - m.started:.0f} s")
    if m.errors:
        print(f"\nNOT MEASURED (see the tracebacks above): {', '.join(m.errors)}")


def summary(a, m: Measurements) -> dict:
    """The run's figures as plain numbers (None where not measured): the ratios of the report
    (tree / transformer; speeds as tree speed over transformer speed) and what they come from."""
    result = {
        "tree_arch": a.tree_arch, "baseline_arch": a.baseline_arch, "device": m.device.describe(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"), "load_average": [m.load_at_start, load_note()],
        "task": task_for(a.tree_arch), "data": a.data, "dims": m.pair[1].dims(), "lengths": m.lengths,
        "train_ratio": None, "train_ideal": None, "gen_ratio": None, "gen_ideal": None,
        "train_memory_ratio": None, "train_memory_above_ratio": None, "memory_growth_ratio": None,
    }
    if m.train is not None:
        result["train_ratio"] = m.train[0].speed_ratio()
    if m.flops is not None:
        result["train_ideal"] = m.flops["transformer"] / m.flops["tree"]
        result["train_gflop"] = {n: f / 1e9 for n, f in m.flops.items()}
    if m.generation is not None:
        result["gen_ratio"] = m.generation[0].speed_ratio()
    if m.gen_flops is not None:
        result["gen_ideal"] = m.gen_flops["transformer"] / m.gen_flops["tree"]
        result["gen_gflop"] = {n: f / 1e9 for n, f in m.gen_flops.items()}
    if m.memory is not None:
        result["train_memory_mib"] = {n: [v / MIB for v in m.memory[n]] for n in m.memory}
        result["train_memory_ratio"] = m.memory["tree"][0] / m.memory["transformer"][0]
        result["train_memory_above_ratio"] = m.memory["tree"][1] / m.memory["transformer"][1]
    if m.sweep is not None:
        result["encoder_memory_mib"] = {f"{mode}/{name}": [v / MIB for v in peaks]
                                        for (mode, name), peaks in m.sweep.items()}
        # growth from the first length to each other one, the tree's over the transformer's
        result["memory_growth_ratio"] = {
            mode: {str(n): (m.sweep[mode, "tree"][i] / m.sweep[mode, "tree"][0])
                   / (m.sweep[mode, "transformer"][i] / m.sweep[mode, "transformer"][0])
                   for i, n in enumerate(m.lengths) if i}
            for mode in ("training", "inference")}
    if any(m.pair[1].method_flops.values()):
        # the tree model's elementwise work that its FLOPs above include (uncounted by torch's counter)
        result["method_gflop"] = {phase: f / 1e9 for phase, f in m.pair[1].method_flops.items()}
    result["errors"] = m.errors
    return result
