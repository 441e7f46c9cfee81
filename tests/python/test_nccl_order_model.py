"""scripts/nccl_order_model.py, the model of NCCL's point-to-point rules behind the trainer's two channels
(docs/runtime.md, "NCCL's second rule, and the two channels").

The reference is worked by hand: 1F1B on 2 ranks with 2 micro-batches. Rank 0 runs F0 F1 B0 B1 and rank 1
F0 B0 F1 B1, so on one stream per pair rank 0 issues send F0, send F1, recv B0, recv B1 and rank 1 recv F0,
send B0, recv F1, send B1. After F0, both heads are sends (F1 and B0): each waits for a receive the other rank
issues only after it, a deadlock. Coalesced, {F1, B0} is one group on both sides, and on two channels each
direction carries one rank's sends. Every kind then completes on the channels, whatever its size.
"""
import importlib.util
import os

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "nccl_order_model.py")


@pytest.fixture(scope="module")
def model():
    spec = importlib.util.spec_from_file_location("nccl_order_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outcome(model, dualpipe, kind, ranks, microbatches, mode):
    return model.run(model.operations(model.lowered(dualpipe, kind, ranks, microbatches)), mode)


def test_one_f_one_b_on_two_ranks_as_worked_by_hand(model, dualpipe):
    ops = model.operations(model.lowered(dualpipe, "1f1b", 2, 2))
    pair = [[op for kind, op in ops[r] if kind == "op"] for r in range(2)]
    assert [(d, m) for d, m, _ in pair[0]] == [("S", ("F", 0, 0)), ("S", ("F", 0, 1)), ("R", ("B", 1, 0)),
                                               ("R", ("B", 1, 1))]
    assert [(d, m) for d, m, _ in pair[1]] == [("R", ("F", 0, 0)), ("S", ("B", 1, 0)), ("R", ("F", 0, 1)),
                                               ("S", ("B", 1, 1))]
    assert model.pair_groups(ops, 0, 1) == [frozenset({("F", 0, 0)}), frozenset({("F", 0, 1), ("B", 1, 0)}),
                                            frozenset({("B", 1, 1)})]
    assert model.run(ops, "plain") == "deadlock"
    assert model.run(ops, "coalesced") == "ok"
    assert model.run(ops, "channels") == "ok"


@pytest.mark.parametrize("kind", ["gpipe", "1f1b", "interleaved-1f1b", "combined-1f1b", "zb-h1", "zb-h2", "zbv",
                                  "chimera", "dualpipe", "dualpipev"])
def test_every_kind_completes_on_the_two_channels(model, dualpipe, kind):
    for ranks, microbatches in [(2, 4), (4, 8), (4, 20), (8, 16)]:
        if model.lowered(dualpipe, kind, ranks, microbatches) is None:
            continue  # a size the kind cannot serve (interleaved 1F1B at 4 x 20)
        assert outcome(model, dualpipe, kind, ranks, microbatches, "channels") == "ok", (kind, ranks, microbatches)


def test_grouping_alone_cannot_serve_dualpipe(model, dualpipe):
    assert outcome(model, dualpipe, "dualpipe", 4, 8, "plain") == "deadlock"
    assert outcome(model, dualpipe, "dualpipe", 4, 8, "coalesced") == "unpostable"
