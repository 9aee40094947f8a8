#!/usr/bin/env python3
"""PyTorch at its best (issue 39): gputrain's recipes written the way a PyTorch expert would
make them fast, for race.py to run against gputrain seed by seed.

  fmnist   configs/fashion_mnist_fast.yaml: the time-to-accuracy recipe (its network, Nesterov
           SGD without decay on biases and norms, the trapezoid schedule, label smoothing, EMA
           from epoch 2, mirrored test views), stopping at --target.
  record   configs/fashion_mnist_record.yaml: airbench94_muon's shape (a fixed first convolution
           whitening 2x2 patches of the first 5000 images, its bias trained for 3 epochs; conv,
           pool, batchnorm with the scale fixed at 1, GELU; Muon for the convolution weights, as
           airbench's eager step, Nesterov SGD for the rest; linear decay to 0; alternating flips;
           ten test views: mirrored, and shifted one pixel with the border reflected), batch 1000.
  cifar    configs/cifar10.yaml: PyTorch's CIFAR-10 tutorial's Net, SGD with momentum, batch 128.

The same as gputrain, sample for sample: the network built right after torch.manual_seed(seed)
in gputrain's layer order (the same initial weights), gputrain's shuffle and augmentation draws
(SplitMix64, replayed), the same schedule. At its best:
  - the data resident on the device as uint8, gathered, translated, flipped and normalised there;
  - channels_last and bf16 autocast (--amp; on the CPU fp32 is faster and is the default);
  - the fused optimizer step (SGD fused=True);
  - torch.compile(mode=--compile): "reduce-overhead" on a GPU (Inductor's fused kernels with cuDNN and
    cuBLAS, and the step replayed as CUDA graphs), "default" on the CPU (CUDA graphs do not exist
    there); "none" runs eagerly. max-autotune adds Triton's search over matmul and convolution
    templates, which did not finish compiling the 295k-parameter network in 300 s on an H200: use it
    only where Inductor's cache already holds it. When compiling, record's Muon step compiles its
    Newton-Schulz iteration too (its many small matmuls and element-wise ops), mode default.

Clocks, both reported:
  - GPU time: CUDA events around each training step (step_gpu_s, summed) and around each
    epoch's steps (span_gpu_s), after a warm-up that compiles and autotunes every shape on a
    throwaway copy of the state; the warm-up, evaluations and the replay are outside it.
  - end to end: from the process's first line (before `import torch`) to the last accuracy,
    compile and warm-up counted (e2e_s).
On the CPU the GPU clocks are the host's, with the same boundaries. Prints one JSON line, which
also gives the compile mode that ran, compile_s (the warm-up's first call of each compiled shape,
where torch.compile compiles, or loads from Inductor's cache), and cuda_graphs: whether the
compiled step replays as CUDA graphs (false when Inductor skipped them; its reasons in
cudagraph_skips).
"""
import time

PROCESS_START = time.perf_counter()  # before the imports: end-to-end counts `import torch`

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn  # noqa: E402

from reference import Net, derive_seed, read_cifar, read_idx  # noqa: E402
from reference_fast import AUGMENT_STREAM, mirrored, network  # noqa: E402

GAMMA = np.uint64(0x9E3779B97F4A7C15)
ORDER_STREAM = 1  # lib/src/data/loaders/host_loader.cpp's shuffle stream, as reference.gputrain_order
FLIP_STREAM = 3  # lib/src/data/loaders/batch_plan.cpp: kFlipStream


