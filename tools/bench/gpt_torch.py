#!/usr/bin/python3
"""PyTorch twin of examples/gpt_char: the same GPT, the same initial weights
(the .npy files `gpt_char --init-out DIR` writes), the same batches (the
token_window source's seeded windows, reproduced by token_windows.py), the
same AdamW with decoupled weight decay on matrices and tables only, the same
warm-up + cosine schedule and global-norm clipping. Used three ways:

  - equality: losses per iteration against oflite's --metrics-out
    (tests/gpt_twin_test.sh, tools/bench/train_gpt.sh);
  - a peer for the step-time benchmark (--threads, --interop; timing lines);
  - the loss-curve plot (--plot PNG with two --metrics-out files).

Weights are [in, out] as oflite stores them, so a linear layer is
x @ w + b here too. The metrics file has oflite's format:
"<iteration> <name> <value>" (loss every iteration, val_loss after every
--eval-every iterations)."""
import argparse
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import token_windows  # noqa: E402


def load_weights(directory, dtype):
    weights = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".npy"):
            array = np.load(os.path.join(directory, name))
            weights[name[:-4]] = torch.tensor(array, dtype=dtype, requires_grad=True)
    if not weights:
        sys.exit(f"gpt_torch: no .npy weights in {directory} (write them with gpt_char --init-out)")
    return weights


class Gpt:
    def __init__(self, weights, layers, heads, tie_weights, activation, eps=1e-5):
        self.w = weights
        self.layers = layers
        self.heads = heads
        self.tie = tie_weights
        self.activation = activation
        self.eps = eps

    def linear(self, x, name, bias=True):
        y = x @ self.w[name + "-weight"]
        return y + self.w[name + "-bias"] if bias else y

    def layer_norm(self, x, name):
        return F.layer_norm(x, x.shape[-1:], self.w[name + "-gamma"], self.w[name + "-beta"],
                            self.eps)

    def attention(self, x, name):
        b, t, c = x.shape
        h = self.heads
        d = c // h
        q = self.linear(x, name + "-query").view(b, t, h, d).transpose(1, 2)
        k = self.linear(x, name + "-key").view(b, t, h, d).transpose(1, 2)
        v = self.linear(x, name + "-value").view(b, t, h, d).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.linear(y, name + "-proj")

    def mlp(self, x, name):
        h = self.linear(x, name + "-fc")
        if self.activation == "relu":
            h = F.relu(h)
        else:
            h = F.gelu(h, approximate="tanh" if self.activation == "gelu_tanh" else "none")
        return self.linear(h, name + "-proj")

    def __call__(self, tokens):
        t = tokens.shape[1]
        x = F.embedding(tokens, self.w["gpt-wte-weight"]) + self.w["gpt-wpe"][:t]
        for i in range(self.layers):
            block = f"gpt-h{i}"
            x = x + self.attention(self.layer_norm(x, block + "-ln_1"), block + "-attn")
            x = x + self.mlp(self.layer_norm(x, block + "-ln_2"), block + "-mlp")
        x = self.layer_norm(x, "gpt-ln_f")
        if self.tie:
            return x @ self.w["gpt-wte-weight"].t()
        return x @ self.w["gpt-lm_head-weight"]


def learning_rate(t, args):
    """oflite's schedule (docs/ops.md, LR schedule attributes)."""
    if t < args.warmup:
        return args.lr * (t + 1) / args.warmup
    p = min(1.0, (t - args.warmup) / max(1, args.iters - args.warmup))
    return args.min_lr + (args.lr - args.min_lr) * (1 + math.cos(math.pi * p)) / 2


def batch(data, split, t, args):
    x, y = data.batch(split, t, args.batch)
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def evaluate(model, data, args):
    losses = []
    with torch.no_grad():
        for t in range(args.eval_batches):
            x, y = batch(data, "test", t, args)
            logits = model(x)
            losses.append(F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).item())
    return sum(losses) / len(losses)


