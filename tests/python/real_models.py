"""Models as their authors write them, outside dualpipe, for the tests and benchmarks of real pipelines: Llama 3 and a
DeepSeek-V3-style mixture of experts in torchtitan's architecture (tok_embeddings, a ModuleDict of layers keyed by
their index, norm, output; RMSNorm, rotary positions, grouped-query attention, SwiGLU; DeepSeek-V3's sigmoid router
with a load-balancing bias, routed experts beside shared ones), written here from the published architectures.

Cut into stages the way torchtitan's `pipeline_module_split` cuts them: every stage is a copy of the whole model that
keeps only its own layers, the first one the embedding, the last one the final norm and the output projection; the
parts it does not keep are None, and the forward skips them.

    model = Llama3(LLAMA3_SMALL)
    stages = split(model, 4)            # [Llama3, ...], stage s with its layers

The MoE block's forward runs in the four named parts that torchtitan and DeepSeek-V3 give it (`router`, the token
dispatch `dispatch`, `experts`, the combine `combine`), with an all-to-all over `ep_group` at dispatch and combine
when there is one (experts split among its ranks)."""
import copy
import math
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    dim: int = 256
    n_layers: int = 8
    n_heads: int = 8
    n_kv_heads: int = 4
    vocab_size: int = 512
    multiple_of: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    max_seq_len: int = 128
    # MoE (DeepSeek-V3): layers from n_dense_layers on are MoE blocks
    moe: bool = False
    n_dense_layers: int = 1
    n_experts: int = 8
    top_k: int = 2
    n_shared_experts: int = 1
    moe_hidden: int = 128
    route_scale: float = 1.0


LLAMA3_SMALL = Config()
DEEPSEEK_V3_SMALL = Config(dim=256, n_layers=8, n_heads=8, n_kv_heads=8, moe=True, n_dense_layers=1, n_experts=8,
                           top_k=2, n_shared_experts=1, moe_hidden=128, route_scale=2.5)


def rotary_tables(head_dim: int, seq_len: int, theta: float):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), freqs)
    return torch.cat([angles.cos(), angles.sin()], dim=-1)  # [seq, head_dim]: cos | sin


