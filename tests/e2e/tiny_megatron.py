#!/usr/bin/env python
"""A tiny, real data-parallel GPT pre-training script whose console output looks like Megatron-LM's.

It is launched by ``torchrun`` (see ``make_samples.py``, which copies it as ``pretrain_gpt.py``), runs
on CPU with the gloo backend, and trains a two-layer transformer on synthetic tokens for real:
forward, backward, one ``dist.all_reduce`` of the flattened gradients per iteration, Adam step.
What it prints follows Megatron-LM's formats (core_v0.6..0.15 era: ``[YYYY-MM-DD HH:MM:SS]`` stamps
without micro-seconds): the ``using world size`` line, the ``arguments`` dump, ``print_datetime``
markers, the per-iteration line from the LAST rank and the memory report from DP-rank-0 ranks.

``--fail KIND`` plants one failure on ``--fail-rank`` at ``--fail-iter``:

  shape         a real ``torch.matmul`` with mismatched shapes in the attention forward
  import        a real ``import transformer_engine`` inside a function (ModuleNotFoundError)
  divisibility  on ALL ranks after init_process_group: Megatron-core's RuntimeError from
                ``initialize_model_parallel`` (run with e.g. --tp 3 on 4 ranks)
  oom           INJECTED torch.OutOfMemoryError with a CUDA-style message (no GPU here)
  sigkill       the rank sends itself SIGKILL
  hang          the rank sleeps for 10 minutes; the others hit the gloo process-group timeout
  nan           a real NaN loss; the last rank logs the iteration with the NaN counter, then the
                failing rank raises Megatron's "Unexpected result" RuntimeError

The harness options (--fail*, --record, --iter-sleep) are left out of the arguments dump.
"""
import argparse
import datetime
import math
import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HARNESS_ARGS = ("fail", "fail_rank", "fail_iter", "record", "iter_sleep", "pg_timeout_s")

_STATE = {"iteration": 0}


# ----------------------------------------------------------------------------- arguments

def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Megatron-LM style tiny GPT pre-training (CPU, gloo)")
    g = p.add_argument_group("model")
    g.add_argument("--num-layers", type=int, default=2)
    g.add_argument("--hidden-size", type=int, default=64)
    g.add_argument("--ffn-hidden-size", type=int, default=256)
    g.add_argument("--num-attention-heads", type=int, default=8)
    g.add_argument("--seq-length", type=int, default=32)
    g.add_argument("--max-position-embeddings", type=int, default=None)
    g.add_argument("--vocab-size", type=int, default=512)
    g = p.add_argument_group("training")
    g.add_argument("--micro-batch-size", type=int, default=2)
    g.add_argument("--global-batch-size", type=int, default=16)
    g.add_argument("--train-iters", type=int, default=20)
    g.add_argument("--lr", type=float, default=3.0e-4)
    g.add_argument("--min-lr", type=float, default=3.0e-5)
    g.add_argument("--lr-warmup-iters", type=int, default=5)
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--clip-grad", type=float, default=1.0)
    g.add_argument("--log-interval", type=int, default=1)
    g.add_argument("--eval-iters", type=int, default=2)
    g.add_argument("--seed", type=int, default=1234)
    g = p.add_argument_group("distributed")
    g.add_argument("--tp", "--tensor-model-parallel-size", dest="tensor_model_parallel_size",
                   type=int, default=2)
    g.add_argument("--pp", "--pipeline-model-parallel-size", dest="pipeline_model_parallel_size",
                   type=int, default=1)
    g.add_argument("--pg-timeout-s", type=float, default=600.0,
                   help="process-group timeout in seconds (shown as distributed_timeout_minutes)")
    g = p.add_argument_group("failure injection (test harness)")
    g.add_argument("--fail", default="none",
                   choices=["none", "oom", "shape", "import", "divisibility", "sigkill", "hang", "nan"])
    g.add_argument("--fail-rank", type=int, default=0)
    g.add_argument("--fail-iter", type=int, default=3)
    g.add_argument("--record", action="store_true",
                   help="wrap main() with torch.distributed.elastic.multiprocessing.errors.record")
    g.add_argument("--iter-sleep", type=float, default=0.3,
                   help="seconds slept per iteration (stands in for GPU compute time)")
    args = p.parse_args(argv)
    if args.max_position_embeddings is None:
        args.max_position_embeddings = args.seq_length
    return args


