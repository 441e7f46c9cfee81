"""Real models (real_models.py: Llama 3 and a DeepSeek-V3-style MoE, cut as torchtitan cuts them) under dualpipe:
DualPipeV against one process, the same with the sequence length changing between steps and with the shapes between
stages declared, dualpipe.pytorch.ScheduleDualPipeV against PyTorch's own ScheduleDualPipeV on the same
PipelineStages, and stages wrapped in FSDP2 at PP 2 x DP 2 (real_model_checks.py)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
CHECKS = os.path.join(os.path.dirname(__file__), "real_model_checks.py")


@pytest.mark.parametrize("case", ["llama3", "deepseek-v3", "shapes", "declared", "schedule", "fsdp"])
def test_real_model_matches_its_reference(case):
    done = subprocess.run([sys.executable, CHECKS, case], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{case}: every check passed" in done.stdout
    for rank in range(4 if case == "fsdp" else 2):
        assert f"rank {rank}: {case} " in done.stdout, done.stdout


def test_pairs_kept_whole_match_one_process_too():
    # As the reference runs a pair: both halves' inputs received before it, both outputs sent after it.
    done = subprocess.run([sys.executable, CHECKS, "llama3"], capture_output=True, text=True, timeout=400,
                          env={**os.environ, "DUALPIPE_SPLIT_PAIRS": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(2):
        assert f"rank {rank}: llama3 losses equal" in done.stdout and "pairs run whole" in done.stdout, done.stdout


class MockStage:
    """What dualpipe.pytorch.ScheduleDualPipeV reads of a PipelineStage before it builds anything."""

    def __init__(self, stage_index, num_stages, group_size, group_rank, group="pp"):
        self.stage_index, self.num_stages = stage_index, num_stages
        self.group_size, self.group_rank, self.group = group_size, group_rank, group
        self.submod = None


@pytest.mark.parametrize("stages, microbatches, message", [
    ([MockStage(0, 4, 2, 0)], 8, "takes 2 PipelineStages per rank"),
    ([MockStage(0, 4, 2, 0), MockStage(1, 4, 2, 0)], 8, "stages [0, 1] on group rank 0; DualPipeV places stages r "
                                                        "and 2R-1-r, here [0, 3], on rank r"),
    ([MockStage(0, 6, 2, 0), MockStage(3, 6, 2, 0)], 8, "num_stages=6 on a group of 2 ranks"),
    ([MockStage(0, 4, 2, 0), MockStage(3, 4, 2, 0, group="other")], 8, "belong to different process groups"),
    ([MockStage(0, 4, 2, 0), MockStage(3, 4, 2, 0)], 3, "got 3 microbatches and 4 stages"),
])
def test_schedule_dualpipev_refuses_stages_that_do_not_fit_the_v(stages, microbatches, message):
    from dualpipe.pytorch import ScheduleDualPipeV
    with pytest.raises(ValueError) as error:
        ScheduleDualPipeV(stages, microbatches, loss_fn=lambda o, t: o.sum())
    assert message in str(error.value)


def test_schedule_dualpipev_refuses_chunk_specs_it_cannot_honour():
    from dualpipe.pytorch import ScheduleDualPipeV
    with pytest.raises(ValueError, match="args_chunk_spec=.* is not supported"):
        ScheduleDualPipeV([MockStage(0, 4, 2, 0), MockStage(3, 4, 2, 0)], 8, args_chunk_spec=("x",))


def test_overlap_moe_is_bit_identical_to_no_overlap_and_interleaves():
    done = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "moe_overlap_checks.py")],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "moe overlap: every check passed" in done.stdout
    for rank in range(4):
        assert f"rank {rank}: overlap bit-identical to no overlap" in done.stdout, done.stdout


def test_overlap_moe_names_what_it_did_not_find():
    import torch.nn as nn
    import dualpipe
    import real_models
    dense = real_models.Transformer(real_models.Config(dim=16, n_layers=1, n_heads=2, n_kv_heads=2, vocab_size=8))
    with pytest.raises(ValueError, match="no submodule of Transformer has both a 'dispatch' and a 'combine' method"):
        dualpipe.overlap_moe(dense)
    moe = real_models.Transformer(real_models.Config(dim=16, n_layers=2, n_heads=2, n_kv_heads=2, vocab_size=8,
                                                     moe=True, n_experts=2, top_k=1, moe_hidden=8))
    with pytest.raises(ValueError, match="no submodule of Transformer has both a 'permute' and a 'combine'"):
        dualpipe.overlap_moe(moe, dispatch="permute")
    with pytest.raises(ValueError, match="dispatch='not a name' must be the name of a method"):
        dualpipe.overlap_moe(moe, dispatch="not a name")
    with pytest.raises(ValueError, match="takes stage modules"):
        dualpipe.overlap_moe(moe, "combine")

    class Phased(nn.Module):
        def overlapped_forward_backward(cls, *args):
            pass

        def dispatch(self):
            pass

        def combine(self):
            pass
    with pytest.raises(ValueError, match="Phased already defines overlapped_forward_backward"):
        dualpipe.overlap_moe(Phased())