def apply_rotary(x: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """x: [batch, seq, heads, head_dim], rotated pairwise (even, odd) by the position's angles."""
    half = x.shape[-1] // 2
    cos, sin = tables[: x.shape[1], :half], tables[: x.shape[1], half:]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


class Attention(nn.Module):
    """Grouped-query causal self-attention with rotary positions (Llama 3)."""

    def __init__(self, c: Config):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, c.dim // c.n_heads
        self.wq = nn.Linear(c.dim, c.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(c.dim, c.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(c.dim, c.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * self.head_dim, c.dim, bias=False)

    def forward(self, x, rope):
        b, s, _ = x.shape
        q = apply_rotary(self.wq(x).view(b, s, self.n_heads, self.head_dim), rope)
        k = apply_rotary(self.wk(x).view(b, s, self.n_kv_heads, self.head_dim), rope)
        v = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim)
        repeat = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(repeat, dim=2), v.repeat_interleave(repeat, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False), \
            nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def llama_hidden(c: Config) -> int:
    hidden = int(2 * 4 * c.dim / 3)
    return c.multiple_of * ((hidden + c.multiple_of - 1) // c.multiple_of)


class Router(nn.Module):
    """DeepSeek-V3's gate: sigmoid scores, top-k chosen with a load-balancing bias that does not weigh the output,
    the chosen scores normalised and scaled."""

    def __init__(self, c: Config):
        super().__init__()
        self.gate = nn.Linear(c.dim, c.n_experts, bias=False)
        self.register_buffer("expert_bias", torch.zeros(c.n_experts), persistent=True)
        self.top_k, self.route_scale = c.top_k, c.route_scale

    def forward(self, x):  # x: [tokens, dim]
        scores = torch.sigmoid(self.gate(x).float())
        chosen = torch.topk(scores + self.expert_bias, self.top_k, dim=-1).indices
        weights = scores.gather(-1, chosen)
        weights = weights / weights.sum(-1, keepdim=True) * self.route_scale
        return weights.type_as(x), chosen


class GroupedExperts(nn.Module):
    """The routed experts' SwiGLU weights, one slice per expert: tokens arrive sorted by expert, counted per expert."""

    def __init__(self, dim: int, hidden: int, n_experts: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n_experts, hidden, dim) / math.sqrt(dim))
        self.w3 = nn.Parameter(torch.randn(n_experts, hidden, dim) / math.sqrt(dim))
        self.w2 = nn.Parameter(torch.randn(n_experts, dim, hidden) / math.sqrt(hidden))

    def forward(self, tokens, counts):
        outs = []
        for e, part in enumerate(tokens.split(counts)):
            outs.append(F.linear(F.silu(F.linear(part, self.w1[e])) * F.linear(part, self.w3[e]), self.w2[e]))
        return torch.cat(outs)


class MoE(nn.Module):
    """Router, token dispatch, experts, combine, and shared experts beside them. With an expert-parallel group
    (shard_experts) each of its ranks holds n_experts / size experts, and the dispatch and combine are
    all-to-alls."""

    def __init__(self, c: Config):
        super().__init__()
        self.n_experts, self.top_k = c.n_experts, c.top_k
        self.router = Router(c)
        self.experts = GroupedExperts(c.dim, c.moe_hidden, c.n_experts)
        self.shared_experts = FeedForward(c.dim, c.moe_hidden * c.n_shared_experts)
        self.ep_group: Optional[dist.ProcessGroup] = None

    def shard_experts(self, group: dist.ProcessGroup) -> None:
        """Keeps this rank's n_experts / size experts of `group`; tokens travel to their expert's rank."""
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        if self.n_experts % size:
            raise ValueError(f"{self.n_experts} experts do not split evenly over {size} ranks")
        local = self.n_experts // size
        for name in ("w1", "w2", "w3"):
            whole = getattr(self.experts, name)
            setattr(self.experts, name, nn.Parameter(whole.detach()[rank * local:(rank + 1) * local].clone()))
        self.ep_group = group

    def dispatch(self, x, weights, chosen):
        """Sorts the tokens' copies by expert; with an ep_group, sends each rank the copies for its experts.
        Returns (the copies to compute, the per-expert counts here, what combine needs)."""
        order = chosen.flatten().argsort(stable=True)
        copies = x[order // self.top_k]
        counts = torch.bincount(chosen.flatten(), minlength=self.n_experts)
        if self.ep_group is None:
            return copies, counts.tolist(), (order, weights, None)
        size = dist.get_world_size(self.ep_group)
        local = self.n_experts // size
        received_counts = torch.empty_like(counts)
        dist.all_to_all_single(received_counts, counts, group=self.ep_group)
        send = counts.view(size, local).sum(1).tolist()
        recv = received_counts.view(size, local).sum(1).tolist()
        copies = _AllToAll.apply(copies, recv, send, self.ep_group)
        # what arrives is grouped by source rank, then by expert: regroup by expert
        by_source = received_counts.view(size, local)
        pieces = copies.split(by_source.flatten().tolist())
        regroup = [pieces[s * local + e] for e in range(local) for s in range(size)]
        return torch.cat(regroup), by_source.sum(0).tolist(), (order, weights, (by_source, send, recv))

    def combine(self, x, computed, state):
        order, weights, ep = state
        if ep is not None:
            by_source, send, recv = ep
            size, local = by_source.shape
            pieces = computed.split(by_source.t().flatten().tolist())  # expert-major, as computed
            back = [pieces[e * size + s] for s in range(size) for e in range(local)]
            computed = _AllToAll.apply(torch.cat(back), send, recv, self.ep_group)
        unsorted = torch.empty_like(computed).index_copy(0, order, computed)
        weighted = unsorted.view(-1, self.top_k, x.shape[-1]) * weights.unsqueeze(-1)
        return weighted.sum(1)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        weights, chosen = self.router(x)
        copies, counts, state = self.dispatch(x, weights, chosen)
        computed = self.experts(copies, counts)
        return (self.combine(x, computed, state) + self.shared_experts(x)).view(shape)


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with uneven splits whose backward sends the gradients back the same way."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.splits, ctx.group = (in_splits, out_splits), group
        out = x.new_empty(sum(out_splits), *x.shape[1:])
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        back_out, back_in = ctx.splits
        out = grad.new_empty(sum(back_out), *grad.shape[1:])
        dist.all_to_all_single(out, grad.contiguous(), back_out, back_in, group=ctx.group)
        return out, None, None, None


class Block(nn.Module):
    def __init__(self, c: Config, layer: int):
        super().__init__()
        self.attention_norm, self.ffn_norm = nn.RMSNorm(c.dim, eps=c.norm_eps), nn.RMSNorm(c.dim, eps=c.norm_eps)
        self.attention = Attention(c)
        self.moe_enabled = c.moe and layer >= c.n_dense_layers
        if self.moe_enabled:
            self.moe = MoE(c)
        else:
            self.feed_forward = FeedForward(c.dim, llama_hidden(c) if not c.moe else 4 * c.moe_hidden)

    def forward(self, x, rope):
        h = x + self.attention(self.attention_norm(x), rope)
        ffn = self.moe if self.moe_enabled else self.feed_forward
        return h + ffn(self.ffn_norm(h))


class Transformer(nn.Module):
    """tok_embeddings, layers (ModuleDict by index), norm, output; a stage of it keeps some and has None for the
    rest (torchtitan's pipeline split)."""

    def __init__(self, c: Config):
        super().__init__()
        self.config = c
        self.tok_embeddings = nn.Embedding(c.vocab_size, c.dim)
        self.register_buffer("rope", rotary_tables(c.dim // c.n_heads, c.max_seq_len, c.rope_theta), persistent=False)
        self.layers = nn.ModuleDict({str(i): Block(c, i) for i in range(c.n_layers)})
        self.norm = nn.RMSNorm(c.dim, eps=c.norm_eps)
        self.output = nn.Linear(c.dim, c.vocab_size, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        for layer in self.layers.values():
            h = layer(h, self.rope)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def Llama3(c: Config = LLAMA3_SMALL) -> Transformer:
    return Transformer(c)


def DeepSeekV3(c: Config = DEEPSEEK_V3_SMALL) -> Transformer:
    return Transformer(c)


def shard_experts(stage: Transformer, group: dist.ProcessGroup) -> None:
    for layer in stage.layers.values():
        if layer.moe_enabled:
            layer.moe.shard_experts(group)


def split(model: Transformer, n_stages: int):
    """torchtitan's pipeline_module_split: stage s is a deep copy keeping layers [s*L/S, (s+1)*L/S), the embedding
    on stage 0 and norm and output on the last."""
    n = len(model.layers)
    if n % n_stages:
        raise ValueError(f"{n} layers do not split evenly into {n_stages} stages")
    per = n // n_stages
    stages = []
    for s in range(n_stages):
        stage = copy.deepcopy(model)
        keep = {str(i) for i in range(s * per, (s + 1) * per)}
        for name in list(stage.layers.keys()):
            if name not in keep:
                del stage.layers[name]
        if s > 0:
            stage.tok_embeddings = None
        if s < n_stages - 1:
            stage.norm = None
            stage.output = None
        stages.append(stage)
    return stages


def cross_entropy(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def tokens(c: Config, sequences: int, seq_len: int, seed: int = 1):
    """Random token ids, the same on every rank (drawn on the CPU), on the default device."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(0, c.vocab_size, (sequences, seq_len + 1), generator=generator, device="cpu")
    device = torch.get_default_device()
    return x[:, :-1].contiguous().to(device), x[:, 1:].contiguous().to(device)
