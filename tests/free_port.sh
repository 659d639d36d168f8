# shellcheck shell=bash
# free_port: prints a TCP port that is free on 127.0.0.1 right now (the
# kernel picks it: a bound-then-closed socket), so concurrent tests do not
# collide the way random picks from a fixed range did. Sourced by the tests
# that start `oflite run` ranks with an explicit --master port.
free_port() {
  /usr/bin/python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
