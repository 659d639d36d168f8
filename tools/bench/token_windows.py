"""The batches of OneFlow-Lite's token_window source, in Python.

The PyTorch twin of a GPT trained on TokenWindows (api/data_sources.h) must
see exactly the batches the C++ source gives. This module repeats its rules
(oneflow_lite/data/token_file.h, data/counter_rng.h) in pure Python, without
torch and, except for batch(), without NumPy:

  split_range(count, split, val_fraction)   the split's (begin, size)
  window_start(seed, t, g, n, block)        where row g of iteration t starts
  read_tokens(path, token_dtype)            a token file's ids (.npy or raw)
  batch_lists(tokens, t, ...)               input/target rows as lists
  batch(tokens, t, ...)                     the same as int32 NumPy [B, T]
  TokenWindows(path, block, seed).batch(split, t, B)   a file loaded once

Row g of iteration t is the window of `block` tokens of the split starting
at window_start(seed, t, g, n, block) (n = the split's tokens), uniform in
[0, n - block - 1]; its target is the window one token later. `seed` is the
op's seed attribute (TokenWindowOptions.seed when given), taken modulo 2^64
as the C++ kernel does.

Command line (prints the window starts of one batch):
  python3 token_windows.py TOKENS.npy --seed 1 --iteration 0 --batch 12 --block 64
"""

import argparse
import ast
import array
import struct
import sys

MASK64 = (1 << 64) - 1
DEFAULT_VAL_FRACTION = 0.1


