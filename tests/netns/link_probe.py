#!/usr/bin/python3
"""Measures what a link carries: one TCP stream of BYTES from client to server.

  link_probe.py serve PORT [--timeout S]    accepts one connection, drains it,
                                            prints "received N bytes in T s R Mbit/s"
  link_probe.py send HOST PORT BYTES [--timeout S]
                                            connects (retrying until the
                                            timeout), sends BYTES, prints the
                                            same line from the sender's side

The receiver's figure is the one to trust (the sender's last bytes may still
sit in buffers). Every wait is bounded by --timeout (default 60 s); exit 1 on
a timeout or a socket error, 2 on bad arguments. Standard library only.
"""
import socket
import sys
import time


def report(what, nbytes, seconds):
    mbit = nbytes * 8 / seconds / 1e6 if seconds > 0 else float("inf")
    print("%s %d bytes in %.3f s %.1f Mbit/s" % (what, nbytes, seconds, mbit), flush=True)


def serve(port, timeout):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))
        listener.listen(1)
        listener.settimeout(timeout)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(timeout)
            total = 0
            start = None
            while True:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                if start is None:
                    start = time.monotonic()
                total += len(chunk)
            report("received", total, time.monotonic() - (start or time.monotonic()))


def send(host, port, nbytes, timeout):
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
        block = b"\0" * (1 << 20)
        left = nbytes
        start = time.monotonic()
        while left > 0:
            n = conn.send(block[:min(left, len(block))])
            left -= n
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # the receiver closes once it has everything
        report("sent", nbytes, time.monotonic() - start)


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    timeout = 60.0
    if "--timeout" in argv:
        timeout = float(argv[argv.index("--timeout") + 1])
        args.remove(argv[argv.index("--timeout") + 1])
    if "--help" in argv or not args:
        print(__doc__)
        return 0
    try:
        if args[0] == "serve" and len(args) == 2:
            serve(int(args[1]), timeout)
        elif args[0] == "send" and len(args) == 4:
            send(args[1], int(args[2]), int(args[3]), timeout)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, socket.timeout) as error:
        print("link_probe: %s" % error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