def splitmix_outputs(seed, count):
    """The first `count` outputs of SplitMix64(seed): output k mixes seed + (k+1) * gamma, so all at once."""
    z = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * GAMMA
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def replay_order(seed, epoch, n):
    """reference.gputrain_order (the Fisher-Yates shuffle of gputrain's loader) with its draws vectorised."""
    draws = splitmix_outputs(derive_seed(derive_seed(seed, ORDER_STREAM), epoch), n - 1)
    picks = (draws % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
    order = list(range(n))
    for i, j in zip(range(n - 1, 0, -1), picks):
        order[i], order[j] = order[j], order[i]
    return order


def replay_placements(seed, epoch, n, batch, pad, draw_flip=True):
    """reference_fast.placements for every batch of one epoch: (dy, dx, flip) arrays of n samples.
    Without draw_flip (alternating flips) each sample draws only its shift, and flip is None."""
    draws = 3 if draw_flip else 2
    dy, dx, flip = [], [], []
    for b, first in enumerate(range(0, n, batch)):
        count = min(batch, n - first)
        rng_seed = derive_seed(derive_seed(derive_seed(seed, AUGMENT_STREAM), epoch), b)
        out = splitmix_outputs(rng_seed, draws * count).reshape(count, draws)
        dy.append((out[:, 0] % np.uint64(2 * pad + 1)).astype(np.int64) - pad)
        dx.append((out[:, 1] % np.uint64(2 * pad + 1)).astype(np.int64) - pad)
        if draw_flip:
            flip.append((out[:, 2] & np.uint64(1)).astype(bool))
    return np.concatenate(dy), np.concatenate(dx), np.concatenate(flip) if draw_flip else None


def mix(z):
    """SplitMix64's output function on an array of states."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def first_flips(seed, n):
    """lib/src/data/loaders/batch_plan.cpp's alternating_flip in epoch 0, for every row: the first output of
    SplitMix64(derive_seed(derive_seed(seed, FLIP_STREAM), row)), its low bit."""
    base = np.uint64(derive_seed(seed, FLIP_STREAM))
    rows = np.arange(n, dtype=np.uint64)
    stream_key = mix(rows + np.uint64(0x5851F42D4C957F2D) + GAMMA)  # SplitMix64(row + C).next()
    return (mix(mix((base ^ stream_key) + GAMMA) + GAMMA) & np.uint64(1)).astype(bool)


class Epoch:
    """One epoch's replayed order and, for each sample, the source rows and columns of its view."""

    def __init__(self, order, rows, cols):
        self.order, self.rows, self.cols = order, rows, cols


def replay_epochs(args, n, height, width, device):
    epochs = []
    rows0, cols0 = torch.arange(height), torch.arange(width)
    alternating = torch.from_numpy(first_flips(args.seed, n)) if args.alternating_flip else None
    for e in range(args.epochs):
        order = torch.tensor(replay_order(args.seed, e, n))
        if args.crop:
            dy, dx, flip = replay_placements(args.seed, e, n, args.batch, args.crop, draw_flip=alternating is None)
            dy, dx = torch.from_numpy(dy), torch.from_numpy(dx)
            # alternating: each image's first flip, mirrored in odd epochs
            flip = alternating[order] != (e % 2 == 1) if alternating is not None else torch.from_numpy(flip)
            cols = torch.where(flip[:, None], cols0.flip(0)[None, :], cols0[None, :])
            rows = mirrored(rows0[None, :] + dy[:, None], height)
            cols = mirrored(cols + dx[:, None], width)
        else:
            rows, cols = rows0.expand(n, height), cols0.expand(n, width)
        epochs.append(Epoch(order.to(device), rows.to(device), cols.to(device)))
    return epochs


def gather(images, order, rows, cols):
    """[B, H, W, C] uint8: each sample's view, one indexing kernel on the device."""
    return images[order[:, None, None], rows[:, :, None], cols[:, None, :]]


class Clock:
    """Step and span timers: CUDA events on a GPU, the host clock (after the work) elsewhere."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.steps = []

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    @staticmethod
    def seconds(begin, end):
        return begin.elapsed_time(end) / 1e3 if isinstance(begin, torch.cuda.Event) else end - begin

    def step_sum(self):
        if self.cuda:
            torch.cuda.synchronize()
        total = sum(self.seconds(b, e) for b, e in self.steps)
        self.steps = []
        return total


def record_network():
    """configs/fashion_mnist_record.yaml's model.layers, in its order (the order the weights are drawn in)."""
    def norm(width):  # momentum 0.4 (PyTorch's convention), scale fixed at 1
        bn = nn.BatchNorm2d(width, momentum=0.4, eps=1e-12)
        bn.weight.requires_grad_(False)
        return bn

    def conv3(cin, cout):
        return nn.Conv2d(cin, cout, 3, padding=1, bias=False)

    whiten = nn.Conv2d(1, 8, 2, bias=True)
    whiten.weight.requires_grad_(False)  # set from the training images, never trained
    layers = [whiten, nn.GELU()]
    cin = 8
    for width in (64, 128, 128):
        layers += [conv3(cin, width), nn.MaxPool2d(2), norm(width), nn.GELU(), conv3(width, width), norm(width),
                   nn.GELU()]
        cin = width
    layers += [nn.MaxPool2d(3), nn.Flatten(), nn.Linear(128, 10, bias=False)]
    return nn.Sequential(*layers)


def whitening_filters(images, kernel=2, eps=5e-4):
    """lib/src/models/whiten.cpp: the patch covariance's eigenvectors / sqrt(eigenvalue + eps), and
    their negatives, from float [N, C, H, W] images, in float64."""
    channels = images.size(1)
    dims = channels * kernel * kernel
    patches = nn.functional.unfold(images.double(), kernel).transpose(1, 2).reshape(-1, dims)
    covariance = patches.t() @ patches / patches.size(0)
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance, UPLO="U")
    filters = (eigenvectors.t() / torch.sqrt(eigenvalues + eps).unsqueeze(1)).reshape(dims, channels, kernel, kernel)
    return torch.cat([filters, -filters]).float()


