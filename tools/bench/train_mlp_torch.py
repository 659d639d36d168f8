#!/usr/bin/python3
"""PyTorch peer of tools/bench/train_mlp: the same 784-256-256-10 MLP, SGD
(lr 0.1), batch and thread count, synthetic data drawn every step.
Prints "step_ms X samples_per_s Y loss Z" as its last line."""
import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--iters", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = None
    start = None
    for step in range(args.warmup + args.iters):
        if step == args.warmup:
            start = time.perf_counter()
        x = torch.rand(args.batch, 784)
        y = torch.randint(0, 10, (args.batch,))
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    elapsed = time.perf_counter() - start
    step_s = elapsed / args.iters
    print("step_ms %.4f samples_per_s %.1f loss %.4f" %
          (step_s * 1e3, args.batch / step_s, loss.item()))


if __name__ == "__main__":
    main()
