#!/usr/bin/env bash
# An emulated network of machines for tests and benchmarks: network namespaces NAME-n0, NAME-n1, ..., each with
# loopback and an address of its own, and a token-bucket bandwidth limit on both ends of every link (netem is not
# available on Debian's minimal kernels here, so no added latency or loss). Two nodes are joined by one veth pair;
# more are each joined by their own veth pair to a bridge in a namespace NAME-sw (a switch), so every node has a
# link of the full rate to itself, as every GPU of a training cluster has its own NIC. Processes started with
# `ip netns exec NAME-nK ...` see only their node's interfaces, like machines on one switch.
#
#   scripts/testbed.sh check                      exit 0 if namespaces can be made here, else 77 and why
#   scripts/testbed.sh up NAME [--rate 1gbit] [--nodes 2] [--burst BYTES] [--mtu BYTES]
#                                                 make the test bed; prints "nodeK ns=NS addr=ADDR if=IF" lines
#   scripts/testbed.sh down NAME                  stop what runs inside it and remove it (no error if absent)
#   scripts/testbed.sh link NAME down|up          take node 0's link down (a cable pulled) or up again
#   scripts/testbed.sh run NAME [--rate R] [--nodes N] [--burst BYTES] [--mtu BYTES] -- COMMAND...
#       up, run COMMAND on the host with TESTBED_NODES (N), TESTBED_NODEk, TESTBED_ADDRk and TESTBED_IFk (k < N)
#       exported, then down, also when COMMAND fails or this script is interrupted; exits with COMMAND's status.
#
# Addresses: 10.213.0.(k+1)/24 for node k. Every test bed has its own namespaces, so test beds of different names
# coexist with the same addresses. --burst: the token bucket's size in bytes (default: one 250 Hz timer tick of the
# rate, at least 64 KiB). A smaller one (16384) makes a message of a few hundred KB take its time at the rate
# within 1%, instead of passing its first 64 KiB at once after an idle moment (docs/testbed.md). --mtu: the links'
# packet size (default the kernel's 1500); jumbo frames (9000) cut the CPU the kernel spends per packet, which a
# real NIC would spend instead of the host (docs/testbed.md). See docs/testbed.md.
set -euo pipefail

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "testbed.sh: $*" >&2; exit 2; }

# Namespaces are made and removed one test bed at a time, across all copies of this script: `ip netns add` (re)mounts
# /run/netns, and done while another test bed is being made it can hide that bed's namespace files for a moment,
# so that its `ip link add ... netns` fails ("Peer netns reference is invalid"). Held by up, down and check only.
lock_file=/run/dualpipe-testbed.lock
locked() { # COMMAND...: runs COMMAND (in a subshell) holding the lock
  (
    exec 9>>"$lock_file" || die "cannot open the lock file $lock_file"
    flock -w 120 9 || die "no lock on $lock_file after 120 s (another testbed.sh holds it)"
    "$@"
  )
}

# Whether namespace $1 exists. Not `ip netns list | grep -q`: under pipefail, ip killed by SIGPIPE when grep has
# already matched would read as "absent". Its stderr is dropped: it still lists every name, but says "Peer netns
# reference is invalid." for a namespace that another process is making at that moment (no lock taken by `run`).
ns_exists() {
  local all
  all=$(ip netns list 2>/dev/null) || die "ip netns list failed"
  grep -qE "^$1( |$)" <<<"$all"
}

check() {
  [[ $(id -u) -eq 0 ]] || { echo "testbed.sh: network namespaces need root (running as uid $(id -u))"; return 77; }
  command -v ip >/dev/null || { echo "testbed.sh: 'ip' not found (apt-get install iproute2)"; return 77; }
  command -v tc >/dev/null || { echo "testbed.sh: 'tc' not found (apt-get install iproute2)"; return 77; }
  command -v flock >/dev/null || { echo "testbed.sh: 'flock' not found (apt-get install util-linux)"; return 77; }
  locked probe
}

