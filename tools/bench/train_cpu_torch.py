#!/usr/bin/python3
"""PyTorch peer of tools/bench/train_mlp and train_cnn: the same model,
optimizer, batch and number of computing threads (set_num_threads(T),
set_num_interop_threads(1)), synthetic data drawn every step.
Prints as its last line
  "step_ms X cpu_ms Y threads T loss L"
X: wall time per measured step; Y: user+sys CPU time per measured step of
the whole process; T: threads of the process while measuring."""
import argparse
import os
import sys
import time


def _threads_from_argv():
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


# PyTorch's Linear layers call OpenBLAS, whose own thread pool is sized by
# OPENBLAS_NUM_THREADS (default: every core) when the library loads, not by
# torch.set_num_threads: without this the "1 core" peer computed on 2 cores
# (CPU time twice its wall time) and the 2-core peer ran 2 OpenMP + 2
# OpenBLAS threads on 2 cores. Set before torch (and OpenBLAS) load.
os.environ["OPENBLAS_NUM_THREADS"] = _threads_from_argv()

import torch  # noqa: E402


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
    raise SystemExit("unknown --model " + name)


def cpu_seconds():
    times = os.times()
    return times.user + times.system


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", "lenet5"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    model, optimizer, image_shape = build(args.model)
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = None
    start = start_cpu = None
    threads = 0
    for step in range(args.warmup + args.iters):
        if step == args.warmup:
            start, start_cpu = time.perf_counter(), cpu_seconds()
            threads = len(os.listdir("/proc/self/task"))
        x = torch.rand(args.batch, *image_shape)
        y = torch.randint(0, 10, (args.batch,))
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    loss_value = loss.item()
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds() - start_cpu
    print("step_ms %.4f cpu_ms %.4f threads %d loss %.4f" %
          (elapsed * 1e3 / args.iters, cpu * 1e3 / args.iters, threads, loss_value))


if __name__ == "__main__":
    main()
