#!/usr/bin/env python3
"""A model of NCCL's point-to-point rules run over the lowered schedules of `dualpipe schedule --lower`.

NCCL matches a pair's sends and receives by issue order and runs a communicator's operations on one stream, in
issue order; a send (or receive) waits there until its match runs on the peer. A rank's host waits only before a
compute action whose input has not arrived. Three ways of carrying the pipeline's messages are modelled:

  plain       one stream per pair of ranks, both directions on it, each operation issued where the lowered
              schedule has it, on its own.
  coalesced   one stream per pair of ranks, both directions on it. Where the two ranks issue their operations with
              each other in different orders, consecutive operations are grouped (as batch_isend_irecv groups them)
              until both sides' groups hold the same messages; a group is issued at its last send and must not hold
              a receive needed before that send is computed ("unpostable").
  channels    one stream per direction of each pair (comm/directional_communicator.h): sends issued when computed,
              receives issued ahead in the sender's order.

Each is run until every action is done ("ok") or nothing can move ("deadlock"). docs/runtime.md, "NCCL's second
rule, and the two channels", quotes the result.

    scripts/nccl_order_model.py [--dualpipe build/dualpipe]
"""
import argparse
import re
import subprocess

KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "chimera", "dualpipe", "dualpipev"]
TOKEN = re.compile(r"\((\d+)F(\d+);(\d+)B(\d+)\)|(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|F|B|I|W)(\d+)")


def lowered(dualpipe, kind, ranks, microbatches):
    """Per rank, its actions as tuples; None when the kind cannot serve the size."""
    run = subprocess.run([dualpipe, "schedule", "--kind", kind, "-r", str(ranks), "-m", str(microbatches), "--lower"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return None
    schedule = []
    for line in run.stdout.splitlines():
        if not line.startswith("rank"):
            continue
        actions = []
        for text in line.split(":", 1)[1].split():
            m = TOKEN.fullmatch(text)
            if m.group(1):
                actions.append(("pair", int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))))
            else:
                actions.append((m.group(6), int(m.group(5)), int(m.group(7))))
        schedule.append(actions)
    return schedule


def operations(schedule):
    """Per rank, its actions with each SEND/RECV as ("op", (S|R, message, peer)); a message is (F|B, producer
    stage, micro-batch)."""
    forward_at, backward_at = {}, {}
    for rank, actions in enumerate(schedule):
        for a in actions:
            if a[0] == "F":
                forward_at[a[1:3]] = rank
            elif a[0] in ("B", "I"):
                backward_at[a[1:3]] = rank
            elif a[0] == "pair":
                forward_at[(a[1], a[2])] = rank
                backward_at[(a[3], a[4])] = rank
    result = []
    for actions in schedule:
        items = []
        for a in actions:
            kind, stage, mb = a[0], a[1], a[-1] if a[0] != "pair" else None
            if kind == "SEND_F":
                items.append(("op", ("S", ("F", stage, mb), forward_at[(stage + 1, mb)])))
            elif kind == "RECV_F":
                items.append(("op", ("R", ("F", stage - 1, mb), forward_at[(stage - 1, mb)])))
            elif kind == "SEND_B":
                items.append(("op", ("S", ("B", stage, mb), backward_at[(stage - 1, mb)])))
            elif kind == "RECV_B":
                items.append(("op", ("R", ("B", stage + 1, mb), backward_at[(stage + 1, mb)])))
            else:
                items.append(("compute", a))
        result.append(items)
    return result


def pair_groups(ops, a, b):
    """The coalesced groups of pair (a, b): the shortest runs of each side's operations with the same messages."""
    side_a = [op[1] for kind, op in ops[a] if kind == "op" and op[2] == b]
    side_b = [op[1] for kind, op in ops[b] if kind == "op" and op[2] == a]
    groups, i, j, in_a, in_b = [], 0, 0, set(), set()
    while i < len(side_a) or j < len(side_b):
        if in_a and in_a == in_b:
            groups.append(frozenset(in_a))
            in_a, in_b = set(), set()
        elif in_a - in_b and j < len(side_b):
            in_b.add(side_b[j])
            j += 1
        elif i < len(side_a):
            in_a.add(side_a[i])
            i += 1
        else:
            in_b.add(side_b[j])
            j += 1
    if in_a:
        groups.append(frozenset(in_a))
    return groups


