"""Deterministic generator of realistic failed-job logs for the benchmark (not part of the test run).

    python tests/bench/generate.py OUT.err --size 1G --ranks 1024 [--seed 1] [--failure oom|shape]
    python tests/bench/generate.py OUTDIR --split --size 1G --ranks 4096      # one file per rank

A job of N ranks, 8 per node, one `torchrun` agent per node, optionally under `srun --label`
(`--srun`).  The bulk is noise real logs carry: NCCL INFO lines (`host:pid:tid [dev] NCCL INFO …`),
c10 warnings (`[rankN]:[W1202 10:31:15.931000000 ProcessGroupNCCL.cpp:1647] Warning: …`),
UserWarnings, Megatron iteration lines, tqdm bars redrawn with `\\r`.  At ~99 % of the bytes one rank
fails with a real-looking traceback (CUDA OOM in the backward pass, or a shape error); its node's
agent tears its workers down at once; ten minutes later every other rank logs the NCCL watchdog
timeout sequence and dies with SIGABRT, and every other agent prints its teardown and
ChildFailedError.  Same seed, same arguments → same bytes.  The planted answer is printed as JSON on
stdout: {"rank": R, "category": "oom"|"shape", "host": …}.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

T0 = datetime(2026, 12, 2, 8, 0, 0)
RUN_SECONDS = 2 * 3600
BLOCK = 4 * 1024 * 1024
PER_NODE = 8
PY = "/opt/venv/lib/python3.11/site-packages"
MEG = "/workspace/Megatron-LM"


def parse_size(s: str) -> int:
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if s[-1:] in "KMG" else s) * mult)


class Job:
    def __init__(self, ranks: int, seed: int, srun: bool):
        self.rng = random.Random(seed)
        self.n = ranks
        self.nodes = (ranks + PER_NODE - 1) // PER_NODE
        self.srun = srun
        self.width = len(str(self.nodes - 1))
        self.host = [f"gpu-{i:04d}" for i in range(self.nodes)]
        self.pid = [20000 + 37 * r + self.rng.randrange(30) for r in range(ranks)]
        self.agent_pid = [1000 + self.rng.randrange(9000) for _ in range(self.nodes)]

    # prefixes ------------------------------------------------------------------------------------
    def label(self, node: int) -> str:
        return f"{node:>{self.width}}: " if self.srun else ""

    def node_of(self, r: int) -> int:
        return r // PER_NODE

    def w(self, r: int, text: str) -> str:
        """A worker's Python/c10 line: `[rankN]:` prefix (plus the srun label of its node)."""
        return f"{self.label(self.node_of(r))}[rank{r}]:{text}"

    def nccl(self, r: int, text: str) -> str:
        node = self.node_of(r)
        tag = f"[rank{r}]:" if r % 3 == 0 else ""
        return f"{self.label(node)}{tag}{self.host[node]}:{self.pid[r]}:{self.pid[r] + 60 + r % 7} [{r % PER_NODE}] NCCL INFO {text}"

    def agent(self, node: int, text: str) -> str:
        return f"{self.label(node)}{text}"

    # noise ---------------------------------------------------------------------------------------
    def noise_pool(self, ranks: list[int], size: int = 6000) -> list[tuple[int, str]]:
        """(rank, line) templates; `@G@` becomes a glog `MMDD HH:MM:SS`, `@I@` an ISO time."""
        rng = self.rng
        pool: list[tuple[int, str]] = []
        last = self.n - 1
        for _ in range(size):
            r = rng.choice(ranks)
            k = rng.random()
            if k < 0.55:
                ch = rng.randrange(32)
                peer = rng.randrange(self.n)
                text = rng.choice([
                    f"Channel {ch:02d}/0 : {r}[{r % 8}] -> {peer}[{peer % 8}] [send] via NET/IB/{ch % 4}/GDRDMA",
                    f"Channel {ch:02d}/0 : {r}[{r % 8}] -> {(r + 1) % self.n}[{(r + 1) % 8}] via P2P/CUMEM/read",
                    f"Connected all rings, use ring PXN 0 GDR 1",
                    f"comm 0x{rng.getrandbits(40):x} rank {r} nRanks {self.n} nNodes {self.nodes} localRanks 8 localRank {r % 8} MNNVL 0",
                    f"NET/IB : GPU Direct RDMA Enabled for HCA {r % 8} 'mlx5_{r % 8}'",
                    f"Trees [0] {peer}/-1/-1->{r}->{(r + 8) % self.n} [1] -1/-1/-1->{r}->{peer}",
                    f"threadThresholds 8/8/64 | {8 * self.n}/8/64 | 512 | 512",
                    f"{ch} coll channels, {ch} collnet channels, 0 nvls channels, {ch} p2p channels, 2 p2p channels per peer",
                    f"Using network IB",
                    f"ncclCommInitRankConfig comm 0x{rng.getrandbits(40):x} rank {r} nranks {self.n} cudaDev {r % 8} nvmlDev {r % 8} busId {(r % 8) * 16 + 0x18:x}000 commId 0x{rng.getrandbits(60):x} - Init START",
                ])
                pool.append((r, self.nccl(r, text)))
            elif k < 0.72:
                pool.append((r, self.w(r, rng.choice([
                    f"[W@G@.{rng.randrange(10**9):09d} ProcessGroupNCCL.cpp:1647] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is thus deprecated. (function operator())",
                    f"[W@G@.{rng.randrange(10**9):09d} ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {r}]  using GPU {r % 8} to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force use of a particular device, or call init_process_group() with a device_id.",
                    f"[I@G@.{rng.randrange(10**9):09d} ProcessGroupNCCL.cpp:{rng.choice([946, 2181, 3043])}] [PG ID {rng.randrange(8)} PG GUID {rng.randrange(99)}(undefined) Rank {r % 64}] ProcessGroupNCCL initialization options: size: {self.n}, global rank: {r}, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, SPLIT_FROM: 0, SPLIT_COLOR: 0, PG Name: {rng.randrange(99)}",
                ]))))
            elif k < 0.84:
                pool.append((r, self.w(r, rng.choice([
                    f"{MEG}/megatron/core/tensor_parallel/layers.py:609: UserWarning: async_grad_allreduce is deprecated, not in use anymore and will be removed in a future release. Use `allreduce_dgrad` instead.",
                    "  warnings.warn(",
                    f"{PY}/torch/autograd/graph.py:824: UserWarning: c10d::broadcast_: an autograd kernel was not registered to the Autograd key(s) but we are trying to backprop through it. This may lead to silently incorrect behavior. (Triggered internally at /pytorch/torch/csrc/autograd/autograd_not_implemented_fallback.cpp:62.)",
                    "  return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
                    f"{MEG}/megatron/core/transformer/transformer_config.py:1204: UserWarning: If you are using transformer_engine as the transformer implementation, the core_attn is from transformer_engine and may be the fused version. For fused attention, you have no need to set 'core_attn' to recompute.",
                ]))))
            elif k < 0.95:
                it = rng.randrange(1, 100000)
                lm = 2 + rng.random() * 3
                pool.append((last, f"{self.label(self.node_of(last))} [@I@] iteration {it:>8d}/  500000 | consumed samples: {it * 1024:>12d} | "
                             f"elapsed time per iteration (ms): {900 + rng.random() * 200:.1f} | throughput per GPU (TFLOP/s/GPU): {380 + rng.random() * 40:.1f} | "
                             f"learning rate: {rng.random() * 3e-4:.6E} | global batch size:  1024 | lm loss: {lm:.6E} | loss scale: 1.0 | "
                             f"grad norm: {rng.random() * 2:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |"))
            else:
                bar = []
                for pct in range(0, 101, rng.choice([10, 20, 25])):
                    done = pct * 20 // 100
                    bar.append(f"Loading checkpoint shards: {pct:3d}%|{'█' * done}{' ' * (20 - done)}| {pct // 5}/20 [00:{pct // 10:02d}<00:{(100 - pct) // 10:02d},  2.{rng.randrange(99):02d}it/s]")
                pool.append((r, self.label(self.node_of(r)) + "\r".join(bar)))
        return pool

    # the failure ---------------------------------------------------------------------------------
    def traceback(self, r: int, kind: str) -> list[str]:
        tb = [
            "Traceback (most recent call last):",
            f'  File "{MEG}/pretrain_gpt.py", line 372, in <module>',
            "    pretrain(",
            f'  File "{MEG}/megatron/training/training.py", line 1102, in pretrain',
            "    iteration, num_floating_point_operations_so_far = train(",
            "                                                      ^^^^^^",
            f'  File "{MEG}/megatron/training/training.py", line 2496, in train',
            "    ) = train_step(",
            "        ^^^^^^^^^^^",
            f'  File "{MEG}/megatron/training/training.py", line 1478, in train_step',
            "    losses_reduced = forward_backward_func(",
            "                     ^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{MEG}/megatron/core/pipeline_parallel/schedules.py", line 2093, in forward_backward_pipelining_without_interleaving',
        ]
        if kind == "oom":
            tb += [
                "    input_tensor_grad = backward_step(",
                "                        ^^^^^^^^^^^^^^",
                f'  File "{MEG}/megatron/core/pipeline_parallel/schedules.py", line 462, in backward_step',
                "    torch.autograd.backward(output_tensor[0], grad_tensors=output_tensor_grad[0])",
                f'  File "{PY}/torch/autograd/__init__.py", line 364, in backward',
                "    _engine_run_backward(",
                f'  File "{PY}/torch/autograd/graph.py", line 824, in _engine_run_backward',
                "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
                "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU {r % 8} has a total capacity of 79.11 GiB of which 1.21 GiB is free. "
                "Including non-PyTorch memory, this process has 77.88 GiB memory in use. Of the allocated memory 71.20 GiB is allocated by PyTorch, and 5.31 GiB is "
                "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
            ]
        else:
            tb += [
                "    output_tensor, num_tokens = forward_step(",
                "                                ^^^^^^^^^^^^^",
                f'  File "{MEG}/megatron/core/transformer/attention.py", line 705, in forward',
                "    query = query.view(*query.size()[:2], self.num_attention_heads_per_partition, self.hidden_size_per_attention_head)",
                "            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                "RuntimeError: shape '[4096, 1, 12, 128]' is invalid for input of size 8388608",
            ]
        return [self.w(r, " " + line) for line in tb]

    def watchdog(self, r: int, failed: int, ts: str, seq: int) -> list[str]:
        pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        c = lambda lvl, f, text: self.w(r, f"[{lvl}{ts}.{(r * 7919) % 10**9:09d} {f}] {text}")  # noqa: E731
        return [
            c("E", "ProcessGroupNCCL.cpp:632", f"{pg} Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600071 milliseconds before timing out."),
            c("E", "ProcessGroupNCCL.cpp:2271", f"{pg}  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq - 1}"),
            c("E", "ProcessGroupNCCL.cpp:670", f"Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value."),
            c("E", "ProcessGroupNCCL.cpp:684", f"[Rank {r}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."),
            c("E", "ProcessGroupNCCL.cpp:698", f"[Rank {r}] To avoid data inconsistency, we are taking the entire process down."),
            c("E", "ProcessGroupNCCL.cpp:1895", f"{pg} Process group watchdog thread terminated with exception: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600071 milliseconds before timing out."),
            self.w(r, "terminate called after throwing an instance of 'c10::DistBackendError'"),
        ]

    def teardown(self, node: int, failed_local: int, code: int, when: datetime, first_rank: int) -> list[str]:
        a = self.agent_pid[node]
        g = when.strftime("%m%d %H:%M:%S")
        out = []
        for lr in range(PER_NODE):
            if lr != failed_local and node * PER_NODE + lr < self.n:
                out.append(f"W{g}.{self.rng.randrange(10**6):06d} {a} torch/distributed/elastic/multiprocessing/api.py:908] Sending process {self.pid[node * PER_NODE + lr]} closing signal SIGTERM")
        r = node * PER_NODE + failed_local
        out.append(f"E{g}.{self.rng.randrange(10**6):06d} {a} torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: {code}) local_rank: {failed_local} (pid: {self.pid[r]}) of binary: /opt/venv/bin/python")
        out += [
            "Traceback (most recent call last):",
            '  File "/opt/venv/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            f'  File "{PY}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
            "    return f(*args, **kwargs)",
            f'  File "{PY}/torch/distributed/run.py", line 918, in main',
            "    run(args)",
            f'  File "{PY}/torch/distributed/launcher/api.py", line 261, in launch_agent',
            "    raise ChildFailedError(",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            f"{MEG}/pretrain_gpt.py FAILED",
            "------------------------------------------------------------",
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {when:%Y-%m-%d_%H:%M:%S}",
            f"  host      : {self.host[node]}",
            f"  rank      : {r} (local_rank: {failed_local})",
            f"  exitcode  : {code} (pid: {self.pid[r]})",
            "  error_file: <N/A>",
            f"  traceback : {'Signal 6 (SIGABRT) received by PID ' + str(self.pid[r]) if code == -6 else 'To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html'}",
            "============================================================",
        ]
        return [self.agent(node, line) for line in out]


