#!/usr/bin/env bash
# An emulated two-machine network for tests and benchmarks: two network namespaces, NAME-n0 and NAME-n1, joined
# by a veth pair, each with loopback and an address of its own, and a token-bucket bandwidth limit on both ends of
# the link (netem is not available on Debian's minimal kernels here, so no added latency or loss). Processes
# started with `ip netns exec NAME-nK ...` see only their node's interfaces, like two machines on one switch.
#
#   scripts/testbed.sh check                      exit 0 if namespaces can be made here, else 77 and why
#   scripts/testbed.sh up NAME [--rate 1gbit]     make the test bed; prints "nodeK NAMESPACE ADDRESS INTERFACE"
#   scripts/testbed.sh down NAME                  stop what runs inside it and remove it (no error if absent)
#   scripts/testbed.sh link NAME down|up          take the link down (a cable pulled) or up again
#   scripts/testbed.sh run NAME [--rate R] -- COMMAND...
#       up, run COMMAND on the host with TESTBED_NODE0/1, TESTBED_ADDR0/1 and TESTBED_IF0/1 exported, then down,
#       also when COMMAND fails or this script is interrupted; exits with COMMAND's status.
#
# Addresses: 10.213.0.1 (node 0) and 10.213.0.2 (node 1)/24. Every test bed has its own pair of namespaces, so
# test beds of different names coexist with the same addresses. See docs/testbed.md.
set -euo pipefail

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "testbed.sh: $*" >&2; exit 2; }

check() {
  [[ $(id -u) -eq 0 ]] || { echo "testbed.sh: network namespaces need root (running as uid $(id -u))"; return 77; }
  command -v ip >/dev/null || { echo "testbed.sh: 'ip' not found (apt-get install iproute2)"; return 77; }
  command -v tc >/dev/null || { echo "testbed.sh: 'tc' not found (apt-get install iproute2)"; return 77; }
  local probe="dptb-probe-$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "testbed.sh: cannot create a network namespace here (ip netns add failed: no CAP_SYS_ADMIN or no netns support)"
    return 77
  fi
  local ok=0
  if ! ip -n "$probe" link add probe0 type veth peer name probe1 2>/dev/null; then
    echo "testbed.sh: cannot create a veth pair inside a namespace (no veth support)"; ok=77
  elif ! ip netns exec "$probe" tc qdisc add dev probe0 root tbf rate 1gbit burst 128kb latency 50ms 2>/dev/null; then
    echo "testbed.sh: cannot add a tbf qdisc (no sch_tbf support)"; ok=77
  fi
  ip netns del "$probe" 2>/dev/null || true
  return $ok
}

valid_name() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,9}$ ]] ||
    die "NAME '$1' must be 1 to 10 letters, digits, '_' or '-' (it names interfaces, which allow 15 characters)"
}

# A burst of at least rate/HZ bytes (one timer tick's worth; 250 Hz kernels) and at least 64 KiB, or tbf cannot
# reach its rate; latency bounds the queue (and so the extra delay under load) to 50 ms.
bits_per_second() { # RATE like 1gbit, 100mbit, 8kbit
  [[ $1 =~ ^([0-9]+)([kmg]?)bit$ ]] || return 1
  local n=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in k) n=$(( n * 1000 )) ;; m) n=$(( n * 1000000 )) ;; g) n=$(( n * 1000000000 )) ;; esac
  echo "$n"
}

tbf() { # NAMESPACE DEVICE RATE
  local bits burst
  bits=$(bits_per_second "$3") && (( bits >= 8000 )) ||
    die "--rate '$3' must be at least 8kbit, written like 1gbit, 100mbit or 8mbit"
  burst=$(( bits / 8 / 250 ))
  (( burst < 65536 )) && burst=65536
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst "$burst" latency 50ms
}