def validate_args(args):
    """Megatron's validate_args(): derive the parallel sizes from the environment torchrun set."""
    args.rank = int(os.environ.get("RANK", "0"))
    args.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    args.world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args.context_parallel_size = 1
    model_parallel_size = (args.tensor_model_parallel_size * args.pipeline_model_parallel_size
                           * args.context_parallel_size)
    if args.fail == "divisibility" and args.world_size % model_parallel_size == 0:
        sys.exit(f"--fail divisibility needs a world size ({args.world_size}) that is not divisible by "
                 f"TP x PP x CP ({model_parallel_size}); use e.g. --tp 3")
    # The divisibility check itself is left to initialize_model_parallel(), as in Megatron-core.
    args.data_parallel_size = max(1, args.world_size // model_parallel_size)
    if args.rank == 0:
        print("using world size: {}, data-parallel size: {}, context-parallel size: {}, "
              "tensor-model-parallel size: {}, pipeline-model-parallel size: {} ".format(
                  args.world_size, args.data_parallel_size, args.context_parallel_size,
                  args.tensor_model_parallel_size, args.pipeline_model_parallel_size), flush=True)
        print("using torch.float32 for parameters ...", flush=True)
    args.distributed_backend = "gloo"
    timeout_min = args.pg_timeout_s / 60.0
    args.distributed_timeout_minutes = int(timeout_min) if timeout_min == int(timeout_min) else timeout_min
    args.params_dtype = torch.float32
    args.mock_data = True
    args.tokenizer_type = "NullTokenizer"
    args.transformer_impl = "local"
    args.use_cpu_initialization = True
    args.lr_decay_style = "cosine"
    args.adam_beta1, args.adam_beta2, args.adam_eps = 0.9, 0.95, 1e-08
    args.init_method_std = 0.02
    args.hidden_dropout = 0.0
    args.attention_dropout = 0.0
    args.save, args.load, args.save_interval = None, None, 1000
    args.eval_interval = 1000
    args.sequence_parallel = False
    if args.rank == 0:
        _print_args("arguments", args)


def _print_args(title, args):
    """Megatron's _print_args: sorted case-insensitively, dots up to column 48."""
    print(f"------------------------ {title} ------------------------", flush=True)
    lines = []
    for arg in vars(args):
        if arg in HARNESS_ARGS:
            continue
        dots = "." * (48 - len(arg))
        lines.append("  {} {} {}".format(arg, dots, getattr(args, arg)))
    for line in sorted(lines, key=lambda x: x.lower()):
        print(line, flush=True)
    print(f"-------------------- end of {title} ---------------------", flush=True)


# ----------------------------------------------------------------------------- print helpers

def print_rank_0(message):
    if dist.is_initialized():
        if dist.get_rank() == 0:
            print(message, flush=True)
    elif int(os.environ.get("RANK", "0")) == 0:
        print(message, flush=True)


def print_rank_last(message):
    if dist.is_initialized():
        if dist.get_rank() == dist.get_world_size() - 1:
            print(message, flush=True)
    else:
        print(message, flush=True)


def print_datetime(string):
    """Megatron's print_datetime: barrier, then rank 0 prints (no micro-seconds before core_v0.16)."""
    dist.barrier()
    time_str = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    print_rank_0(f"[{string}] datetime: {time_str} ")


def _should_fail(args, kind):
    return (args.fail == kind and dist.get_rank() == args.fail_rank
            and _STATE["iteration"] == args.fail_iter)


# ----------------------------------------------------------------------------- parallel state

_PARALLEL = {}


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                              context_parallel_size=1):
    """Same arithmetic and error as megatron/core/parallel_state.py (core_v0.8)."""
    world_size = dist.get_world_size()
    rank = dist.get_rank()
    model_size = tensor_model_parallel_size * pipeline_model_parallel_size * context_parallel_size
    if world_size % model_size != 0:
        raise RuntimeError(
            f"world_size ({world_size}) is not divisible by tensor_model_parallel_size "
            f"({tensor_model_parallel_size}) x pipeline_model_parallel_size ({pipeline_model_parallel_size}) "
            f"x context_parallel_size ({context_parallel_size})"
        )
    data_parallel_size = world_size // model_size
    # default order tp-cp-dp-pp: rank = tp + TP*(cp + CP*(dp + DP*pp))
    _PARALLEL["tp_rank"] = rank % tensor_model_parallel_size
    _PARALLEL["dp_rank"] = (rank // (tensor_model_parallel_size * context_parallel_size)) % data_parallel_size
    _PARALLEL["pp_rank"] = rank // (model_size // pipeline_model_parallel_size * data_parallel_size)
    _PARALLEL["dp_size"] = data_parallel_size


def initialize_megatron(args):
    start = time.time()
    print_rank_0("> initializing torch distributed ...")
    dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=args.pg_timeout_s))
    initialize_model_parallel(args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
                              args.context_parallel_size)
    print_rank_0(f"> initialized tensor model parallel with size {args.tensor_model_parallel_size}")
    print_rank_0(f"> initialized pipeline model parallel with size {args.pipeline_model_parallel_size}")
    print_rank_0(f"> setting random seeds to {args.seed} ...")
    torch.manual_seed(args.seed)
    print_rank_0(f"time to initialize megatron (seconds): {time.time() - start:.3f}")


