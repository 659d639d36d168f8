#!/usr/bin/python3
"""PyTorch peer of tools/bench/scaling/gpt_layouts.py: one rank of
DistributedDataParallel (Gloo backend) training the GPT of examples/gpt_char
(the model of tools/bench/gpt_torch.py: pre-LayerNorm blocks, separate
query/key/value/proj linears, GELU MLP, untied lm_head, weights [in, out]),
AdamW (decay on matrices and tables) with global-norm clipping, on random
token windows drawn every step, batch GLOBAL_BATCH / WORLD per rank,
torch.set_num_threads(THREADS). Initial weights: normal(0, 0.02) (the timing
does not depend on them).

Runs WARMUP + MEASURE + WARMUP steps. Rank 0 prints "mark start" once step
WARMUP is done and "mark end" once step WARMUP + MEASURE is done (flushed,
so the driver timestamps them as they arrive), then "loss X params N".
With --world 1 it trains the plain model (no DDP, no process group).
Exit 1 on any failure (message on stderr).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_peer  # noqa: E402  (the DDP flags and process group)


def make_weights(torch, layers, channels, block, vocab):
    """The parameter names and shapes gpt_char uses (api/transformer.h)."""
    c = channels
    shapes = {"gpt-wte-weight": (vocab, c), "gpt-wpe": (block, c),
              "gpt-ln_f-gamma": (c,), "gpt-ln_f-beta": (c,), "gpt-lm_head-weight": (c, vocab)}
    for i in range(layers):
        h = "gpt-h%d" % i
        for ln in ("ln_1", "ln_2"):
            shapes["%s-%s-gamma" % (h, ln)] = (c,)
            shapes["%s-%s-beta" % (h, ln)] = (c,)
        for name in ("query", "key", "value", "proj"):
            shapes["%s-attn-%s-weight" % (h, name)] = (c, c)
            shapes["%s-attn-%s-bias" % (h, name)] = (c,)
        shapes["%s-mlp-fc-weight" % h] = (c, 4 * c)
        shapes["%s-mlp-fc-bias" % h] = (4 * c,)
        shapes["%s-mlp-proj-weight" % h] = (4 * c, c)
        shapes["%s-mlp-proj-bias" % h] = (c,)
    weights = {}
    for name, shape in sorted(shapes.items()):
        if name.endswith("-gamma"):
            value = torch.ones(shape)
        elif name.endswith("-beta") or name.endswith("-bias"):
            value = torch.zeros(shape)
        else:
            value = torch.randn(shape) * 0.02
        weights[name] = torch.nn.Parameter(value)
    return weights


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=96)
    parser.add_argument("--global-batch", type=int, default=12)
    ddp_peer.add_ddp_arguments(parser)
    args = parser.parse_args()

    import torch  # after argparse: --help runs nothing
    import torch.nn.functional as F
    from gpt_torch import Gpt
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # ParameterDict keys may hold '-' (only '.' is refused).
            self.w = torch.nn.ParameterDict(
                make_weights(torch, args.layers, args.channels, args.block, args.vocab))

        def forward(self, tokens):
            return Gpt(self.w, args.layers, args.heads, False, "gelu")(tokens)

    model = Module()
    model = ddp_peer.wrap_ddp(torch, model, args)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    batch = args.global_batch // args.world
    loss = None
    steps = 2 * args.warmup + args.measure
    for step in range(steps):
        x = torch.randint(0, args.vocab, (batch, args.block))
        y = torch.randint(0, args.vocab, (batch, args.block))
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if args.rank == 0 and step + 1 in (args.warmup, args.warmup + args.measure):
            loss.item()  # the step is complete
            print("mark start" if step + 1 == args.warmup else "mark end", flush=True)
    if args.rank == 0:
        print("loss %.4f params %d" % (loss.item(), sum(p.numel() for p in params)), flush=True)
    if args.world > 1:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as error:  # a failed rank says why, one line, exit 1
        print("gpt_ddp_peer: %s: %s" % (type(error).__name__, error), file=sys.stderr)
        sys.exit(1)
