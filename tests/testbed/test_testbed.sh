#!/usr/bin/env bash
# The two-node test bed (scripts/testbed.sh) does what the multi-node tests rely on: two namespaces that reach
# each other only through the veth link, the bandwidth limit installed and carrying the traffic, a link that can
# be taken down and up, and nothing left behind by `down` or by `run` after a failing or interrupted command, nor
# by an `up` whose step failed; and test beds made at the same moment (issue 27).
# Exits 77 (skipped) where namespaces cannot be made.
set -uo pipefail
testbed="$(cd "$(dirname "$0")/../.." && pwd)/scripts/testbed.sh"
reason=$("$testbed" check) || { status=$?; echo "SKIP: $reason"; exit "$status"; }

# Names of at most 10 characters with a pid of up to 7 digits, each test bed's own prefix.
name="tbt$$"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cleanup() { for n in "$name" "tbr$$" "tbf$$" "tbs$$" tb{1..4}$$; do "$testbed" down "$n" >/dev/null 2>&1; done; }
trap cleanup EXIT

# KEY's value on NODE's line of up's output ("nodeK ns=NS addr=ADDR if=IF"), by name.
field() { grep "^$2 " <<<"$1" | tr ' ' '\n' | sed -n "s/^$3=//p"; }

lines=$("$testbed" up "$name" --rate 8mbit) || { echo "FAIL: up: $lines"; exit 1; }
ns0=$(field "$lines" node0 ns) if0=$(field "$lines" node0 if) ns1=$(field "$lines" node1 ns)
addr1=$(field "$lines" node1 addr)
[[ $ns0 == "$name-n0" && $ns1 == "$name-n1" && $if0 == "$name-0" && $addr1 == 10.213.0.2 ]] ||
  fail "up printed '$lines'"

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

# run: exports what up printed, cleans up after a failing command, and after SIGTERM to the script.
"$testbed" run "tbr$$" -- sh -c '[ "$TESTBED_ADDR1/$TESTBED_IF0" = 10.213.0.2/tbr'$$'-0 ] &&
  ip netns list | grep -q "$TESTBED_NODE1" && exit 3'
status=$?
[[ $status == 3 ]] || fail "run returned $status, expected the command's 3"
ip netns list | grep -q "^tbr$$-" && fail "run left a namespace after a failing command"
started="$(mktemp -u)"
"$testbed" run "tbr$$" -- sh -c "touch '$started'; exec sleep 300" &
run_pid=$!
for _ in $(seq 100); do [[ -e $started ]] && break; sleep 0.1; done
rm -f "$started"
kill -TERM "$run_pid"
wait "$run_pid"
status=$?
[[ $status == 143 ]] || fail "run returned $status after SIGTERM, expected 143"
ip netns list | grep -q "^tbr$$-" && fail "run left a namespace after SIGTERM"

# A failed step fails up: it names the step, prints no node lines and leaves nothing (a tc that always fails).
fake="$(mktemp -d)"
printf '#!/bin/sh\necho "RTNETLINK answers: injected failure" >&2\nexit 2\n' > "$fake/tc" && chmod +x "$fake/tc"
out=$(PATH="$fake:$PATH" "$testbed" up "tbf$$" 2>"$fake/err")
status=$?
[[ $status != 0 && -z $out ]] || fail "up with a failing tc returned $status and printed '$out'"
grep -q "rate limit on tbf$$-0 failed: RTNETLINK answers: injected failure" "$fake/err" ||
  fail "up with a failing tc said '$(cat "$fake/err")'"
ip netns list | grep -q "^tbf$$-" && fail "up left a namespace after a failed step"
rm -rf "$fake"

# Four test beds made at the same moment, then removed at the same moment: all made, each its own, all gone.
together="$(mktemp -d)"
for k in 1 2 3 4; do "$testbed" up "tb$k$$" >"$together/out$k" 2>"$together/err$k" & pids[k]=$!; done
for k in 1 2 3 4; do
  wait "${pids[k]}" || fail "up tb$k$$ alongside three others failed: $(cat "$together/err$k")"
  [[ $(field "$(cat "$together/out$k")" node1 ns) == "tb$k$$-n1" && ! -s $together/err$k ]] ||
    fail "up tb$k$$ alongside three others printed '$(cat "$together/out$k" "$together/err$k")'"