# ----------------------------------------------------------------------------- model

class CoreAttention(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.num_heads = args.num_attention_heads
        self.head_dim = args.hidden_size // args.num_attention_heads
        self.norm_factor = 1.0 / math.sqrt(self.head_dim)

    def forward(self, query, key, value):
        # query/key/value: [b * np, s, hn]
        s = query.size(1)
        key_t = key.transpose(1, 2)
        if _should_fail(_STATE["args"], "shape"):
            key_t = key  # planted bug on this rank: the key is not transposed
        scores = torch.matmul(query, key_t) * self.norm_factor
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        probs = F.softmax(scores, dim=-1)
        return torch.matmul(probs, value)


class ParallelAttention(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.query_key_value = nn.Linear(args.hidden_size, 3 * args.hidden_size)
        self.core_attention = CoreAttention(args)
        self.dense = nn.Linear(args.hidden_size, args.hidden_size)

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        np_, hn = self.args.num_attention_heads, h // self.args.num_attention_heads
        qkv = self.query_key_value(hidden_states).view(b, s, 3, np_, hn)
        q, k, v = (qkv[:, :, i].permute(0, 2, 1, 3).reshape(b * np_, s, hn) for i in range(3))
        context = self.core_attention(q, k, v)
        context = context.view(b, np_, s, hn).permute(0, 2, 1, 3).reshape(b, s, h)
        return self.dense(context)


class ParallelMLP(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(args.hidden_size, args.ffn_hidden_size)
        self.dense_4h_to_h = nn.Linear(args.ffn_hidden_size, args.hidden_size)

    def forward(self, hidden_states):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(hidden_states)))


class ParallelTransformerLayer(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(args.hidden_size)
        self.self_attention = ParallelAttention(args)
        self.post_attention_layernorm = nn.LayerNorm(args.hidden_size)
        self.mlp = ParallelMLP(args)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.self_attention(self.input_layernorm(hidden_states))
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class GPTModel(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.word_embeddings = nn.Embedding(args.vocab_size, args.hidden_size)
        self.position_embeddings = nn.Embedding(args.max_position_embeddings, args.hidden_size)
        self.layers = nn.ModuleList(ParallelTransformerLayer(args) for _ in range(args.num_layers))
        self.final_layernorm = nn.LayerNorm(args.hidden_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, mean=0.0, std=args.init_method_std)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1)).unsqueeze(0)
        hidden_states = self.word_embeddings(tokens) + self.position_embeddings(positions)
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        if _should_fail(_STATE["args"], "nan"):
            # planted numerical blow-up on this rank: activations overflow float32 (inf - inf = nan)
            hidden_states = hidden_states * 1e39
        hidden_states = self.final_layernorm(hidden_states)
        return F.linear(hidden_states, self.word_embeddings.weight)  # tied output layer


# ----------------------------------------------------------------------------- data

def get_batch(args, iteration, microbatch, split="train"):
    """Mock GPT data: a seeded random walk over the vocabulary, same on every TP rank of a DP rank."""
    g = torch.Generator().manual_seed(
        args.seed * 1000003 + {"train": 0, "valid": 7919}[split] * 1009
        + iteration * 101 + microbatch * 13 + _PARALLEL["dp_rank"])
    start = torch.randint(0, args.vocab_size, (args.micro_batch_size, 1), generator=g)
    steps = torch.randint(1, 4, (args.micro_batch_size, args.seq_length), generator=g)
    seq = (start + torch.cumsum(steps, dim=1)) % args.vocab_size
    tokens = torch.cat([start, seq[:, :-1]], dim=1)
    return tokens, seq


# ----------------------------------------------------------------------------- training

def _load_fused_kernels():
    """Optional fused kernels, loaded lazily the first time a checkpoint-sharding hook is needed."""
    from transformer_engine.pytorch.dist_checkpointing import sharded_state_dict_hook  # noqa: F401
    return sharded_state_dict_hook


def forward_step(args, model, tokens, labels):
    if _should_fail(args, "import"):
        _load_fused_kernels()
    logits = model(tokens)
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), labels.view(-1))