def mix_bits(x):
    """SplitMix64's output function (MixBits)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def counter_bits(seed, counter):
    """Random bits of element `counter` of stream `seed` (CounterBits)."""
    return mix_bits(mix_bits(seed & MASK64)
                    ^ mix_bits((counter * 0xD1B54A32D192ED03 + 0x8CB92BA72F3D8DD7) & MASK64))


def derive_stream_seed(seed, tag):
    """An independent stream from a seed and a tag (DeriveStreamSeed)."""
    return mix_bits((seed & MASK64) ^ mix_bits((tag + 0x632BE59BD9B4E019) & MASK64))


class CounterRng:
    """The sequential stream CounterBits(seed, 0), (seed, 1), ..."""

    def __init__(self, seed, counter=0):
        self.seed = seed & MASK64
        self.counter = counter

    def next(self):
        bits = counter_bits(self.seed, self.counter)
        self.counter += 1
        return bits

    def next_below(self, bound):
        """Uniform in [0, bound) by rejection, as CounterRng::NextBelow."""
        limit = MASK64 - MASK64 % bound
        bits = self.next()
        while bits >= limit:
            bits = self.next()
        return bits % bound


def split_range(count, split, val_fraction=DEFAULT_VAL_FRACTION):
    """(begin, size) of `split` in a file of `count` tokens (TokenSplitRange):
    train is the first int(count * (1 - val_fraction)) tokens, test the rest."""
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    train = int(float(count) * (1.0 - val_fraction))
    if split == "train":
        return 0, train
    if split == "test":
        return train, count - train
    raise ValueError(f'split must be "train" or "test", got "{split}"')


def window_start(seed, iteration, row, split_size, block):
    """Where the window of logical row `row` at `iteration` starts inside a
    split of `split_size` >= block + 1 tokens (TokenWindowStart)."""
    if split_size < block + 1:
        raise ValueError(f"a split of {split_size} tokens is shorter than block {block} + 1")
    rng = CounterRng(derive_stream_seed(derive_stream_seed(seed, iteration), row))
    return rng.next_below(split_size - block)


_NPY_TYPES = {"<u2": ("H", 2), "<i4": ("i", 4), "<i8": ("q", 8)}
_RAW_TYPES = {"uint16": ("H", 2), "int32": ("i", 4)}


def _ids_from_bytes(data, typecode, size, source):
    if len(data) % size:
        raise ValueError(f"{source}: {len(data)} bytes, not a multiple of {size}")
    ids = array.array(typecode)
    if ids.itemsize != size:
        raise RuntimeError(f"array typecode {typecode} is not {size} bytes here")
    ids.frombytes(data)
    if sys.byteorder != "little":
        ids.byteswap()
    return ids


def read_tokens(path, token_dtype="uint16"):
    """The ids of a token file as an array.array: a 1-D .npy of uint16,
    int32 or int64 (its header decides), or raw little-endian ids of
    `token_dtype` ("uint16" or "int32")."""
    with open(path, "rb") as f:
        content = f.read()
    if not path.endswith(".npy"):
        if token_dtype not in _RAW_TYPES:
            raise ValueError(f"'{path}': token_dtype must be uint16 or int32, got {token_dtype}")
        return _ids_from_bytes(content, *_RAW_TYPES[token_dtype], f"'{path}'")
    if content[:6] != b"\x93NUMPY":
        raise ValueError(f"'{path}': not a .npy file")
    major = content[6]
    if major == 1:
        (length,) = struct.unpack("<H", content[8:10])
        begin = 10
    else:
        (length,) = struct.unpack("<I", content[8:12])
        begin = 12
    header = ast.literal_eval(content[begin:begin + length].decode("latin1"))
    descr = header["descr"].replace("=", "<")
    if descr not in _NPY_TYPES or header["fortran_order"] or len(header["shape"]) != 1:
        raise ValueError(f"'{path}': not a 1-D uint16/int32/int64 token array: {header}")
    ids = _ids_from_bytes(content[begin + length:], *_NPY_TYPES[descr], f"'{path}'")
    if len(ids) != header["shape"][0]:
        raise ValueError(f"'{path}': {len(ids)} ids, the header says {header['shape'][0]}")
    return ids


def _tokens(tokens, token_dtype):
    return read_tokens(tokens, token_dtype) if isinstance(tokens, str) else tokens


def window_starts(seed, iteration, batch_size, split_size, block, rows=None):
    """The starts (within the split) of the rows of one batch; `rows`
    (default all) picks logical rows, e.g. range(k * B // p, (k + 1) * B // p)
    for device k of p."""
    rows = range(batch_size) if rows is None else rows
    return [window_start(seed, iteration, g, split_size, block) for g in rows]


def batch_lists(tokens, iteration, batch_size, block, seed, split="train",
                val_fraction=DEFAULT_VAL_FRACTION, token_dtype="uint16"):
    """(input, target): lists of `batch_size` rows of `block` ids for
    `iteration`. `tokens`: a token file path or a sequence of every id."""
    ids = _tokens(tokens, token_dtype)
    begin, size = split_range(len(ids), split, val_fraction)
    inputs, targets = [], []
    for start in window_starts(seed, iteration, batch_size, size, block):
        first = begin + start
        inputs.append([int(v) for v in ids[first:first + block]])
        targets.append([int(v) for v in ids[first + 1:first + block + 1]])
    return inputs, targets


def batch(tokens, iteration, batch_size, block, seed, split="train",
          val_fraction=DEFAULT_VAL_FRACTION, token_dtype="uint16"):
    """(input, target) as int32 NumPy arrays [batch_size, block], the
    token_window outputs of `iteration`. `tokens`: a path, or the ids (a
    NumPy array or any sequence; pass a loaded array to avoid re-reading)."""
    import numpy as np  # only here: the rest of the module is pure Python

    ids = _tokens(tokens, token_dtype)
    ids = np.asarray(ids, dtype=np.int64)
    begin, size = split_range(len(ids), split, val_fraction)
    starts = np.array(window_starts(seed, iteration, batch_size, size, block), dtype=np.int64)
    index = begin + starts[:, None] + np.arange(block, dtype=np.int64)[None, :]
    return ids[index].astype(np.int32), ids[index + 1].astype(np.int32)


class TokenWindows:
    """A token file loaded once, giving the batches of both splits:
    TokenWindows(path, block, seed).batch("train", t, batch_size) is
    batch(path, t, batch_size, block, seed, "train") without re-reading."""

    def __init__(self, path, block, seed, val_fraction=DEFAULT_VAL_FRACTION,
                 token_dtype="uint16"):
        import numpy as np

        self.ids = np.asarray(read_tokens(path, token_dtype), dtype=np.int64)
        self.block = block
        self.seed = seed
        self.val_fraction = val_fraction

    def batch(self, split, iteration, batch_size):
        """(input, target) int32 [batch_size, block] of `iteration`."""
        return batch(self.ids, iteration, batch_size, self.block, self.seed, split,
                     self.val_fraction)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tokens")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--iteration", type=int, default=0)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--block", type=int, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--val-fraction", type=float, default=DEFAULT_VAL_FRACTION)
    parser.add_argument("--token-dtype", default="uint16")
    args = parser.parse_args()
    ids = read_tokens(args.tokens, args.token_dtype)
    _, size = split_range(len(ids), args.split, args.val_fraction)
    print(" ".join(str(s) for s in window_starts(args.seed, args.iteration, args.batch, size,
                                                  args.block)))


if __name__ == "__main__":
    main()