done
for k in 1 2 3 4; do "$testbed" down "tb$k$$" & pids[k]=$!; done
for k in 1 2 3 4; do wait "${pids[k]}" || fail "down tb$k$$ alongside three others failed"; done
ip netns list | grep -q "^tb[1-4]$$-" && fail "concurrent downs left $(ip netns list | grep "^tb[1-4]$$-")"
rm -rf "$together"

# Four nodes through a switch, each link limited at both ends with the bucket and the packet size asked for: every
# node reaches every other, and down removes the nodes and the switch.
lines=$("$testbed" up "tbs$$" --nodes 4 --rate 8mbit --burst 16384 --mtu 9000) || fail "up --nodes 4: $lines"
[[ $(grep -c '^node' <<<"$lines") == 4 && $(field "$lines" node3 addr) == 10.213.0.4 ]] ||
  fail "up --nodes 4 printed '$lines'"
for k in 0 3; do
  qdisc=$(ip netns exec "tbs$$-n$k" tc qdisc show dev "tbs$$-$k")
  [[ $qdisc == *"rate 8Mbit burst 16Kb"* ]] || fail "node $k's link has '$qdisc'"
  qdisc=$(ip netns exec "tbs$$-sw" tc qdisc show dev "tbs$$-s$k")
  [[ $qdisc == *"rate 8Mbit burst 16Kb"* ]] || fail "the switch's port to node $k has '$qdisc'"
  link=$(ip -n "tbs$$-n$k" link show dev "tbs$$-$k")
  [[ $link == *" mtu 9000 "* ]] || fail "node $k's link is '$link'"
  link=$(ip -n "tbs$$-sw" link show dev "tbs$$-s$k")
  [[ $link == *" mtu 9000 "* ]] || fail "the switch's port to node $k is '$link'"
done
ip netns exec "tbs$$-n3" python3 -c "
import socket
s = socket.socket(); s.bind(('10.213.0.4', 5003)); s.listen(1)
c = socket.create_connection(('10.213.0.4', 5003), timeout=2)" || fail "node 3 cannot reach itself"
ip netns exec "tbs$$-n3" python3 -c "
import socket, subprocess
s = socket.socket(); s.bind(('10.213.0.4', 5004)); s.listen(1)
subprocess.run(['ip', 'netns', 'exec', 'tbs$$-n0', 'python3', '-c',
                \"import socket; socket.create_connection(('10.213.0.4', 5004), timeout=3)\"], check=True)" ||
  fail "node 0 cannot reach node 3 through the switch"
"$testbed" up "tbs$$" --nodes 1 >/dev/null 2>&1 && fail "up accepted --nodes 1"
for bad in "--mtu 70000" "--mtu 1000" "--mtu 9000 --burst 4096" "--mtu jumbo"; do
  # shellcheck disable=SC2086
  err=$("$testbed" up "tbm$$" $bad 2>&1 >/dev/null) && fail "up accepted $bad"
  [[ $err == *"--mtu '"* && $err == *"must"* ]] || fail "up $bad said '$err'"
done
# Issue 75: numbers that bash's arithmetic reads as octal (02400 set an MTU of 1280) or wraps (2^64 + 1500 passed as
# 1500), values that ip or tc refuse only after namespaces were made, and empty values: exit 2 naming the option.
for bad in "--mtu 02400" "--mtu 18446744073709553116" "--burst 08192" "--burst 4294967296" "--rate 100000gbit" \
           "--rate 08mbit" "--mtu" "--rate ''" "--nodes 02"; do
  err=$(eval "\"\$testbed\" up tbm$$ $bad" 2>&1 >/dev/null)
  status=$?
  option=${bad%% *}
  [[ $status == 2 && $err == "testbed.sh: $option "* ]] || fail "up $bad: exit $status, '$err'"
done
ip netns list | grep -q "^tbm$$-" && fail "a refused up left $(ip netns list | grep "^tbm$$-")"
"$testbed" down "tbs$$" || fail "down tbs$$ failed"
ip netns list | grep -q "^tbs$$-" && fail "down left $(ip netns list | grep "^tbs$$-")"

[[ $failures == 0 ]] && echo "testbed: all checks passed" || exit 1
