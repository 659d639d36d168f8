#!/usr/bin/python3
"""train_gpt: the GPT example's training step, oflite against its PyTorch twin.

  bazel build //examples:gpt_char
  tools/bench/train_gpt.py [--configs nano,4x] [--cores 1,2] [--samples 5]
                           [--iters 120] [--warmup 20]

Both sides train the same model from the same initial weights on the same
batches (examples/gpt_char and tools/bench/gpt_torch.py; their losses agree
step for step, tests/gpt_char_test.sh), pinned with taskset to the same
cores. Configurations:
  nano  nanoGPT's CPU configuration: 4 layers, 4 heads, 128 channels,
        block 64, batch 12 (0.8 M parameters)
  4x    four times the parameters: 4 layers, 8 heads, 256 channels,
        block 64, batch 12
Settings: first every setting of both sides runs once (the screen), then the
best --finalists of each side run --samples more times, interleaved
(oflite, peer, oflite, peer, ...); medians are of those samples.
  oflite   1 core: one device, 1 thread; 2 cores: one device x 2 threads
           (--cpu-threads 2) and two devices x 1 thread (data parallel)
  PyTorch  torch.set_num_threads(t) x OPENBLAS_NUM_THREADS=b (t, b in
           1..cores, OMP_NUM_THREADS=t, one interop thread), each with
           OpenBLAS's own kernel choice and with OPENBLAS_CORETYPE set to
           the widest family the CPU has (SkylakeX for AVX-512, Haswell for
           AVX2), since Debian's OpenBLAS may pick a narrower one
The step time is the mean over iterations [warmup, iters) (oflite: from its
progress lines; PyTorch: from the loop's clock), data batch included on
both sides. Beside it: the whole process's user+sys CPU seconds and wall seconds (start-up included: compiling the plan, importing torch),
peak RSS, and the load average before and after."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(ROOT, "bazel-bin/examples/gpt_char")
TWIN = os.path.join(ROOT, "tools/bench/gpt_torch.py")
CONFIGS = {
    "nano": dict(layers=4, heads=4, channels=128, block=64, batch=12),
    "4x": dict(layers=4, heads=8, channels=256, block=64, batch=12),
}


def widest_core():
    """The OpenBLAS kernel family matching the CPU's widest vectors."""
    flags = open("/proc/cpuinfo").read()
    if all(f in flags for f in (" avx512f", " avx512cd", " avx512bw", " avx512dq", " avx512vl")):
        return "SkylakeX"
    return "Haswell" if " avx2" in flags and " fma" in flags else ""


WIDEST_CORE = widest_core()


def label_of(side, setting):
    if side == "oflite":
        return f"{setting[0]} dev x {setting[1]} thr"
    t, b, core = setting
    return f"torch {t} x blas {b}" + (f" {core}" if core else "")


