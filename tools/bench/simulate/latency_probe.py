#!/usr/bin/python3
"""Measures a link's one-way latency: 1-byte TCP ping-pongs (TCP_NODELAY).

  latency_probe.py serve PORT [--timeout S]
        accepts one connection and echoes every byte until the peer closes
  latency_probe.py ping HOST PORT [--count N] [--timeout S]
        connects (retrying until the timeout), makes 20 round trips to warm
        up, then N (default 500), and prints
        "one-way N round trips median M us min L us" (round trip / 2)

The median of the round trips halves is the figure to use: the minimum is
the path with nothing else on the cores. Every wait is bounded by --timeout
(default 30 s); exit 1 on a timeout or a socket error, 2 on bad arguments.
Standard library only (it runs inside network namespaces with
/usr/bin/python3, like tests/netns/link_probe.py).
"""
import socket
import statistics
import sys
import time

WARMUP = 20


def serve(port, timeout):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))
        listener.listen(1)
        listener.settimeout(timeout)
        conn, _ = listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(timeout)
            while True:
                byte = conn.recv(1)
                if not byte:
                    return
                conn.sendall(byte)


def ping(host, port, count, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=timeout)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        halves = []
        for i in range(WARMUP + count):
            start = time.perf_counter()
            conn.sendall(b"x")
            if not conn.recv(1):
                raise OSError("the server closed the connection after %d round trips" % i)
            if i >= WARMUP:
                halves.append((time.perf_counter() - start) / 2)
        conn.shutdown(socket.SHUT_WR)
    print("one-way %d round trips median %.1f us min %.1f us" % (
        count, statistics.median(halves) * 1e6, min(halves) * 1e6), flush=True)


def main(argv):
    words = list(argv)
    options = {"--timeout": 30.0, "--count": 500}
    for name in options:
        if name in words:
            at = words.index(name)
            if at + 1 >= len(words):
                print("latency_probe: %s needs a value" % name, file=sys.stderr)
                return 2
            options[name] = words[at + 1]
            del words[at:at + 2]
    if "--help" in words or not words:
        print(__doc__)
        return 0 if "--help" in words else 2
    try:
        timeout, count = float(options["--timeout"]), int(options["--count"])
        if timeout <= 0 or count < 1:
            raise ValueError("--timeout and --count must be positive")
        if words[0] == "serve" and len(words) == 2:
            serve(int(words[1]), timeout)
        elif words[0] == "ping" and len(words) == 3:
            ping(words[1], int(words[2]), count, timeout)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except ValueError as error:
        print("latency_probe: %s" % error, file=sys.stderr)
        return 2
    except (OSError, socket.timeout) as error:
        print("latency_probe: %s" % error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
