#!/usr/bin/python3
"""PyTorch peer of tools/bench/scaling: one rank of DistributedDataParallel
(Gloo backend) training the model write_scaling_job builds (mlp:
784-2048-2048-10 ReLU; cnn: conv 16 3x3 pad 1, ReLU, maxpool 2, conv 32 3x3
pad 1, ReLU, maxpool 2, dense 10), softmax cross-entropy, plain SGD, on
synthetic data drawn every step (torch.rand / randint), batch
GLOBAL_BATCH / WORLD per rank, torch.set_num_threads(THREADS).

Runs WARMUP + MEASURE + WARMUP steps. Rank 0 prints "mark start" once step
WARMUP is done and "mark end" once step WARMUP + MEASURE is done (flushed,
so the driver timestamps them as they arrive), then "loss X params N".
With --world 1 it trains the plain model (no DDP, no process group).
Exit 1 on any failure (message on stderr).
"""
import argparse
import datetime
import os
import sys


def build_model(torch, name):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                             nn.Linear(2048, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def add_ddp_arguments(parser):
    """The flags of a DDP rank shared by this peer and gpt_ddp_peer.py."""
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--master", default="127.0.0.1:29500", help="HOST:PORT of rank 0's store")
    parser.add_argument("--ifname", default="eth0", help="GLOO_SOCKET_IFNAME")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--measure", type=int, default=50)
    parser.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    parser.add_argument("--timeout", type=int, default=300, help="process group timeout, s")


def wrap_ddp(torch, model, args):
    """`model` under DistributedDataParallel over Gloo (the plain model when
    --world is 1)."""
    if args.world <= 1:
        return model
    import torch.distributed as dist
    os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    dist.init_process_group("gloo", init_method="tcp://" + args.master, rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=args.timeout))
    return torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--global-batch", type=int, default=128)
    add_ddp_arguments(parser)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    import torch  # after argparse: --help runs nothing
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1 + args.rank)
    model = build_model(torch, args.model)
    model = wrap_ddp(torch, model, args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    batch = args.global_batch // args.world
    shape = (batch, 784) if args.model == "mlp" else (batch, 1, 28, 28)
    loss = None
    steps = 2 * args.warmup + args.measure
    for step in range(steps):
        x = torch.rand(*shape)
        y = torch.randint(0, 10, (batch,))
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if args.rank == 0 and step + 1 in (args.warmup, args.warmup + args.measure):
            loss.item()  # the step is complete
            print("mark start" if step + 1 == args.warmup else "mark end", flush=True)
    params = sum(p.numel() for p in model.parameters())
    if args.rank == 0:
        print("loss %.4f params %d" % (loss.item(), params), flush=True)
    if args.world > 1:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # a failed rank says why, one line, exit 1
        print("ddp_peer: %s: %s" % (type(error).__name__, error), file=sys.stderr)
        sys.exit(1)