probe() { # makes a namespace with a veth pair and a tbf qdisc, and removes it; 77 and why when it cannot
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
# Numbers are written in decimal without leading zeros (bash's arithmetic reads 010 as octal) and with few enough
# digits that the arithmetic cannot wrap.
bits_per_second() { # RATE like 1gbit, 100mbit, 8kbit
  [[ $1 =~ ^([1-9][0-9]{0,11})([kmg]?)bit$ ]] || return 1
  local n=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in k) n=$(( n * 1000 )) ;; m) n=$(( n * 1000000 )) ;; g) n=$(( n * 1000000000 )) ;; esac
  echo "$n"
}

# One step of `up`: runs COMMAND, and when it fails says which step it was, with the command's own error.
# Every step is checked this way because `set -e` does not hold everywhere `up` runs (not inside `$(...)`, nor in
# anything called from a condition), and an unchecked step let `up` print its node lines after a failure.
step() { # WHAT COMMAND...
  local what=$1 err; shift
  err=$("$@" 2>&1) && return 0
  echo "testbed.sh: up: $what failed: ${err:-exit status $?}" >&2
  return 1
}

up() {
  local name=$1; shift
  valid_name "$name"
  local rate=1gbit nodes=2 burst= mtu=
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rate|--nodes|--burst|--mtu) [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value" ;;&
      --rate) rate=$2; shift 2 ;;
      --nodes) nodes=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      --mtu) mtu=$2; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  local bits
  bits=$(bits_per_second "$rate") && (( bits >= 8000 && bits <= 1000000000000 )) ||
    die "--rate '$rate' must be from 8kbit to 1000gbit, written like 1gbit, 100mbit or 8mbit"
  [[ $nodes =~ ^[1-9][0-9]?$ ]] && (( nodes >= 2 && nodes <= 64 )) || die "--nodes '$nodes' must be between 2 and 64"
  if [[ -z $burst ]]; then
    burst=$(( bits / 8 / 250 ))
    (( burst < 65536 )) && burst=65536
  fi
  [[ $burst =~ ^[1-9][0-9]{0,9}$ ]] && (( burst >= 2048 && burst <= 4294967295 )) ||
    die "--burst '$burst' must be a number of bytes from 2048 (a packet must fit in the bucket) to 4294967295 (tbf's)"
  if [[ -n $mtu ]]; then
    [[ $mtu =~ ^[1-9][0-9]{0,4}$ ]] && (( mtu >= 1280 && mtu <= 65535 )) ||
      die "--mtu '$mtu' must be a number of bytes between 1280 and 65535"
    (( mtu <= burst )) || die "--mtu '$mtu' must be at most the bucket (--burst $burst): a packet must fit in it"
  fi
  local tbf=(tbf rate "$rate" burst "$burst" latency 50ms)
  local up=(up)  # both ends of every cable, with the packet size asked for
  [[ -z $mtu ]] || up=(mtu "$mtu" up)
  local k
  for (( k = 0; k < nodes; ++k )); do
    ns_exists "$name-n$k" && die "test bed '$name' exists already (scripts/testbed.sh down $name)"
  done
  ns_exists "$name-sw" && die "test bed '$name' exists already (scripts/testbed.sh down $name)"
  # From here on, any failure (a step, or a signal) removes what was made and prints no node lines. Checked under
  # the lock, so the namespaces of this name are ours to remove.
  trap "down '$name' >/dev/null 2>&1" EXIT
  for (( k = 0; k < nodes; ++k )); do
    step "making namespace $name-n$k" ip netns add "$name-n$k" &&
      step "loopback up in $name-n$k" ip -n "$name-n$k" link set lo up || exit 1
  done
  if (( nodes == 2 )); then  # a cable between the two
    step "making the veth pair $name-0-$name-1" ip -n "$name-n0" link add "$name-0" type veth peer name "$name-1" \
      netns "$name-n1" || exit 1
  else  # a cable from each node to the switch's bridge, limited at the switch's end too (the node's download)
    step "making namespace $name-sw" ip netns add "$name-sw" &&
      step "the switch's bridge" ip -n "$name-sw" link add sw type bridge &&
      step "the switch up" ip -n "$name-sw" link set sw up || exit 1
    for (( k = 0; k < nodes; ++k )); do
      step "making the veth pair $name-$k-$name-s$k" ip -n "$name-n$k" link add "$name-$k" type veth \
        peer name "$name-s$k" netns "$name-sw" &&
        step "port $name-s$k on the switch" ip -n "$name-sw" link set "$name-s$k" master sw &&
        step "port $name-s$k up" ip -n "$name-sw" link set "$name-s$k" "${up[@]}" &&
        step "rate limit on $name-s$k" ip netns exec "$name-sw" tc qdisc add dev "$name-s$k" root "${tbf[@]}" ||
        exit 1
    done
  fi
  for (( k = 0; k < nodes; ++k )); do
    step "address 10.213.0.$(( k + 1 )) on $name-$k" ip -n "$name-n$k" addr add "10.213.0.$(( k + 1 ))/24" dev "$name-$k" &&
      step "link $name-$k up" ip -n "$name-n$k" link set "$name-$k" "${up[@]}" &&
      step "rate limit on $name-$k" ip netns exec "$name-n$k" tc qdisc add dev "$name-$k" root "${tbf[@]}" || exit 1
  done
  for (( k = 0; k < nodes; ++k )); do
    printf 'node%d ns=%s addr=10.213.0.%d if=%s\n' "$k" "$name-n$k" "$(( k + 1 ))" "$name-$k"
  done
  trap - EXIT
}