def backward_step(args, loss):
    if _should_fail(args, "oom"):
        # INJECTED: this run is on CPU, so a CUDA out-of-memory error cannot happen for real here.
        # The message is the CUDACachingAllocator text of torch >= 2.5; the GPU index is the local rank.
        raise torch.OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU {} has a total capacity of 79.11 GiB "
            "of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory "
            "in use. Of the allocated memory 74.50 GiB is allocated by PyTorch, and 2.06 GiB is reserved "
            "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
            "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            .format(args.local_rank))
    loss.backward()


class AdamW:
    """Plain AdamW (decoupled weight decay), standing in for Megatron's optimizer wrapper.

    torch.optim is not used because constructing any torch.optim optimizer imports torch._dynamo,
    which costs several seconds per rank on a small CPU machine.
    """

    def __init__(self, params, lr, betas, eps, weight_decay):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.step_count = 0
        self.state = {p: {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
                      for p in self.params}

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.step_count += 1
        b1, b2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            st = self.state[p]
            p.mul_(1.0 - self.lr * self.weight_decay)
            st["exp_avg"].mul_(b1).add_(p.grad, alpha=1.0 - b1)
            st["exp_avg_sq"].mul_(b2).addcmul_(p.grad, p.grad, value=1.0 - b2)
            denom = (st["exp_avg_sq"] / (1.0 - b2 ** self.step_count)).sqrt_().add_(self.eps)
            p.addcdiv_(st["exp_avg"], denom, value=-self.lr / (1.0 - b1 ** self.step_count))


@torch.no_grad()
def clip_grad_norm(params, max_norm):
    grads = [p.grad for p in params if p.grad is not None]
    total_norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads)).item()
    if math.isfinite(total_norm) and total_norm > max_norm:
        for g in grads:
            g.mul_(max_norm / (total_norm + 1.0e-6))
    return total_norm


