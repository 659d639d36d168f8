#!/usr/bin/python3
"""PyTorch peer of tools/bench/epoch_bench.sh: one epoch of the README main
job (//examples:mlp_fashion_mnist): the 784-256-256-10 MLP on Fashion-MNIST,
pixels standardized with the training split's mean/std (0.2860, 0.3530),
shuffled every epoch, batch 64 (the last partial batch dropped: 937 steps),
SGD lr 0.1, then the test split. Data loading (gunzip + decode of the idx
files) is inside the timed region, as in oflite's data source.
Prints as its last line
  "load_s A train_s B test_s C test_accuracy D"."""
import argparse
import gzip
import os
import struct
import time

import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    dims = [count] + [struct.unpack(">I", data[8 + 4 * i:12 + 4 * i])[0]
                      for i in range((magic & 0xFF) - 1)]
    offset = 4 + 4 * len(dims)
    return torch.frombuffer(bytearray(data[offset:]), dtype=torch.uint8).reshape(dims)


def load(directory, split):
    images = read_idx(os.path.join(directory, split + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(directory, split + "-labels-idx1-ubyte.gz"))
    x = (images.reshape(images.shape[0], -1).float() / 255.0 - 0.2860) / 0.3530
    return x, labels.long()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    start = time.perf_counter()
    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    loaded = time.perf_counter()
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(train_x.shape[0])
    steps = train_x.shape[0] // args.batch
    for step in range(steps):
        index = order[step * args.batch:(step + 1) * args.batch]
        optimizer.zero_grad()
        loss = loss_fn(model(train_x[index]), train_y[index])
        loss.backward()
        optimizer.step()
    trained = time.perf_counter()
    correct = 0
    evaluated = (test_x.shape[0] // args.batch) * args.batch  # whole batches, like oflite
    with torch.no_grad():
        for begin in range(0, evaluated, args.batch):
            logits = model(test_x[begin:begin + args.batch])
            correct += (logits.argmax(1) == test_y[begin:begin + args.batch]).sum().item()
    tested = time.perf_counter()
    print("load_s %.3f train_s %.3f test_s %.3f test_accuracy %.4f" %
          (loaded - start, trained - loaded, tested - trained, correct / evaluated))


if __name__ == "__main__":
    main()
