#!/usr/bin/env bash
# tools/bench/token_windows.py gives exactly the token_window kernel's
# batches: a corpus prepared by the C++ tokenizer (a generated text, and
# Debian's fortunes when installed), both splits, seeds 1 and -5, iterations
# from 0 to 123456789; both the pure-Python lists and the NumPy arrays
# (/usr/bin/python3, which has NumPy where tools/install_deps.sh ran), and
# a device's rows of an S(0) shard.
set -u
GOLDEN="${TEST_SRCDIR}/oneflow_lite/tools/bench/token_windows_golden"
MODULE_DIR="${TEST_SRCDIR}/oneflow_lite/tools/bench"
PY=/usr/bin/python3
T="${TEST_TMPDIR:-/tmp}/token_windows"
rm -rf "$T"; mkdir -p "$T"
fail=0

# A text of every printable byte and some UTF-8, ~40 kB.
text="$T/text.txt"
for i in $(seq 1 400); do
  printf 'line %d: The quick brown fox jumps over the lazy dog; caf\xc3\xa9 {%d} ~!@#$%%^&*()\n' \
    "$i" $((i * i % 97)) >> "$text"
done

run_case() {  # run_case NAME BATCH BLOCK TEXT_FILE...
  local name=$1 batch=$2 block=$3; shift 3
  local dir="$T/$name"
  mkdir -p "$dir"
  local iterations
  if ! iterations=$("$GOLDEN" "$dir" "$batch" "$block" "$@" 2> "$dir/err"); then
    echo "FAIL: $name: token_windows_golden failed"; cat "$dir/err"; fail=1; return
  fi
  iterations=${iterations#ITERATIONS }
  if PYTHONPATH="$MODULE_DIR" "$PY" - "$dir" "$batch" "$block" $iterations <<'EOF'
import sys
import numpy as np
import token_windows as tw

out, batch, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
iterations = [int(t) for t in sys.argv[4:]]
tokens = out + "/tokens.npy"
ids = tw.read_tokens(tokens)
assert np.array_equal(np.load(tokens), np.asarray(ids)), "read_tokens differs from numpy.load"
checked = 0
for seed in (1, -5):
    for split in ("train", "test"):
        for t in iterations:
            prefix = f"{out}/{split}_s{seed}_t{t}_"
            want_input = np.load(prefix + "input.npy")
            want_target = np.load(prefix + "target.npy")
            got_input, got_target = tw.batch(ids, t, batch, block, seed, split)
            assert got_input.dtype == np.int32 and got_input.shape == (batch, block)
            assert np.array_equal(got_input, want_input), (split, seed, t, got_input, want_input)
            assert np.array_equal(got_target, want_target), (split, seed, t)
            lists = tw.batch_lists(ids, t, batch, block, seed, split)
            assert lists == (want_input.tolist(), want_target.tolist()), (split, seed, t)
            assert np.array_equal(want_target[:, :-1], want_input[:, 1:])
            # Device 1 of 2 (S(0)): its rows of the logical batch.
            begin, size = tw.split_range(len(ids), split)
            half = batch // 2
            starts = tw.window_starts(seed, t, batch, size, block, rows=range(half, batch))
            for i, start in enumerate(starts):
                assert list(ids[begin + start:begin + start + block]) == \
                    want_input[half + i].tolist(), (split, seed, t, i)
            checked += 1
# The class form loads the file once.
windows = tw.TokenWindows(tokens, block, -5)
assert np.array_equal(windows.batch("test", iterations[-1], batch)[1],
                      np.load(f"{out}/test_s-5_t{iterations[-1]}_target.npy"))
# The path form reads the file itself.
first_input, _ = tw.batch(tokens, iterations[0], batch, block, 1, "train")
assert np.array_equal(first_input, np.load(f"{out}/train_s1_t{iterations[0]}_input.npy"))
print(f"ok: {checked} batches of {len(ids)} tokens equal")
EOF
  then echo "ok: $name"; else echo "FAIL: $name"; fail=1; fi
}

run_case generated 5 16 "$text"
run_case generated_odd 3 1 "$text"
fortunes=(/usr/share/games/fortunes/art /usr/share/games/fortunes/computers)
if [[ -f ${fortunes[0]} && -f ${fortunes[1]} ]]; then
  run_case fortunes 12 64 "${fortunes[@]}"
else
  echo "skip: fortunes (Debian package fortunes) not installed"
fi
exit $fail