def fill(rng: random.Random, pool: list[str], nbytes: int, t_start: datetime, t_end: datetime) -> list[bytes]:
    """Noise blocks of about `nbytes` in all, timestamps advancing from t_start to t_end."""
    avg = sum(len(p) + 1 for p in pool[:500]) / min(len(pool), 500)
    blocks, done = [], 0
    while done < nbytes:
        want = min(BLOCK, nbytes - done)
        k = max(1, int(want / avg))
        t = t_start + (t_end - t_start) * (done / max(nbytes, 1))
        text = "\n".join(rng.choices(pool, k=k)) + "\n"
        text = text.replace("@G@", t.strftime("%m%d %H:%M:%S")).replace("@I@", t.strftime("%Y-%m-%d %H:%M:%S"))
        b = text.encode()
        blocks.append(b)
        done += len(b)
        if len(blocks) > 8:  # caller streams; keep at most a few blocks in memory
            yield from blocks
            blocks = []
    yield from blocks


def generate(out: Path, size: int, ranks: int, seed: int = 1, failure: str = "oom", split: bool = False,
             srun: bool = False) -> dict:
    job = Job(ranks, seed, srun)
    rng = job.rng
    bad = rng.randrange(ranks)
    bad_node, bad_local = job.node_of(bad), bad % PER_NODE
    t_fail = T0 + timedelta(seconds=RUN_SECONDS)
    t_dog = t_fail + timedelta(seconds=600)
    seq = 1000 + rng.randrange(100000)

    # the failure and everything after it, per rank (in time order)
    tail: dict[int, list[str]] = {}
    tb = job.traceback(bad, failure)
    tail.setdefault(bad, []).extend(tb)
    agent_bad = job.teardown(bad_node, bad_local, 1, t_fail + timedelta(seconds=1), bad)
    late: dict[int, list[str]] = {}
    g = t_dog.strftime("%m%d %H:%M:%S")
    for r in range(ranks):
        if job.node_of(r) != bad_node:
            late.setdefault(r, []).extend(job.watchdog(r, bad, g, seq))
    agents_late = {n: job.teardown(n, 0, -6, t_dog + timedelta(seconds=2), n * PER_NODE) for n in range(job.nodes) if n != bad_node}

    answer = {"rank": bad, "category": failure, "host": job.host[bad_node], "ranks": ranks, "seed": seed}
    if not split:
        pool = [line for _, line in job.noise_pool(list(range(ranks)))]
        with open(out, "wb") as fh:
            fh.write(job.agent(0, "W1202 07:59:58.000000 4242 torch/distributed/run.py:793] *****************************************").encode() + b"\n")
            for b in fill(rng, pool, int(size * 0.995), T0, t_fail):
                fh.write(b)
            lines = []
            for line in tb:  # the failing rank's traceback, interleaved with other ranks' output
                lines.append(line)
                lines.extend(rng.choices(pool, k=rng.randrange(3)))
            lines += agent_bad
            stamp = t_fail.strftime("%m%d %H:%M:%S")
            text = "\n".join(lines).replace("@G@", stamp).replace("@I@", t_fail.strftime("%Y-%m-%d %H:%M:%S"))
            fh.write(text.encode() + b"\n")
            order = sorted(late, key=lambda r: rng.random())
            merged = []
            for r in order:  # ranks time out together: round-robin over ranks, each rank's lines in order
                merged.append(late[r])
            idx = [0] * len(merged)
            out_lines = []
            alive = list(range(len(merged)))
            while alive:
                nxt = []
                for i in alive:
                    out_lines.append(merged[i][idx[i]])
                    idx[i] += 1
                    if idx[i] < len(merged[i]):
                        nxt.append(i)
                alive = nxt
            for n in sorted(agents_late):
                out_lines += agents_late[n]
            fh.write(("\n".join(out_lines) + "\n").encode())
            # fill the remainder (a tail of unrelated lines keeps the total size honest)
            srun = [f"{job.agent(0, '')}srun: error: {job.host[n]}: task {n}: Exited with exit code 1" for n in range(job.nodes)]
            fh.write(("\n".join(srun) + "\n").encode())
            left = size - fh.tell()
            if left > 0:  # then the job script's own epilogue output, unrelated to the failure
                epilog = [f"[epilog] removing scratch files under /scratch/job/{job.host[n]}/{i}" for n in range(job.nodes) for i in range(4)]
                fh.write(b"".join(fill(rng, epilog, left, t_dog, t_dog)))
    else:
        out.mkdir(parents=True, exist_ok=True)
        full = job.noise_pool(list(range(ranks)), size=max(6000, 4 * ranks))
        by_rank: dict[int, list[str]] = {}
        for r, line in full:
            by_rank.setdefault(r, []).append(line)
        per = size // ranks
        stamp = t_fail.strftime("%m%d %H:%M:%S")
        for r in range(ranks):
            pool = by_rank.get(r) or [job.nccl(r, "Using network IB")]
            with open(out / f"job-rank{r:04d}.err", "wb") as fh:
                for b in fill(rng, pool, int(per * 0.99), T0, t_fail):
                    fh.write(b)
                lines = list(tail.get(r, []))
                if r == bad_node * PER_NODE:
                    lines += agent_bad
                lines += late.get(r, [])
                if r % PER_NODE == 0 and job.node_of(r) in agents_late:
                    lines += agents_late[job.node_of(r)]
                if lines:
                    fh.write(("\n".join(lines).replace("@G@", stamp) + "\n").encode())
    return answer


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", default="100M", help="total bytes: 100M, 1G, 4G …")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--failure", choices=["oom", "shape"], default="oom")
    ap.add_argument("--split", action="store_true", help="one file per rank in the folder OUT")
    ap.add_argument("--srun", action="store_true", help="srun --label prefixes on every line")
    a = ap.parse_args(argv)
    ans = generate(a.out, parse_size(a.size), a.ranks, a.seed, a.failure, a.split, a.srun)
    json.dump(ans, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