def allreduce_gradients(model):
    """Data-parallel gradient all-reduce over one flat bucket (gloo)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    bucket = torch._utils._flatten_dense_tensors(grads)
    dist.all_reduce(bucket)
    bucket.div_(dist.get_world_size())
    for g, synced in zip(grads, torch._utils._unflatten_dense_tensors(bucket, grads)):
        g.copy_(synced)


def get_lr(args, iteration):
    if iteration <= args.lr_warmup_iters:
        return args.lr * iteration / max(1, args.lr_warmup_iters)
    ratio = (iteration - args.lr_warmup_iters) / max(1, args.train_iters - args.lr_warmup_iters)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1.0 + math.cos(math.pi * ratio))


def train_step(args, model, optimizer, iteration):
    num_microbatches = args.global_batch_size // (args.micro_batch_size * _PARALLEL["dp_size"])
    optimizer.zero_grad()
    losses = []
    for mb in range(num_microbatches):
        tokens, labels = get_batch(args, iteration, mb)
        loss = forward_step(args, model, tokens, labels)
        backward_step(args, loss / num_microbatches)
        losses.append(loss.detach())
    if _should_fail(args, "sigkill"):
        os.kill(os.getpid(), signal.SIGKILL)
    if _should_fail(args, "hang"):
        time.sleep(600)  # this rank stops answering; the others block in the all-reduce below
    time.sleep(args.iter_sleep)  # stands in for the GPU compute of a real model
    allreduce_gradients(model)
    grad_norm = clip_grad_norm(model.parameters(), args.clip_grad)
    optimizer.lr = get_lr(args, iteration)
    local_loss = torch.stack(losses).mean()
    if math.isfinite(grad_norm):
        optimizer.step()
    reduced = local_loss.clone()
    dist.all_reduce(reduced)
    return local_loss, (reduced / dist.get_world_size()).item(), grad_norm


def report_memory(name, model, optimizer, args):
    """Megatron's report_memory() for DP-rank-0 ranks.

    There is no GPU here, so instead of torch.cuda.memory_allocated() this counts the bytes of the
    CPU tensors the training holds: parameters, gradients and optimizer state (+ one micro-batch of
    activations for the peak); 'reserved' rounds up to the caching allocator's 2 MiB segments.
    """
    mb = 1024.0 * 1024.0
    tensors = list(model.parameters()) + [p.grad for p in model.parameters() if p.grad is not None]
    for state in optimizer.state.values():
        tensors += [t for t in state.values() if torch.is_tensor(t)]
    allocated = sum(t.numel() * t.element_size() for t in tensors) / mb
    activations = (args.micro_batch_size * args.seq_length
                   * (args.num_layers * (12 * args.hidden_size + 2 * args.ffn_hidden_size)
                      + 2 * args.vocab_size) * 4) / mb
    max_allocated = allocated + activations
    reserved = math.ceil(allocated / 2.0) * 2.0
    max_reserved = math.ceil(max_allocated / 2.0) * 2.0
    if _PARALLEL["dp_rank"] == 0:
        print("[Rank {}] {} memory (MB) | allocated: {:.2f} | max allocated: {:.2f} | reserved: {:.2f} "
              "| max reserved: {:.2f}".format(dist.get_rank(), name, allocated, max_allocated,
                                               reserved, max_reserved), flush=True)


def validate_result(args, result, message):
    """Megatron's RerunStateMachine.validate_result() with rerun mode disabled: fatal on NaN."""
    if torch.isnan(result).any():
        raise RuntimeError(
            f"Rank {dist.get_rank()}, node {socket.gethostname()}, device {args.local_rank}, "
            f"iteration {_STATE['iteration']}: Unexpected result {result!s} (message='{message}')")


