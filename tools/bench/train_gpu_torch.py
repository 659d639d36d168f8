"""PyTorch peer of tools/bench/train_gpu: the same training step on the same GPU.

Models: the 784-256-256-10 MLP (ReLU, cross-entropy, SGD lr 0.1) and LeNet-5
(5x5 convs with padding 2 then 0, ReLU, 2x2 max pooling, 120-84-10 dense
layers, SGD momentum 0.9 lr 0.05). One fixed synthetic batch lives on the
device (as in ours). FP32 only: TF32 is turned off for matmul and cuDNN.

Two timings, each the median over --iters steps of CUDA-event intervals
between consecutive steps after --warmup steps:
  eager: forward, backward and optimizer.step() from Python every step;
  graph: the whole step captured once with torch.cuda.graph and replayed.

Last line: "eager_ms X graph_ms Y loss Z".
"""
import argparse
import statistics

import torch
from torch import nn


def make_model(name):
    if name in ("mlp", "mlp4k"):
        width = 4096 if name == "mlp4k" else 256
        return nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                             nn.Linear(width, 10))
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def make_optimizer(name, params):
    if name in ("mlp", "mlp4k"):
        return torch.optim.SGD(params, lr=0.1)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def make_batch(name, batch, device):
    shape = (batch, 784) if name in ("mlp", "mlp4k") else (batch, 1, 28, 28)
    image = torch.rand(shape, device=device) - 0.5
    label = torch.randint(0, 10, (batch,), device=device)
    return image, label


def time_steps(step, iters):
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    for i in range(iters):
        events[i].record()
        step()
    events[iters].record()
    events[iters].synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(iters))


def eager(args, device):
    torch.manual_seed(1)
    model = make_model(args.model).to(device)
    optimizer = make_optimizer(args.model, model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    image, label = make_batch(args.model, args.batch, device)
    last = {}

    def step():
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(image), label)
        loss.backward()
        optimizer.step()
        last["loss"] = loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    ms = time_steps(step, args.iters)
    return ms, float(last["loss"])


def graphed(args, device):
    torch.manual_seed(1)
    model = make_model(args.model).to(device)
    optimizer = make_optimizer(args.model, model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    image, label = make_batch(args.model, args.batch, device)

    def body():
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(image), label)
        loss.backward()
        optimizer.step()
        return loss

    # Warm up on a side stream (allocates grads and optimizer state), then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(3, args.warmup)):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = body()
    for _ in range(args.warmup):
        graph.replay()
    torch.cuda.synchronize()
    ms = time_steps(graph.replay, args.iters)
    return ms, float(static_loss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "mlp4k", "lenet5"], default="mlp")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda:0")
    eager_ms, loss = eager(args, device)
    graph_ms, _ = graphed(args, device)
    print(f"device {torch.cuda.get_device_name(0)} torch {torch.__version__}")
    print(f"eager_ms {eager_ms:.4f} graph_ms {graph_ms:.4f} loss {loss:.5f}")


if __name__ == "__main__":
    main()