def newton_schulz(g, steps):
    """lib/src/optim/muon.cpp (airbench94_muon's quintic iteration), in float32."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g / (g.norm() + 1e-7)
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.t()
    for _ in range(steps):
        gram = x @ x.t()
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.t() if tall else x


class Muon:
    """gputrain's Muon step (airbench94_muon's): Nesterov momentum, the weight rescaled to norm
    sqrt(rows), then minus lr times the orthogonalised update (`orthogonalise`: newton_schulz, eager as
    airbench's, or compiled)."""

    def __init__(self, params, lr, momentum, steps, orthogonalise=None):
        self.params, self.lr, self.momentum, self.steps = params, lr, momentum, steps
        self.orthogonalise = orthogonalise or newton_schulz
        self.buffers = [torch.zeros_like(q) for q in params]
        self.factor = 1.0  # the schedule's

    @torch.no_grad()
    def step(self):
        for q, buffer in zip(self.params, self.buffers):
            buffer.mul_(self.momentum).add_(q.grad)
            update = q.grad.add(buffer, alpha=self.momentum)
            rows = q.size(0)
            q.mul_(rows ** 0.5 / q.norm())
            q.sub_(self.orthogonalise(update.reshape(rows, -1), self.steps).view(q.shape) * (self.lr * self.factor))

    def reset(self):
        for buffer in self.buffers:
            buffer.zero_()


def shifted_views(x, t):
    """lib/src/train/evaluate.cpp's tta_views: the image, shifted t pixels up, down, left and right
    (the border reflected), and each of them mirrored."""
    h, w = x.size(2), x.size(3)
    padded = nn.functional.pad(x, (t, t, t, t), mode="reflect")
    views = [x] + [padded[:, :, t + dy:t + dy + h, t + dx:t + dx + w] for dy, dx in ((-t, 0), (t, 0), (0, -t), (0, t))]
    return views + [v.flip(3) for v in views]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", choices=["fmnist", "record", "cifar"])
    p.add_argument("--data", required=True, help="IDX directory (fmnist) or CIFAR-10 binary directory (cifar)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, help="default: 8 (fmnist), 10 (cifar)")
    p.add_argument("--target", type=float, help="fmnist, record: stop at this test accuracy (default 0.93, 0.94); "
                   "0: never")
    p.add_argument("--compile", choices=["max-autotune", "reduce-overhead", "default", "none"],
                   help="torch.compile mode; default: reduce-overhead on CUDA, default on the CPU")
    p.add_argument("--amp", choices=["bf16", "off"], help="autocast; default: bf16 on CUDA, off on the CPU")
    p.add_argument("--warmup-steps", type=int, default=3, help="steps of each shape before the clocks start")
    p.add_argument("--limit", type=int, default=0, help="use only the first N training and test samples (checks)")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0: torch's default")
    args = p.parse_args()
    fmnist, record = args.recipe == "fmnist", args.recipe == "record"
    args.epochs = args.epochs or (10 if args.recipe == "cifar" else 8)
    args.batch = {"fmnist": 256, "record": 1000, "cifar": 128}[args.recipe]
    args.crop = 0 if args.recipe == "cifar" else 2
    args.alternating_flip = record
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    args.compile = args.compile or ("reduce-overhead" if cuda else "default")
    args.amp = args.amp or ("bf16" if cuda else "off")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.target is None:
        args.target = {"fmnist": 0.93, "record": 0.94, "cifar": 0.0}[args.recipe]
    if args.recipe == "cifar":
        args.target = 0.0
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    # Every shape (full batch, the short last batch, the test batch) gets its own static graph:
    # a dynamic-shape graph is slower, and there are only three.
    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.cache_size_limit = 64
    # Inductor says why it skips CUDA graphs (a mutated input, a CPU tensor, ...) on its `cudagraphs` log: kept
    # for the JSON, as a skipped graph makes reduce-overhead no better than default.
    cudagraph_skips = []

    class SkipLog(logging.Handler):
        def emit(self, entry):
            message = entry.getMessage()
            if "skipping cudagraphs" in message:
                cudagraph_skips.append(message[:300])
    torch._logging.set_logs(cudagraphs=True)
    logging.getLogger("torch").addHandler(SkipLog())

    loaded = time.perf_counter()
    if fmnist or record:
        (train_images, train_labels), (test_images, test_labels) = read_idx(args.data, True), read_idx(args.data, False)
        mean, std = [0.2860], [0.3530]
    else:
        (train_images, train_labels), (test_images, test_labels) = read_cifar(args.data, True), read_cifar(args.data, False)
        mean, std = [0.5] * 3, [0.5] * 3
    if args.limit:
        train_images, train_labels = train_images[:args.limit], train_labels[:args.limit]
        test_images, test_labels = test_images[:args.limit], test_labels[:args.limit]
    n, height, width, channels = train_images.shape
    train_x, test_x = train_images.to(device), test_images.to(device)
    train_y, test_y = torch.tensor(train_labels, device=device), torch.tensor(test_labels, device=device)
    scale = (1.0 / (255.0 * torch.tensor(std, device=device))).view(1, -1, 1, 1)
    shift = (torch.tensor(mean, device=device) / torch.tensor(std, device=device)).view(1, -1, 1, 1)
    load_s = time.perf_counter() - loaded

    replayed = time.perf_counter()
    epochs = replay_epochs(args, n, height, width, device)
    replay_s = time.perf_counter() - replayed

    torch.manual_seed(args.seed)
    net = {"fmnist": network, "record": record_network}.get(args.recipe, lambda: Net(channels, height))()
    if record:  # whitened from the first 5000 training images, normalised as the batches are
        first = train_images[:5000].permute(0, 3, 1, 2).float()
        net[0].weight.data.copy_(whitening_filters((first / 255.0 - mean[0]) / std[0]))
    net = net.to(device, memory_format=torch.channels_last)
    trained = [q for q in net.parameters() if q.requires_grad]
    steps_per_epoch = -(-n // args.batch)
    total = args.epochs * steps_per_epoch
    rise, fall = 0.1 * total, 0.9 * total
    muon = None
    fused = {"fused": True}
    compiled = args.compile != "none"
    if fmnist:
        decay = [q for q in trained if q.dim() > 1]
        no_decay = [q for q in trained if q.dim() <= 1]
        optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
                                    lr=0.1, momentum=0.9, nesterov=True, **fused)
    elif record:  # Muon for the convolution weights; the whitening bias apart, trained for 3 epochs
        # one graph per weight shape (four), no CUDA graphs: its inputs are each step's fresh gradients
        orthogonalise = torch.compile(newton_schulz) if compiled else newton_schulz
        muon = Muon([q for q in trained if q.dim() == 4], lr=0.24, momentum=0.6, steps=3, orthogonalise=orthogonalise)
        bias = net[0].bias
        rest = [q for q in trained if q.dim() < 4 and q is not bias]
        optimizer = torch.optim.SGD([{"params": [q for q in rest if q.dim() > 1], "weight_decay": 5e-4},
                                     {"params": [q for q in rest if q.dim() <= 1], "weight_decay": 0.0},
                                     {"params": [bias], "weight_decay": 0.0}],
                                    lr=0.05, momentum=0.85, nesterov=True, **fused)
    else:
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, **fused)

    def factor(s):  # the recipe's lr schedule, per step
        if fmnist:  # linear_warmup_decay: 10% up, 90% down
            return max(0.0, min(1.0, (s + 1) / rise, (total - s) / fall))
        if record:  # linear_warmup_decay without warm-up: down to 0 over the run
            return max(0.0, (total - s) / total)
        return 1.0

    def bias_factor(s):  # record: whiten_bias_epochs 3
        return factor(s) if s // steps_per_epoch < 3 else 0.0

    lambdas = [factor, factor, bias_factor] if record else factor
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)
    criterion = nn.CrossEntropyLoss(label_smoothing={"fmnist": 0.1, "record": 0.2}.get(args.recipe, 0.0))
    ema = AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(0.99), use_buffers=True) if fmnist else None
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp == "bf16")

    def prepare(batch_u8):
        x = batch_u8.permute(0, 3, 1, 2).float().contiguous(memory_format=torch.channels_last)
        return x * scale - shift

    def forward_loss(batch_u8, labels):
        with autocast:
            return criterion(net(prepare(batch_u8)), labels)

    def forward_logits(model, batch_u8):
        x = prepare(batch_u8)
        with autocast:
            if record:  # ten views, logits averaged
                views = shifted_views(x, 1)
                return sum(model(v).float() for v in views) / len(views)
            logits = model(x).float()
            if fmnist:  # mirrored test views, logits averaged
                logits = (logits + model(x.flip(3)).float()) / 2
        return logits

    mode = None if args.compile == "default" else args.compile
    train_loss = torch.compile(forward_loss, mode=mode) if compiled else forward_loss
    test_logits = torch.compile(forward_logits, mode=mode) if compiled else forward_logits
    mark_step = torch.compiler.cudagraph_mark_step_begin if compiled and cuda else (lambda: None)
    clock = Clock(device)

    def train_step(epoch, first, last, timed):
        index = slice(first, last)
        order = epoch.order[index]
        batch = gather(train_x, order, epoch.rows[index], epoch.cols[index])
        begin = clock.mark() if timed else None
        mark_step()
        loss = train_loss(batch, train_y[order])
        loss.backward()
        optimizer.step()
        if muon is not None:
            muon.step()
        net.zero_grad(set_to_none=True)  # Muon's weights too
        if timed:
            clock.steps.append((begin, clock.mark()))
        return loss

    test_batch = 1000 if len(test_labels) % 1000 == 0 else len(test_labels)

    def evaluate(model):
        model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=device)
        with torch.no_grad():
            for first in range(0, len(test_labels), test_batch):
                mark_step()
                logits = test_logits(model, test_x[first:first + test_batch])
                correct += (logits.argmax(1) == test_y[first:first + test_batch]).sum()
        model.train()
        return correct.item() / len(test_labels)

    # Warm-up: every shape the run will see (full and short training batches, the test batch, the
    # EMA model's eval), on the real state, which is then put back as it was.
    warmed = time.perf_counter()
    compile_s = 0.0  # the first call of each shape: where torch.compile compiles (or loads its cache)

    def first_call(work, *call_args):
        nonlocal compile_s
        begun = time.perf_counter()
        work(*call_args)
        if cuda:
            torch.cuda.synchronize()
        compile_s += time.perf_counter() - begun

    saved = copy.deepcopy(net.state_dict())
    shapes = [(0, args.batch)] + ([(n - n % args.batch, n)] if n % args.batch else [])
    for first, last in shapes:
        first_call(train_step, epochs[0], first, min(last, first + args.batch), False)
        for _ in range(args.warmup_steps - 1):
            train_step(epochs[0], first, min(last, first + args.batch), timed=False)
    first_call(evaluate, net)
    if ema is not None:
        ema.update_parameters(net)
        first_call(evaluate, ema.module)
    with torch.no_grad():
        for name, tensor in net.state_dict().items():
            tensor.copy_(saved[name])
    optimizer.state.clear()  # no momentum yet, as at step 0; the warm-up changed no learning rate
    if muon is not None:
        muon.reset()
    if ema is not None:
        ema.n_averaged.zero_()
    if cuda:
        torch.cuda.synchronize()
    warmup_s = time.perf_counter() - warmed

    from torch._dynamo.utils import counters
    skipped_graphs = counters["inductor"]["cudagraph_skips"]
    result = {"impl": "pytorch-best", "recipe": args.recipe, "device": str(device), "torch": torch.__version__,
              "compile": args.compile, "compile_s": compile_s if compiled else 0.0,
              "cuda_graphs": cuda and args.compile in ("reduce-overhead", "max-autotune") and not skipped_graphs,
              "cudagraph_skips": cudagraph_skips or ([f"{skipped_graphs} skipped"] if skipped_graphs else []),
              "amp": args.amp, "channels_last": True, "fused": True, "seed": args.seed,
              "batch": args.batch, "samples": n, "threads": torch.get_num_threads(), "load_s": load_s,
              "replay_s": replay_s, "warmup_s": warmup_s, "epochs": [], "target_reached": None}
    if cuda:
        result["gpu"] = torch.cuda.get_device_name(device)
    gpu_s = step_gpu_s = 0.0
    step = 0
    for e in range(1, args.epochs + 1):
        epoch = epochs[e - 1]
        started = time.perf_counter()
        span_begin = clock.mark()
        for first in range(0, n, args.batch):
            train_step(epoch, first, min(n, first + args.batch), timed=True)
            scheduler.step()
            if muon is not None:
                muon.factor = factor(step + 1)
            if ema is not None and e >= 2:
                ema.update_parameters(net)
            step += 1
        span_end = clock.mark()
        steps = clock.step_sum()  # waits for the device
        wall = time.perf_counter() - started
        span = Clock.seconds(span_begin, span_end)
        gpu_s += span
        step_gpu_s += steps
        accuracy = evaluate(ema.module if ema is not None and e >= 2 else net)
        # not `record`: the forward functions read that name (the recipe) when they run
        row = {"epoch": e, "samples": n, "train_s": wall, "span_gpu_s": span, "step_gpu_s": steps,
               "samples_per_s": n / wall, "test_accuracy": accuracy, "e2e_s": time.perf_counter() - PROCESS_START}
        result["epochs"].append(row)
        print(f"epoch {e}: {n / wall:.0f} samples/s, GPU {span:.3f} s (steps {steps:.3f} s), "
              f"test accuracy {100 * accuracy:.2f}%", file=sys.stderr)
        if args.target and accuracy >= args.target:
            result["target_reached"] = {"epoch": e, "accuracy": accuracy, "gpu_s": gpu_s, "step_gpu_s": step_gpu_s,
                                        "e2e_s": row["e2e_s"]}
            break
    later = result["epochs"][1:] or result["epochs"]
    result["steady_samples_per_s"] = sum(r["samples"] for r in later) / sum(r["train_s"] for r in later)
    result["test_accuracy"] = result["epochs"][-1]["test_accuracy"]
    result["gpu_s"], result["step_gpu_s"] = gpu_s, step_gpu_s
    result["e2e_s"] = time.perf_counter() - PROCESS_START
    print(json.dumps(result))


if __name__ == "__main__":
    main()