def training_log(args, iteration, loss, lr, grad_norm, elapsed_ms, nan_iters, model, optimizer,
                 report_memory_flag):
    log_string = f" [{datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"
    log_string += " iteration {:8d}/{:8d} |".format(iteration, args.train_iters)
    log_string += " consumed samples: {:12d} |".format(iteration * args.global_batch_size)
    log_string += " elapsed time per iteration (ms): {:.1f} |".format(elapsed_ms)
    log_string += " learning rate: {:.6E} |".format(lr)
    log_string += " global batch size: {:5d} |".format(args.global_batch_size)
    if loss >= 0.0:  # a NaN average is not printed (NaN >= 0 is False), as in Megatron
        log_string += " lm loss: {:.6E} |".format(loss)
    log_string += " loss scale: {:.1f} |".format(1.0)
    log_string += " grad norm: {:.3f} |".format(grad_norm)
    log_string += " number of skipped iterations: {:3d} |".format(0)
    log_string += " number of nan iterations: {:3d} |".format(nan_iters)
    print_rank_last(log_string)
    if report_memory_flag:
        report_memory(f"(after {iteration} iterations)", model, optimizer, args)
        return False
    return report_memory_flag


def evaluate_and_print_results(args, model, iteration):
    model.eval()
    with torch.no_grad():
        losses = [F.cross_entropy(model(t).view(-1, args.vocab_size), l.view(-1))
                  for t, l in (get_batch(args, iteration, i, "valid") for i in range(args.eval_iters))]
    loss = torch.stack(losses).mean()
    dist.all_reduce(loss)
    loss = (loss / dist.get_world_size()).item()
    string = (f" validation loss at iteration {iteration} on validation set | "
              f"lm loss value: {loss:.6E} | lm loss PPL: {math.exp(min(20, loss)):.6E} | ")
    length = len(string) + 1
    print_rank_last("-" * length)
    print_rank_last(string)
    print_rank_last("-" * length)


def train(args, model, optimizer):
    nan_iters = 0
    report_memory_flag = True
    for iteration in range(1, args.train_iters + 1):
        _STATE["iteration"] = iteration
        start = time.time()
        local_loss, loss, grad_norm = train_step(args, model, optimizer, iteration)
        if not math.isfinite(loss):
            nan_iters += 1
        if iteration % args.log_interval == 0:
            report_memory_flag = training_log(
                args, iteration, loss, get_lr(args, iteration), grad_norm,
                (time.time() - start) * 1000.0, nan_iters, model, optimizer, report_memory_flag)
        validate_result(args, local_loss, "found NaN in local forward loss calculation")
    return args.train_iters


def pretrain(args):
    initialize_megatron(args)
    print_datetime("after megatron is initialized")
    print_rank_0("building GPT model ...")
    model = GPTModel(args)
    if _PARALLEL["dp_rank"] == 0:
        print(" > number of parameters on (tensor, pipeline) model parallel rank ({}, {}): {}".format(
            _PARALLEL["tp_rank"], _PARALLEL["pp_rank"], sum(p.numel() for p in model.parameters())),
            flush=True)
    optimizer = AdamW(model.parameters(), lr=args.lr, betas=(args.adam_beta1, args.adam_beta2),
                      eps=args.adam_eps, weight_decay=args.weight_decay)
    print_datetime("after model, optimizer, and learning rate scheduler are built")
    print_rank_0("> building train, validation, and test datasets ...")
    print_rank_0(" > datasets target sizes (minimum size):")
    print_rank_0("    train:      {}".format(args.train_iters * args.global_batch_size))
    print_rank_0("    validation: {}".format(args.eval_iters * args.global_batch_size))
    print_rank_0("    test:       {}".format(args.eval_iters * args.global_batch_size))
    print_rank_0("> finished creating GPT datasets ...")
    print_datetime("after dataloaders are built")
    print_rank_0("done with setup ...")
    print_rank_0("training ...")
    print_datetime("before the start of training step")
    iteration = train(args, model, optimizer)
    print_datetime("after training is done")
    evaluate_and_print_results(args, model, iteration)
    dist.destroy_process_group()


def main():
    args = ARGS
    _STATE["args"] = args
    validate_args(args)
    pretrain(args)


ARGS = parse_args()

if __name__ == "__main__":
    if ARGS.record:
        from torch.distributed.elastic.multiprocessing.errors import record
        main = record(main)
    main()
