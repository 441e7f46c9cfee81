#!/usr/bin/env bash
# The two-node test bed (scripts/testbed.sh) does what the multi-node tests rely on: two namespaces that reach
# each other only through the veth link, the bandwidth limit installed and carrying the traffic, a link that can
# be taken down and up, and nothing left behind by `down` or by `run` after a failing or interrupted command.
# Exits 77 (skipped) where namespaces cannot be made.
set -uo pipefail
testbed="$(cd "$(dirname "$0")/../.." && pwd)/scripts/testbed.sh"
reason=$("$testbed" check) || { status=$?; echo "SKIP: $reason"; exit "$status"; }

name="tbt$$"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cleanup() { "$testbed" down "$name" >/dev/null 2>&1; "$testbed" down "${name}r" >/dev/null 2>&1; }
trap cleanup EXIT

lines=$("$testbed" up "$name" --rate 8mbit) || { echo "FAIL: up: $lines"; exit 1; }
read -r _ ns0 addr0 if0 <<<"$(sed -n 1p <<<"$lines")"
read -r _ ns1 addr1 if1 <<<"$(sed -n 2p <<<"$lines")"
[[ $ns0 == "$name-n0" && $ns1 == "$name-n1" ]] || fail "up printed '$lines'"

# TCP from node 0 to node 1 carries 1 MB; a bandwidth of 8 Mbit/s needs about 1 s for it.
serve() { ip netns exec "$ns1" python3 -c "
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('$addr1', 5001)); s.listen(1)
s.settimeout(10); c, _ = s.accept(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    n += len(b)
print(n)" & }
send() { ip netns exec "$ns0" timeout 10 python3 -c "
import socket, time
for _ in range(50):
    try:
        s = socket.create_connection(('$addr1', 5001), timeout=2); break
    except OSError: time.sleep(0.1)
s.sendall(b'x' * 1000000); s.close()"; }
got=$( { serve; sleep 0.3; send; wait; } )
[[ $got == 1000000 ]] || fail "node 1 received '$got' bytes from node 0, expected 1000000"
sent=$(ip netns exec "$ns0" tc -s qdisc show dev "$if0" | awk '/^qdisc tbf/ {tbf=1} tbf && /Sent/ {print $2; exit}')
rate=$(ip netns exec "$ns0" tc qdisc show dev "$if0" | grep -o 'rate [^ ]*')
[[ $rate == "rate 8Mbit" ]] || fail "the link's qdisc says '$rate', expected rate 8Mbit"
[[ ${sent:-0} -ge 1000000 ]] || fail "the tbf qdisc sent ${sent:-0} bytes, expected the 1000000 that crossed the link"

# Node 0 cannot reach node 1's loopback: the namespaces share nothing but the link.
if ip netns exec "$ns0" python3 -c "import socket; socket.create_connection(('$addr1', 5999), timeout=1)" 2>/dev/null; then
  fail "a connection to a closed port on node 1 succeeded"
fi

# Link down: no traffic (connect times out instead of being refused); link up: traffic again.
"$testbed" link "$name" down
if ip netns exec "$ns0" python3 -c "
import socket, sys
try: socket.create_connection(('$addr1', 5999), timeout=1)
except ConnectionRefusedError: sys.exit(0)  # node 1 answered
except OSError: sys.exit(1)"; then fail "node 1 answered with the link down"; fi
"$testbed" link "$name" up
sleep 0.2
ip netns exec "$ns0" python3 -c "
import socket, sys
try: socket.create_connection(('$addr1', 5999), timeout=2)
except ConnectionRefusedError: sys.exit(0)
except OSError: sys.exit(1)" || fail "node 1 did not answer after the link came up"

# down stops what runs inside and removes both namespaces.
ip netns exec "$ns1" sleep 300 &
sleep_pid=$!
sleep 0.2
"$testbed" down "$name"
ip netns list | grep -q "^$name-" && fail "down left a namespace: $(ip netns list | grep "^$name-")"
sleep 0.2
kill -0 "$sleep_pid" 2>/dev/null && fail "down left process $sleep_pid running"

# run: cleans up after a failing command, and after SIGTERM to the script.
"$testbed" run "${name}r" -- sh -c 'ip netns list | grep -q "$TESTBED_NODE1" && exit 3'
status=$?
[[ $status == 3 ]] || fail "run returned $status, expected the command's 3"
ip netns list | grep -q "^${name}r-" && fail "run left a namespace after a failing command"
started="$(mktemp -u)"
"$testbed" run "${name}r" -- sh -c "touch '$started'; exec sleep 300" &
run_pid=$!
for _ in $(seq 100); do [[ -e $started ]] && break; sleep 0.1; done
rm -f "$started"
kill -TERM "$run_pid"
wait "$run_pid"
status=$?
[[ $status == 143 ]] || fail "run returned $status after SIGTERM, expected 143"
ip netns list | grep -q "^${name}r-" && fail "run left a namespace after SIGTERM"

[[ $failures == 0 ]] && echo "testbed: all checks passed" || exit 1