def run(cmd, env=None):
    """Runs cmd; returns (stdout, wall s, cpu s, peak rss MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"train_gpt: {' '.join(cmd)} failed ({proc.returncode}):\n{out[-3000:]}")
    return out, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def model_flags(c):
    return ["--layers", str(c["layers"]), "--heads", str(c["heads"]), "--channels",
            str(c["channels"]), "--block", str(c["block"]), "--batch", str(c["batch"])]


def ours_step_ms(out, args, batch):
    """Mean step over [warmup, iters) from the progress lines (one every
    --warmup iterations: "iter N/M ... samples/s R")."""
    total_s, iters = 0.0, 0
    for n, rate in re.findall(r"^iter (\d+)/\d+ .* samples/s (\d+)", out, re.M):
        n, rate = int(n), float(rate)
        if n > args.warmup and n % args.warmup == 0 and rate > 0:
            total_s += args.warmup * batch / rate
            iters += args.warmup
    if iters != args.iters - args.warmup:
        sys.exit(f"train_gpt: could not read oflite's progress lines:\n{out[-2000:]}")
    return 1e3 * total_s / iters


def ours_cmd(c, data, out_dir, cores, layout):
    devices, threads = layout
    return (["taskset", "-c", f"0-{cores - 1}", GPT] + model_flags(c) +
            ["--data-dir", data, "--out-dir", out_dir, "--iters", str(ARGS.iters),
             "--warmup", "10", "--devices", str(devices), "--", "--eval=false",
             "--log-every", str(ARGS.warmup), "--cpu-threads", str(threads)])


def peer_cmd(c, data, init, cores, threads):
    return (["taskset", "-c", f"0-{cores - 1}", ARGS.python, TWIN, "--init", init, "--tokens",
             os.path.join(data, "tokens.npy"), "--layers", str(c["layers"]), "--heads",
             str(c["heads"]), "--block", str(c["block"]), "--batch", str(c["batch"]),
             "--iters", str(ARGS.iters), "--warmup", "10", "--timing-from", str(ARGS.warmup),
             "--threads", str(threads), "--interop", "1"])


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="nano,4x")
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--iters", type=int, default=120)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--finalists", type=int, default=2,
                        help="settings per side sampled after the screen")
    parser.add_argument("--python", default="/usr/bin/python3")
    ARGS = args = parser.parse_args()
    if args.samples < 1 or args.warmup < 1 or args.iters <= args.warmup or \
            (args.iters - args.warmup) % args.warmup:
        sys.exit("train_gpt: want --samples >= 1 and --iters = warmup + a multiple of --warmup")
    if not os.access(GPT, os.X_OK):
        sys.exit("train_gpt: build it first: bazel build //examples:gpt_char")
    configs = args.configs.split(",")
    cores_list = [int(c) for c in args.cores.split(",")]
    for name in configs:
        if name not in CONFIGS:
            sys.exit(f"train_gpt: unknown config '{name}' (nano, 4x)")
    if max(cores_list) > os.cpu_count():
        sys.exit(f"train_gpt: --cores {max(cores_list)} but only {os.cpu_count()} available")
    tmp = tempfile.mkdtemp(prefix="train_gpt.")
    data = os.path.join(tmp, "data")
    print(f"train_gpt: {args.iters} iterations per run, step = mean of iterations "
          f"[{args.warmup}, {args.iters}), medians of {args.samples} interleaved samples")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    for name in configs:
        c = CONFIGS[name]
        init = os.path.join(tmp, name + "_init")
        run([GPT] + model_flags(c) + ["--data-dir", data, "--out-dir", tmp, "--iters",
                                      str(args.iters), "--warmup", "10", "--init-out", init,
                                      "--compile-only"])
        for cores in cores_list:
            ours = [(1, 1)] if cores == 1 else [(1, cores), (cores, 1)]
            peers = sorted({(t, b, core) for t in range(1, cores + 1)
                            for b in range(1, cores + 1) for core in ("", WIDEST_CORE)})

            def sample(side, setting):
                if side == "oflite":
                    out, wall, cpu, rss = run(ours_cmd(c, data, tmp, cores, setting))
                    return ours_step_ms(out, args, c["batch"]), cpu, wall, rss
                t, b, core = setting
                env = dict(os.environ, OPENBLAS_NUM_THREADS=str(b), OMP_NUM_THREADS=str(t))
                env.pop("OPENBLAS_CORETYPE", None)
                if core:
                    env["OPENBLAS_CORETYPE"] = core
                out, wall, cpu, rss = run(peer_cmd(c, data, init, cores, t), env)
                return float(re.search(r"steady_step_ms ([\d.]+)", out).group(1)), cpu, wall, rss

            screen = {}
            for setting in ours:
                screen[("oflite", setting)] = sample("oflite", setting)
            for setting in peers:
                screen[("torch", setting)] = sample("torch", setting)
            finalists = []
            for side in ("oflite", "torch"):
                ranked = sorted((k for k in screen if k[0] == side), key=lambda k: screen[k][0])
                finalists += ranked[:args.finalists]
            samples = {k: [] for k in finalists}
            for _ in range(args.samples):
                for key in finalists:
                    samples[key].append(sample(*key))
            medians = {k: [statistics.median(x[i] for x in v) for i in range(4)]
                       for k, v in samples.items()}
            print(f"\n{name} ({c['layers']} layers, {c['heads']} heads, {c['channels']} channels, "
                  f"block {c['block']}, batch {c['batch']}), {cores} core(s):")
            print(f"  {'side':7} {'setting':30} {'step ms':>8} {'cpu s':>7} {'wall s':>7} "
                  f"{'peak MiB':>9}")
            for (side, setting), (step, cpu, wall, rss) in sorted(medians.items(),
                                                                 key=lambda kv: kv[1][0]):
                print(f"  {side:7} {label_of(side, setting):30} {step:8.2f} {cpu:7.2f} "
                      f"{wall:7.2f} {rss:9.1f}")
            print("  screen (one run each): " + ", ".join(
                f"{label_of(*k)} {v[0]:.1f}" for k, v in sorted(screen.items(),
                                                                key=lambda kv: kv[1][0])))
            best_ours = min((v for k, v in medians.items() if k[0] == "oflite"), key=lambda v: v[0])
            best_peer = min((v for k, v in medians.items() if k[0] == "torch"), key=lambda v: v[0])
            speedup = best_peer[0] / best_ours[0]
            print(f"  best: oflite {best_ours[0]:.2f} ms, PyTorch {best_peer[0]:.2f} ms: "
                  f"{speedup:.2f}x; peak RSS {best_ours[3]:.0f} vs {best_peer[3]:.0f} MiB")
            rows.append((name, cores, best_ours[0], best_peer[0], speedup, best_ours[3],
                         best_peer[3]))
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n| config | cores | oflite step ms | PyTorch best ms | speed | peak RSS MiB (oflite / "
          "PyTorch) |")
    print("|---|---|---|---|---|---|")
    for name, cores, ours, peer, speedup, rss_ours, rss_peer in rows:
        print(f"| {name} | {cores} | {ours:.2f} | {peer:.2f} | {speedup:.2f}x | "
              f"{rss_ours:.0f} / {rss_peer:.0f} |")


if __name__ == "__main__":
    main()