up() {
  local name=$1; shift
  valid_name "$name"
  local rate=1gbit
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  bits_per_second "$rate" >/dev/null || die "--rate '$rate' is not a rate like 1gbit, 100mbit or 8mbit"
  local n0="$name-n0" n1="$name-n1"
  ip netns list | grep -qE "^($n0|$n1)( |$)" && die "test bed '$name' exists already (scripts/testbed.sh down $name)"
  # From here on, a failure removes what was made.
  trap "down '$name' >/dev/null 2>&1" EXIT
  ip netns add "$n0"
  ip netns add "$n1"
  ip -n "$n0" link add "$name-0" type veth peer name "$name-1" netns "$n1"
  ip -n "$n0" link set lo up
  ip -n "$n1" link set lo up
  ip -n "$n0" addr add "10.213.0.1/24" dev "$name-0"
  ip -n "$n1" addr add "10.213.0.2/24" dev "$name-1"
  ip -n "$n0" link set "$name-0" up
  ip -n "$n1" link set "$name-1" up
  tbf "$n0" "$name-0" "$rate"
  tbf "$n1" "$name-1" "$rate"
  trap - EXIT
  echo "node0 $n0 10.213.0.1 $name-0"
  echo "node1 $n1 10.213.0.2 $name-1"
}

down() {
  local name=$1
  valid_name "$name"
  for ns in "$name-n0" "$name-n1"; do
    ip netns list | grep -qE "^$ns( |$)" || continue
    # Only what runs inside this test bed: first asked to stop, then killed.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n $pids ]]; then
      kill -TERM $pids 2>/dev/null || true
      for _ in $(seq 20); do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [[ -z $pids ]] && break
        sleep 0.1
      done
      [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns"
  done
}

link() {
  local name=$1 state=${2:-}
  valid_name "$name"
  [[ $state == up || $state == down ]] || die "link: say 'up' or 'down', got '$state'"
  ip -n "$name-n0" link set "$name-0" "$state"
}

run() {
  local name=$1; shift
  local up_args=()
  while [[ $# -gt 0 && $1 != -- ]]; do up_args+=("$1"); shift; done
  [[ $# -gt 1 ]] || die "run: give the command after --: scripts/testbed.sh run NAME -- COMMAND..."
  shift
  valid_name "$name"
  ip netns list | grep -qE "^($name-n0|$name-n1)( |$)" && die "test bed '$name' exists already"
  # From here on the test bed is ours to remove, also when a signal comes while it is being made (the trap runs
  # once `up` returns). Expanded now: the trap may run after this function's locals are gone.
  trap "down '$name'" EXIT
  for signal in INT:130 TERM:143 HUP:129; do trap "exit ${signal#*:}" "${signal%:*}"; done
  local lines
  lines=$(up "$name" "${up_args[@]}")
  read -r _ TESTBED_NODE0 TESTBED_ADDR0 TESTBED_IF0 <<<"$(sed -n 1p <<<"$lines")"
  read -r _ TESTBED_NODE1 TESTBED_ADDR1 TESTBED_IF1 <<<"$(sed -n 2p <<<"$lines")"
  export TESTBED_NODE0 TESTBED_ADDR0 TESTBED_IF0 TESTBED_NODE1 TESTBED_ADDR1 TESTBED_IF1
  # In the background, so that a signal to this script is handled at once (bash runs traps only between
  # foreground commands): the command is stopped, then the EXIT trap removes the test bed.
  "$@" &
  command_pid=$!
  for signal in INT:130 TERM:143 HUP:129; do
    trap "kill -${signal%:*} $command_pid 2>/dev/null; wait $command_pid; exit ${signal#*:}" "${signal%:*}"
  done
  local status=0
  wait "$command_pid" || status=$?
  exit $status
}

case ${1:-} in
  check) check ;;
  up) [[ $# -ge 2 ]] || die "up needs a NAME"; shift; up "$@" ;;
  down) [[ $# -eq 2 ]] || die "down needs a NAME"; down "$2" ;;
  link) [[ $# -eq 3 ]] || die "link needs a NAME and up or down"; link "$2" "$3" ;;
  run) [[ $# -ge 2 ]] || die "run needs a NAME"; shift; run "$@" ;;
  -h|--help|help) usage ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown command '$1' (check, up, down, link, run; --help)" ;;
esac
