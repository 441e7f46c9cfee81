"""A torch.profiler-like trace of N events for timing `dualpipe profile --kineto` (bench/bench_input_sizes.sh): four
processes; per ten events, a "forward" region over the next nine, CPU operators on thread 1 and a gloo all-reduce on
thread 2; and a "ProfilerStep" region per process over the whole trace, which holds every operator.
    python3 bench/make_kineto_trace.py N OUT.json"""
import sys, random
n = int(sys.argv[1]); out = sys.argv[2]
random.seed(0)
with open(out, "w") as f:
    f.write('{"schemaVersion": 1, "traceEvents": [\n')
    t = 0.0
    first = True
    for i in range(n):
        kind = i % 10
        if kind == 0:   # a region spanning the next 9 events, plus one step region per 1000 covering all
            e = '{"ph": "X", "cat": "user_annotation", "name": "forward#%d", "pid": %d, "tid": 1, "ts": %.3f, "dur": %.3f}' % (i, i % 4, t, 90.0)
        elif kind == 5:
            e = '{"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": %d, "tid": 2, "ts": %.3f, "dur": %.3f}' % (i % 4, t, 12.0)
        else:
            e = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": %d, "tid": 1, "ts": %.3f, "dur": %.3f, "args": {"External id": %d}}' % (i % 4, t, 9.0, i)
        f.write(("" if first else ",\n") + e); first = False
        t += 10.0
    # one region over the whole trace per process: every interval inside it
    for p in range(4):
        f.write(',\n{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": %d, "tid": 1, "ts": 0, "dur": %.3f}' % (p, t))
    f.write('\n]}\n')