def train(args):
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.interop > 0:
        torch.set_num_interop_threads(args.interop)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    weights = load_weights(args.init, dtype)
    model = Gpt(weights, args.layers, args.heads, args.tie_weights, args.activation)
    decay = [w for w in weights.values() if w.dim() >= 2]
    no_decay = [w for w in weights.values() if w.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, args.beta2), eps=1e-8)
    data = token_windows.TokenWindows(args.tokens, args.block, args.seed, args.val_fraction)
    out = open(args.metrics_out, "w") if args.metrics_out else None
    step_times = []
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    for t in range(args.iters):
        begin = time.perf_counter()
        x, y = batch(data, "train", t, args)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(t, args)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(list(weights.values()), args.grad_clip)
        optimizer.step()
        step_times.append(time.perf_counter() - begin)
        if out:
            out.write(f"{t} loss {loss.item():.9g}\n")
        if args.eval_every > 0 and (t + 1) % args.eval_every == 0 and t + 1 < args.iters:
            val = evaluate(model, data, args)
            if out:
                out.write(f"{t} val_loss {val:.9g}\n")
            print(f"validation at iteration {t + 1}: loss {val:.4f}", flush=True)
        if args.log_every and ((t + 1) % args.log_every == 0 or t == 0):
            print(f"iter {t + 1}/{args.iters}  loss {loss.item():.4f}", flush=True)
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    if args.eval_batches > 0 and args.final_eval:
        val = evaluate(model, data, args)
        if out:
            out.write(f"{args.iters - 1} val_loss {val:.9g}\n")
        print(f"test: loss {val:.4f}")
    if out:
        out.close()
    steady = step_times[min(args.timing_from, len(step_times) - 1):]
    mean_ms = 1e3 * sum(steady) / len(steady)
    median_ms = 1e3 * sorted(steady)[len(steady) // 2]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"steady_step_ms {mean_ms:.3f} step_ms_median {median_ms:.3f} wall_s {wall:.3f} "
          f"cpu_s {cpu:.3f} peak_rss_mb {peak_mb:.1f} threads {args.threads}")


def read_metrics(path):
    curves = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                curves.setdefault(parts[1], []).append((int(parts[0]), float(parts[2])))
    return curves


def plot(args):
    """Loss curves of the --plot-metrics files; with two files, a second
    panel shows their relative difference per iteration (the curves of a
    twin lie on top of each other)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = [read_metrics(path) for path in args.plot_metrics]
    two = len(runs) == 2 and "loss" in runs[0] and "loss" in runs[1]
    fig, axes = plt.subplots(2 if two else 1, 1, figsize=(8, 6.5 if two else 4.5), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1]} if two else None)
    ax = axes[0] if two else axes
    widths = [2.5, 1.0, 1.0, 1.0]
    for k, (curves, label) in enumerate(zip(runs, args.plot_labels)):
        for name, style in (("loss", "-" if k == 0 else "--"), ("val_loss", "o-" if k == 0 else "s--")):
            if name in curves:
                xs, ys = zip(*curves[name])
                ax.plot([x + 1 for x in xs], ys, style, label=f"{label} {name}",
                        linewidth=widths[k] if name == "loss" else 1.5, markersize=5 - k)
    ax.set_ylabel("cross-entropy (nats/char)")
    ax.set_title(args.plot_title)
    ax.grid(alpha=0.3)
    ax.legend()
    if two:
        a, b = dict(runs[0]["loss"]), dict(runs[1]["loss"])
        xs = sorted(set(a) & set(b))
        rel = [max(abs(a[x] - b[x]) / abs(b[x]), 1e-9) for x in xs]
        axes[1].semilogy([x + 1 for x in xs], rel, ",", color="black")
        axes[1].set_ylabel("relative difference")
        axes[1].set_xlabel("iteration")
        axes[1].grid(alpha=0.3)
    else:
        ax.set_xlabel("iteration")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
    print(f"plot written to {args.plot}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", help="folder of initial weights (.npy, gpt_char --init-out)")
    parser.add_argument("--tokens", help="tokens.npy of the corpus (gpt_char's --data-dir)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--min-lr", type=float, default=1e-4)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--beta2", type=float, default=0.99)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--activation", default="gelu")
    parser.add_argument("--tie-weights", action="store_true")
    parser.add_argument("--seed", type=int, default=1, help="the token windows' seed")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--final-eval", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--interop", type=int, default=1)
    parser.add_argument("--timing-from", type=int, default=5,
                        help="steady_step_ms: the mean step from this iteration on")
    parser.add_argument("--metrics-out")
    parser.add_argument("--log-every", type=int, default=0)
    parser.add_argument("--plot", help="write a PNG of the loss curves of --plot-metrics files")
    parser.add_argument("--plot-metrics", nargs="*", default=[])
    parser.add_argument("--plot-labels", nargs="*", default=[])
    parser.add_argument("--plot-title", default="gpt_char: training and validation loss")
    args = parser.parse_args()
    if args.plot:
        if len(args.plot_metrics) != len(args.plot_labels) or not args.plot_metrics:
            sys.exit("gpt_torch: --plot needs as many --plot-labels as --plot-metrics files")
        plot(args)
        return
    if not args.init or not args.tokens:
        sys.exit("gpt_torch: --init and --tokens are required")
    train(args)


if __name__ == "__main__":
    main()