def issue_plan(ops, mode):
    """Per rank, ("issue", stream, [ops]) and ("compute", needed messages) items; None if a group is unpostable."""
    R = len(ops)
    plans = []
    for r in range(R):
        plan, needed = [], []
        if mode == "channels":
            # Every receive issued at the start, per sender in its sending order.
            for peer in range(R):
                sent = [op for kind, op in ops[peer] if kind == "op" and op[0] == "S" and op[2] == r]
                for op in sent:
                    plan.append(("issue", (peer, r), [("R", op[1], peer)]))
            for kind, x in ops[r]:
                if kind == "op" and x[0] == "S":
                    plan.append(("issue", (r, x[2]), [x]))
                elif kind == "op":
                    needed.append(x[1])
                else:
                    plan.append(("compute", needed))
                    needed = []
        elif mode == "plain":
            for kind, x in ops[r]:
                if kind == "op":
                    plan.append(("issue", frozenset((r, x[2])), [x]))
                    if x[0] == "R":
                        needed.append(x[1])
                else:
                    plan.append(("compute", needed))
                    needed = []
        else:
            group_of = {}
            for peer in range(R):
                if peer != r:
                    for g, messages in enumerate(pair_groups(ops, min(r, peer), max(r, peer))):
                        for m in messages:
                            group_of[(peer, m)] = g
            members = {}
            for i, (kind, x) in enumerate(ops[r]):
                if kind == "op":
                    members.setdefault((x[2], group_of[(x[2], x[1])]), []).append((i, x))
            issue_at = {}
            for key, group in members.items():
                sends = [i for i, x in group if x[0] == "S"]
                receives = [i for i, x in group if x[0] == "R"]
                if sends and receives and max(sends) > min(receives):
                    return None
                issue_at[max(sends) if sends else min(receives)] = key
            for i, (kind, x) in enumerate(ops[r]):
                if i in issue_at:
                    peer = issue_at[i][0]
                    plan.append(("issue", frozenset((r, peer)), [op for _, op in members[issue_at[i]]]))
                if kind == "op" and x[0] == "R":
                    needed.append(x[1])
                elif kind == "compute":
                    plan.append(("compute", needed))
                    needed = []
        plans.append(plan)
    return plans


def run(ops, mode):
    plans = issue_plan(ops, mode)
    if plans is None:
        return "unpostable"
    R = len(ops)
    host = [0] * R
    streams = {}  # (rank, stream) -> groups issued there, each [ops, matched indices]
    arrived = [set() for _ in range(R)]
    moved = True
    while moved:
        moved = False
        for r in range(R):
            while host[r] < len(plans[r]):
                item = plans[r][host[r]]
                if item[0] == "issue":
                    streams.setdefault((r, item[1]), []).append([item[2], set()])
                elif not all(m in arrived[r] for m in item[1]):
                    break
                host[r] += 1
                moved = True
        for (r, stream), queue in streams.items():
            if not queue:
                continue
            group, matched = queue[0]
            for i, (direction, message, peer) in enumerate(group):
                peer_queue = streams.get((peer, stream), [])
                if i in matched or not peer_queue:
                    continue
                peer_group, peer_matched = peer_queue[0]
                for j, other in enumerate(peer_group):
                    if j not in peer_matched and other[1] == message and other[0] != direction:
                        matched.add(i)
                        peer_matched.add(j)
                        arrived[r if direction == "R" else peer].add(message)
                        moved = True
                        break
        for queue in streams.values():
            while queue and len(queue[0][1]) == len(queue[0][0]):
                queue.pop(0)
                moved = True
    done = all(host[r] == len(plans[r]) for r in range(R)) and not any(streams.values())
    return "ok" if done else "deadlock"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dualpipe", default="build/dualpipe")
    args = parser.parse_args()
    sizes = [(R, M) for R in (2, 4, 8) for M in (R, 2 * R, 3 * R, 4 * R, 20)]
    print(f"{'kind':18} {'mode':10} outcome per (R, M) of {sizes}")
    for kind in KINDS:
        for mode in ("plain", "coalesced", "channels"):
            outcomes = {}
            for R, M in sizes:
                schedule = lowered(args.dualpipe, kind, R, M)
                if schedule is not None:
                    outcomes.setdefault(run(operations(schedule), mode), []).append(f"{R}x{M}")
            text = "; ".join(f"{k} {len(v)}" + ("" if k == "ok" else f" ({', '.join(v)})")
                             for k, v in sorted(outcomes.items()))
            print(f"{kind:18} {mode:10} {text}")


if __name__ == "__main__":
    main()
