"""Real models (real_models.py: Llama 3 and a DeepSeek-V3-style MoE, cut as torchtitan cuts them) under dualpipe:
DualPipeV against one process, the same with the sequence length changing between steps, and
dualpipe.pytorch.ScheduleDualPipeV against PyTorch's own ScheduleDualPipeV on the same PipelineStages, and stages
wrapped in FSDP2 at PP 2 x DP 2 (real_model_checks.py)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
CHECKS = os.path.join(os.path.dirname(__file__), "real_model_checks.py")


@pytest.mark.parametrize("case", ["llama3", "deepseek-v3", "shapes", "schedule", "fsdp"])
def test_real_model_matches_its_reference(case):
    done = subprocess.run([sys.executable, CHECKS, case], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{case}: every check passed" in done.stdout
    for rank in range(4 if case == "fsdp" else 2):
        assert f"rank {rank}: {case} " in done.stdout, done.stdout


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
