"""An independent reading of a PyTorch profiler trace, to check `dualpipe profile --kineto` against: plain Python,
every step spelled out, quadratic where that is simplest. Per record_function name: count, median duration (the
annotation's own, on the CPU), and the means of the GPU work it launched (compute, communication, and the
communication that ran while compute ran on another stream). A kernel belongs to the annotations open on the
thread that launched it (matched through the kernel's `correlation` and its launch's); a kernel launched from a
thread with no annotation open (autograd's backward thread) belongs to those open at that moment on the process's
other threads (the thread that called backward(): of those, the one whose innermost open annotation began
last). A region's compute and communication are summed over its kernels; its overlapped communication is, kernel
by kernel, the time the GPU also computed. The whole trace's are the time some compute (some communication) ran.
Communication: NCCL's, DeepEP's (::ep::) and collective names.

    python kineto_by_hand.py TRACE.json      prints JSON: {"regions": {name: {...}}, "compute": ..., ...} (us)"""
import json
import re
import statistics
import sys
from collections import defaultdict

COMM = re.compile(r"nccl|::ep::|deep_ep|all_?to_?all|all_?reduce|all_?gather|reduce_?scatter", re.I)


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(intervals):
    return sum(b - a for a, b in intervals)


def intersect(xs, ys):
    return [[max(a, c), min(b, d)] for a, b in xs for c, d in ys if max(a, c) < min(b, d)]


def main(path):
    events = json.load(open(path))["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    gpu = [e for e in complete if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    launches = {e["args"]["correlation"]: e for e in complete
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    annotations = [e for e in complete if e.get("cat") == "user_annotation"]

    def open_at(pid, tid, ts):
        return [a for a in annotations if a["pid"] == pid and a["tid"] == tid and a["ts"] <= ts <= a["ts"] + a["dur"]]

    owners = defaultdict(list)  # id(annotation) -> kernels
    for k in gpu:
        launch = launches.get(k.get("args", {}).get("correlation"))
        if launch is None:
            continue
        mine = open_at(launch["pid"], launch["tid"], launch["ts"])
        if not mine:
            # The thread waiting on it: the one whose innermost open annotation began last.
            anywhere = [a for a in annotations
                        if a["pid"] == launch["pid"] and a["ts"] <= launch["ts"] <= a["ts"] + a["dur"]]
            if anywhere:
                latest = max(anywhere, key=lambda a: a["ts"])
                mine = open_at(launch["pid"], latest["tid"], launch["ts"])
        for a in mine:
            owners[id(a)].append(k)

    def span(k):
        return [k["ts"], k["ts"] + k["dur"]]

    compute_all = union(span(k) for k in gpu if not COMM.search(k["name"]))
    comm_all = union(span(k) for k in gpu if COMM.search(k["name"]))
    per_name = defaultdict(lambda: defaultdict(list))
    for a in annotations:
        owned = owners[id(a)]
        comm = [k for k in owned if COMM.search(k["name"])]
        s = per_name[re.sub(r"#\d+$", "", a["name"])]
        s["duration"].append(a["dur"])
        s["compute"].append(sum(k["dur"] for k in owned if not COMM.search(k["name"])))
        s["communication"].append(sum(k["dur"] for k in comm))
        s["overlapped"].append(sum(length(intersect([span(k)], compute_all)) for k in comm))
    regions = {name: {"count": len(s["duration"]), "median_duration": statistics.median(s["duration"]),
                      **{key: statistics.mean(s[key]) for key in ("compute", "communication", "overlapped")}}
               for name, s in per_name.items()}
    print(json.dumps({"compute": length(compute_all), "communication": length(comm_all),
                      "overlapped": length(intersect(comm_all, compute_all)), "regions": regions}, indent=1))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
