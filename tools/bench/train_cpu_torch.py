#!/usr/bin/python3
"""PyTorch peer of tools/bench/train_mlp and train_cnn: the same model,
optimizer and batch, synthetic data drawn every step (for resnet of our
random_batch's distribution, so that the two losses can be compared), with
the thread setting the bench asks for:
  --torch-threads t   torch.set_num_threads(t) (ATen's OpenMP team; also
                      OMP_NUM_THREADS), one interop thread
  --blas-threads b    OPENBLAS_NUM_THREADS=b, the pool of the OpenBLAS that
                      PyTorch's Linear layers call
  --threads n         both, where the two flags above are not given (the
                      old single setting; default 1)
The bench sweeps (t, b) within its core budget and keeps the best.
Prints as its last line
  "step_ms X cpu_ms Y threads T loss L cpus C torch_threads t blas_threads b"
X: wall time per measured step; Y: user+sys CPU time per measured step of
the whole process; T: threads of the process while measuring; C: CPUs the
process may run on (its affinity: the bench pins both sides to the same
ones); t and b: the thread counts torch and OpenBLAS report (b is -1 where
OpenBLAS cannot be asked)."""
import argparse
import ctypes
import os
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", "lenet5", "resnet"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch and OpenBLAS threads, where not given separately")
    parser.add_argument("--torch-threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--blas-threads", type=int, help="OPENBLAS_NUM_THREADS")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=100)
    args = parser.parse_args()
    if args.torch_threads is None:
        args.torch_threads = args.threads
    if args.blas_threads is None:
        args.blas_threads = args.threads
    for name in ("threads", "torch_threads", "blas_threads", "batch", "iters"):
        if getattr(args, name) < 1:
            parser.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    return args


# Parsed before torch loads: OpenBLAS sizes its pool from
# OPENBLAS_NUM_THREADS (default: every core) when the library loads, and
# torch.set_num_threads does not resize it. Without this the "1 core" peer
# computed on 2 cores, and setting both to the core count put 2 OpenMP + 2
# OpenBLAS threads on 2 cores.
ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.torch_threads)

import torch  # noqa: E402


class ResidualBlock(torch.nn.Module):
    """relu(bn(conv(relu(bn(conv(x))))) + skip(x)), skip a strided 1x1 conv +
    bn when the shape changes: ResidualBlock of
    examples/resnet_fashion_mnist.cc."""

    def __init__(self, in_channels, filters, stride):
        super().__init__()
        self.body = torch.nn.Sequential(
            conv_bn(in_channels, filters, 3, stride), torch.nn.ReLU(),
            conv_bn(filters, filters, 3, 1))
        same = stride == 1 and in_channels == filters
        self.skip = torch.nn.Identity() if same else conv_bn(in_channels, filters, 1, stride)

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def conv_bn(in_channels, filters, kernel, stride):
    """Our ConvBn: no conv bias, Kaiming-uniform weights (gain sqrt(2), fan
    in), BatchNorm with our momentum 0.9 (running = 0.9 running + 0.1 batch:
    PyTorch's momentum=0.1) and epsilon 1e-5, gamma 1, beta 0."""
    conv = torch.nn.Conv2d(in_channels, filters, kernel, stride=stride, padding=kernel // 2,
                           bias=False)
    torch.nn.init.kaiming_uniform_(conv.weight, nonlinearity="relu")
    return torch.nn.Sequential(conv, torch.nn.BatchNorm2d(filters, eps=1e-5, momentum=0.1))


def resnet():
    """The network of examples/resnet_fashion_mnist.cc (train_cnn's resnet);
    the dense layer as ours: Xavier-uniform weight, zero bias."""
    nn = torch.nn
    dense = nn.Linear(16 * 3 * 3, 10)
    nn.init.xavier_uniform_(dense.weight)
    nn.init.zeros_(dense.bias)
    return nn.Sequential(
        conv_bn(1, 8, 3, 1), nn.ReLU(), nn.MaxPool2d(2),   # [B, 8, 14, 14]
        ResidualBlock(8, 8, 1),                            # [B, 8, 14, 14]
        ResidualBlock(8, 16, 2),                           # [B, 16, 7, 7]
        nn.AdaptiveAvgPool2d(3), nn.Flatten(), dense)      # [B, 10]


class LearnableBatches:
    """Our random_batch's distribution (not its exact values): label uniform
    in [0, 10), feature j uniform[-0.5, 0.5) + (j % 10 == label)."""

    def __init__(self, image_shape):
        features = 1
        for d in image_shape:
            features *= d
        self.image_shape = image_shape
        self.signal = (torch.arange(features) % 10 == torch.arange(10)[:, None]).float()

    def __call__(self, batch):
        y = torch.randint(0, 10, (batch,))
        x = torch.rand(batch, self.signal.shape[1]).sub_(0.5).add_(self.signal[y])
        return x.view(batch, *self.image_shape), y


def build(name):
    nn = torch.nn
    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
        return model, torch.optim.SGD(model.parameters(), lr=0.1), (784,)
    if name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
        return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), (1, 28, 28)
    if name == "lenet5":
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), (1, 28, 28)
    if name == "resnet":
        model = resnet()
        return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), (1, 28, 28)
    raise SystemExit("unknown --model " + name)


def cpu_seconds():
    # User+sys of every thread of the process, at the clock's resolution
    # (os.times counts 10 ms ticks, coarse next to a 1 ms step).
    return time.process_time()


def openblas_threads():
    """The pool size of the OpenBLAS torch loaded (the same soname returns
    the loaded copy), or -1 where it cannot be asked."""
    try:
        return ctypes.CDLL("libopenblas.so.0").openblas_get_num_threads()
    except (OSError, AttributeError):
        return -1


def main():
    args = ARGS
    torch.set_num_threads(args.torch_threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    model, optimizer, image_shape = build(args.model)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()  # BatchNorm on batch statistics, as ours while training
    learnable = LearnableBatches(image_shape) if args.model == "resnet" else None
    loss = None
    start = start_cpu = None
    threads = 0
    for step in range(args.warmup + args.iters):
        if step == args.warmup:
            start, start_cpu = time.perf_counter(), cpu_seconds()
            threads = len(os.listdir("/proc/self/task"))
        if learnable is not None:
            x, y = learnable(args.batch)
        else:
            x = torch.rand(args.batch, *image_shape)
            y = torch.randint(0, 10, (args.batch,))
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    loss_value = loss.item()
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds() - start_cpu
    print("step_ms %.4f cpu_ms %.4f threads %d loss %.4f cpus %d torch_threads %d "
          "blas_threads %d" %
          (elapsed * 1e3 / args.iters, cpu * 1e3 / args.iters, threads, loss_value,
           len(os.sched_getaffinity(0)), torch.get_num_threads(), openblas_threads()))


if __name__ == "__main__":
    main()