down() {
  local name=$1 status=0
  valid_name "$name"
  local all
  all=$(ip netns list 2>/dev/null | awk '{print $1}') || die "ip netns list failed"
  for ns in $(grep -E "^$name-(n[0-9]+|sw)$" <<<"$all" | sort -V); do
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
    ip netns del "$ns" || status=1  # and still the other one
  done
  return $status
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
  if ns_exists "$name-n0" || ns_exists "$name-sw"; then die "test bed '$name' exists already"; fi
  # From here on the test bed is ours to remove, also when a signal comes while it is being made (the trap runs
  # once `up` returns). Expanded now: the trap may run after this function's locals are gone.
  trap "locked down '$name'" EXIT
  for signal in INT:130 TERM:143 HUP:129; do trap "exit ${signal#*:}" "${signal%:*}"; done
  local lines
  # A failed `up` removed what it made; a test bed of this name made meanwhile by someone else is not ours.
  lines=$(locked up "$name" "${up_args[@]}") || { trap - EXIT; exit 1; }
  local k word
  export TESTBED_NODES
  TESTBED_NODES=$(grep -c '^node' <<<"$lines")
  for (( k = 0; k < TESTBED_NODES; ++k )); do  # by name: "nodeK ns=NS addr=ADDR if=IF"
    for word in $(grep "^node$k " <<<"$lines"); do
      case $word in
        ns=*) export "TESTBED_NODE$k=${word#ns=}" ;;
        addr=*) export "TESTBED_ADDR$k=${word#addr=}" ;;
        if=*) export "TESTBED_IF$k=${word#if=}" ;;
      esac
    done
  done
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
  up) [[ $# -ge 2 ]] || die "up needs a NAME"; shift; locked up "$@" ;;
  down) [[ $# -eq 2 ]] || die "down needs a NAME"; locked down "$2" ;;
  link) [[ $# -eq 3 ]] || die "link needs a NAME and up or down"; link "$2" "$3" ;;
  run) [[ $# -ge 2 ]] || die "run needs a NAME"; shift; run "$@" ;;
  -h|--help|help) usage ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown command '$1' (check, up, down, link, run; --help)" ;;
esac
