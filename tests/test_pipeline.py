"""The pipeline through the library API, on small logs in the shapes real launchers print."""
import json

import pytest

from diagnose import diagnose

OOM_TB = """\
[rank{r}]: Traceback (most recent call last):
[rank{r}]:   File "/workspace/Megatron-LM/pretrain_gpt.py", line 357, in <module>
[rank{r}]:     main()
[rank{r}]:   File "/workspace/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 410, in backward_step
[rank{r}]:     torch.autograd.backward(output_tensor[0], grad_tensors=output_tensor_grad[0])
[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has a total capacity of 79.11 GiB of which 1.02 GiB is free.
"""

TIMEOUT = (
    "[rank{r}]:[E1202 10:41:{s:02d}.123456789 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds "
    "before timing out.\n"
)


def test_oom_is_named_with_rank_phase_and_evidence(write):
    log = write(
        "megatron-1.err",
        " [2026-12-02 10:31:13] iteration        1/     100 | consumed samples:           16 |\n"
        + OOM_TB.format(r=3)
        + "".join(TIMEOUT.format(r=r, s=10 + r) for r in (0, 1, 2)),
    )
    d = diagnose([log])
    r = d.root_cause
    assert d.status == "failed"
    assert (r.category, r.rank, r.pattern) == ("oom", 3, "oom.cuda_allocator")
    assert r.message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert (r.evidence.file.endswith("megatron-1.err"), r.evidence.line) == (True, 7)
    assert r.details["phase"] == "backward"
    assert [f.func for f in r.frames] == ["<module>", "backward_step"]
    watchdog = [s for s in d.symptoms if s.pattern == "nccl.watchdog_timeout"][0]
    assert watchdog.ranks == [0, 1, 2] and watchdog.count == 3


def test_root_is_earliest_not_last_nor_most_frequent(write):
    shape = (
        "[rank5]: Traceback (most recent call last):\n"
        '[rank5]:   File "/w/train.py", line 10, in forward\n'
        "[rank5]:     y = x @ w\n"
        "[rank5]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x64 and 32x64)\n"
    )
    comm = (
        "[rank{r}]: Traceback (most recent call last):\n"
        '[rank{r}]:   File "/w/train.py", line 20, in step\n'
        "[rank{r}]:     dist.all_reduce(t)\n"
        "[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "remote process exited or there was a network error, NCCL version 2.21.5\n"
    )
    later_python = (
        "[rank6]: Traceback (most recent call last):\n"
        '[rank6]:   File "/w/train.py", line 30, in cleanup\n'
        "[rank6]:     os.remove(p)\n"
        "[rank6]: KeyError: 'b'\n"
    )
    log = write("job.err", "".join(comm.format(r=r) for r in (0, 1)) + shape + "".join(comm.format(r=r) for r in range(2, 5)) + later_python)
    r = diagnose([log]).root_cause
    assert (r.category, r.rank) == ("shape", 5)
    assert "mat1 and mat2" in r.message


def test_interleaved_ranks_in_one_merged_file(write):
    a = OOM_TB.format(r=1).splitlines()
    b = [ln.replace("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "ValueError: bad value")
         for ln in OOM_TB.format(r=2).splitlines()]
    mixed = [x for pair in zip(b, a) for x in pair]  # rank 2's lines first, line by line
    d = diagnose([write("mixed.log", "\n".join(mixed) + "\n")])
    r = d.root_cause
    assert r.rank == 2 and r.category == "python" and r.message.startswith("ValueError: bad value")
    assert len(r.frames) == 2


def test_srun_label_is_the_rank_when_no_torch_prefix(write):
    log = write(
        "slurm-77.out",
        "0: Traceback (most recent call last):\n"
        '0:   File "/fsx/train.py", line 92, in train\n'
        "0:     optimizer.step()\n"
        "1: step 10 loss 3.2\n"
        "0: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79 GiB\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank) == ("oom", 0)
    assert r.details["phase"] == "optimizer step"


def test_tee_prefix_gives_a_local_rank_the_rank_of_the_only_node_shown(write):
    log = write(
        "tee.log",
        "[default1]:Traceback (most recent call last):\n"
        '[default1]:  File "/w/pretrain.py", line 5, in <module>\n'
        "[default1]:    import transformer_engine\n"
        "[default1]:ModuleNotFoundError: No module named 'transformer_engine'\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank, r.local_rank) == ("import", 1, 1)
    assert r.details["rank_from"] == "local rank 1: the logs show no other node"


def test_chained_exceptions_are_one_root(write):
    log = write(
        "chain.log",
        "Traceback (most recent call last):\n"
        '  File "/w/data.py", line 3, in load\n'
        "    open(path)\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/gpt_text_document.idx'\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 9, in <module>\n'
        "    build()\n"
        "RuntimeError: could not build dataset\n",
    )
    d = diagnose([log])
    r = d.root_cause
    assert r.category == "data"
    assert "gpt_text_document.idx" in r.message
    assert "RuntimeError: could not build dataset" in r.traceback
    assert [s for s in d.symptoms if s.category == "python"] == []


def test_truncated_traceback_at_end_of_file(write):
    log = write(
        "cut.log",
        "[rank0]:   File \"/w/layers.py\", line 91, in apply_rotary_pos_emb\n"
        "[rank0]:     q_embed = (q * cos) + (rotate_half(q) * sin)\n"
        "[rank0]: RuntimeError: The size of tensor a (120) must match the size of tensor b (119) at non-singleton dimension 2\n"
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/w/train.py", line 1, in <mod',
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank) == ("shape", 0)
    assert r.frames[0].func == "apply_rotary_pos_emb"


def test_nccl_only_failure_says_so_and_names_the_silent_rank(write):
    log = write(
        "hang.log",
        "using world size: 4, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1 \n"
        + "".join(TIMEOUT.format(r=r, s=r) for r in (0, 2, 3)),
    )
    r = diagnose([log]).root_cause
    assert r.category == "nccl" and r.pattern == "nccl.watchdog_timeout"
    assert r.rank == 1 and r.details["lagging_rank"] == 1 and r.details["timed_out_ranks"] == [0, 2, 3]
    assert any("MASTER_ADDR" in x or "same command" in x for x in r.remediation)


def test_a_lost_peer_before_the_timeouts_still_names_the_silent_rank(write):
    # Under load one rank can see its peer go away (that peer exited after its own timeout) before the
    # timeouts are printed: the lost peer is the later link of the chain, and that rank is not silent.
    closed = ("[rank3]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
              "Connection closed by peer [127.0.0.1]:56969. This is typically caused by a remote worker crashing.\n")
    log = write(
        "hang.log",
        "using world size: 4, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1 \n"
        + closed + "".join(TIMEOUT.format(r=r, s=r) for r in (0, 2)),
    )
    r = diagnose([log]).root_cause
    assert r.pattern == "nccl.watchdog_timeout" and r.rank == 1
    assert r.details["timed_out_ranks"] == [0, 2] and r.details["peer_closed_ranks"] == [3]


def test_a_lost_peer_alone_names_the_silent_rank_not_the_reporter(write):
    closed = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
              "Connection closed by peer [127.0.0.1]:56969. This is typically caused by a remote worker crashing.\n")
    log = write("peer.log", "".join(closed.format(r=r) for r in (0, 1)))
    r = diagnose([log]).root_cause
    assert r.pattern == "nccl.peer_closed" and r.rank is None and r.details["reported_by_rank"] == 0


def test_nccl_timeout_without_a_silent_rank_names_no_rank(write):
    log = write("t.log", "".join(TIMEOUT.format(r=r, s=r) for r in (0, 1)))
    r = diagnose([log]).root_cause
    assert r.category == "nccl" and r.rank is None and r.details["reported_by_rank"] == 0


def test_clean_run_is_no_failure(write):
    log = write(
        "ok.log",
        " [2026-12-02 10:31:13] iteration        1/       2 | consumed samples:           16 | lm loss: 6.39E+00 | number of nan iterations:   0 |\n"
        "[after training is done] datetime: 2026-12-02 10:31:20 \n",
    )
    d = diagnose([log])
    assert d.status == "no_failure_found" and d.root_cause is None


def test_per_rank_files_and_time_order_across_files(write, tmp_path):
    write("logs/job-rank0.err", "2026-12-02 10:00:05,000 INFO step 1\n" + TIMEOUT.format(r=0, s=30).replace("E1202", "E1202"))
    write(
        "logs/job-rank1.err",
        "2026-12-02 10:40:01,500 INFO step 9\n"
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 1, in step\n'
        "    loss.backward()\n"
        "AssertionError: num_layers should be divisible by pipeline_model_parallel_size\n",
    )
    d = diagnose([tmp_path / "logs"])
    r = d.root_cause
    assert r.category == "shape" and r.evidence.file.endswith("job-rank1.err")
    assert r.time.isoformat() == "2026-12-02T10:40:01.500000"
    assert {s.layout for s in d.sources} == {"per-rank"}


def test_torchrun_log_dir_tree_with_error_json(write, tmp_path):
    base = "logs/torchrun/abc_1/attempt_0"
    for lr in range(2):
        write(f"{base}/{lr}/stdout.log", "step 1\n")
        write(f"{base}/{lr}/stderr.log", "")
    write(
        f"{base}/1/stderr.log",
        "Traceback (most recent call last):\n"
        '  File "/w/pretrain.py", line 5, in <module>\n'
        "    import transformer_engine\n"
        "ModuleNotFoundError: No module named 'transformer_engine'\n",
    )
    err = {"message": {"message": "ModuleNotFoundError: No module named 'transformer_engine'",
                       "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"/w/pretrain.py\", line 5, in <module>\n    import transformer_engine\nModuleNotFoundError: No module named 'transformer_engine'\n",
                                     "timestamp": "1764671475"}}}
    write(f"{base}/1/error.json", json.dumps(err))
    write(
        "logs/console.log",
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-02_10:31:15\n  host      : gpu-node004\n"
        "  rank      : 9 (local_rank: 1)\n  exitcode  : 1 (pid: 4242)\n  error_file: /x/error.json\n",
    )
    d = diagnose([tmp_path / "logs"])
    r = d.root_cause
    assert (r.category, r.rank, r.local_rank, r.host) == ("import", 9, 1, "gpu-node004")
    layouts = {s.layout for s in d.sources}
    assert {"torchrun-logdir", "error-json", "merged"} <= layouts


def test_sigkill_without_traceback_is_host_oom(write):
    log = write(
        "k.log",
        "W1202 10:32:39.100000 8990 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 8998 closing signal SIGTERM\n"
        "E1202 10:32:39.335000 8990 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 2 (pid: 9000) of binary: /v/bin/python3\n",
    )
    r = diagnose([log]).root_cause
    assert r.category == "host_oom" and r.rank == 2 and r.local_rank == 2


def test_time_limit_is_slurm(write):
    log = write("s.err", "slurmstepd: error: *** STEP 4226796.2 ON eos0117 CANCELLED AT 2025-12-03T14:53:02 DUE TO TIME LIMIT ***\n")
    r = diagnose([log]).root_cause
    assert r.category == "slurm" and r.time.isoformat() == "2025-12-03T14:53:02"


def test_plain_cancel_after_a_task_exit_is_that_task(write):
    # srun cancels the step after a task exits non-zero (the shape of https://github.com/facebookresearch/deit/issues/102)
    log = write("s.err", "srun: error: gpu-a07: task 5: Exited with exit code 1\n"
                "srun: launch/slurm: _step_signal: Terminating StepId=43575862.0\n"
                "slurmstepd: error: *** STEP 43575862.0 ON gpu-a07 CANCELLED AT 2021-07-14T08:00:36 ***\n"
                "srun: error: gpu-a07: tasks 3,7: Killed\n")
    r = diagnose([log]).root_cause
    assert (r.pattern, r.category, r.rank, r.evidence.line) == ("launcher.srun_task_exit", "unknown", 5, 1)
    # without a task's exit before it, the banner stays the root (a user's scancel)
    log = write("t.err", "slurmstepd: error: *** STEP 43575862.0 ON gpu-a07 CANCELLED AT 2021-07-14T08:00:36 ***\n"
                "srun: error: gpu-a07: task 5: Exited with exit code 1\n")
    assert diagnose([log]).root_cause.pattern == "slurm.cancelled"


def test_a_launcher_notice_glued_to_an_exception_does_not_label_it(write):
    # terminal junk, then torchrun's SIGTERM notice on the line after the exception (the shape of
    # https://github.com/root0yang/BlindNet/issues/6)
    log = write("t.err", '  File "/w/torch/_utils.py", line 147, in _rebuild_tensor\n'
                "    return t.set_(storage.untyped(), storage_offset, size, stride)\n"
                "RuntimeError: Trying to resize storage that is not resizable\n"
                "^[[M`P>^[[M`>@WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 191334 closing signal SIGTERM\n"
                "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 191335) of binary: /usr/bin/python\n")
    r = diagnose([log]).root_cause
    assert (r.category, r.evidence.line) == ("python", 3)


def test_the_same_failure_on_several_ranks_is_the_root_cause_entrys(write):
    # torchrun's summary names rank 0; rank 1's copy of the same error reached the file first (the shape of
    # https://github.com/hiyouga/LlamaFactory/issues/4608)
    log = write("t.err", "Root Cause (first observed failure):\n[0]:\n  time      : 2024-06-28_16:52:43\n"
                "  host      : vision14\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 11965)\n"
                "[rank1]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:1! (when checking arg\n"
                "[rank0]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0!\n")
    assert diagnose([log]).root_cause.rank == 0


def test_gz_and_odd_bytes(tmp_path):
    import gzip

    p = tmp_path / "x.log.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(b"\xff\xfe junk\r\n[rank0]: Traceback (most recent call last):\r\n[rank0]:   File \"a.py\", line 1, in f\r\n"
                 b"[rank0]:     g()\r\n[rank0]: ModuleNotFoundError: No module named 'apex'\r\n")
    r = diagnose([p]).root_cause
    assert (r.category, r.rank, r.evidence.line) == ("import", 0, 5)


def test_launcher_only_failure_is_an_honest_unknown(write):
    log = write(
        "only-agent.log",
        "E1202 10:31:15.974000 7370 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 2 (pid: 7377) of binary: /v/bin/python3\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-02_10:31:15\n  host      : gpu-node002\n"
        "  rank      : 10 (local_rank: 2)\n  exitcode  : 1 (pid: 7377)\n  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n",
    )
    d = diagnose([log])
    r = d.root_cause
    assert d.status == "failed" and r.category == "unknown"
    assert (r.rank, r.host) == (10, "gpu-node002")
    assert "no_root_evidence" in r.details and "record" in " ".join(r.remediation)


def test_a_summary_alone_names_its_root_cause_entrys_exit_line(write):
    # the layout of https://github.com/NVIDIA/Isaac-GR00T/issues/279: the agent's traceback and summary, no worker output
    log = write(
        "summary.log",
        "    raise ChildFailedError(\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2025-07-22_09:54:13\n  host      : gpu\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 1061904)\n  error_file: <N/A>\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank, r.evidence.line, r.message) == ("unknown", 1, 10, "exitcode  : 1 (pid: 1061904)")
    # the worker killed (exit code -9, its `traceback : Signal 9` line cut off): SIGKILL's reading, host memory
    r = diagnose([write("killed.log", log.read_text().replace(": 1 (pid", ": -9 (pid"))]).root_cause
    assert (r.category, r.pattern, r.evidence.line) == ("host_oom", "host_oom.childfailed_sigkill", 10)


def test_a_ray_workers_last_words_under_its_death_report_are_the_cause(write):
    # the layout of https://github.com/vllm-project/vllm/issues/1846: Ray's driver reports the death, then the
    # worker's watchdog timeout reaches the log
    log = write(
        "ray.log",
        "2023-11-30 10:19:23,769 WARNING worker.py:2074 -- A worker died or was killed while executing a task by an "
        "unexpected system error. To troubleshoot the problem, check the logs for the dead worker.\n"
        "(RayWorker pid=1080651) [E ProcessGroupNCCL.cpp:474] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800567 milliseconds before timing out.\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.evidence.line) == ("nccl", 2)
    # alone, the death report is the worker killed for memory
    r = diagnose([write("alone.log", log.read_text().splitlines()[0] + "\n")]).root_cause
    assert r.category == "host_oom"
    # a generic traceback under it is the death's consequence, already set aside: the report stays the root
    r = diagnose([write("generic.log", log.read_text().splitlines()[0] + "\n"
                        "(RayWorker pid=10) Traceback (most recent call last):\n"
                        '(RayWorker pid=10)   File "/w/train.py", line 3, in <module>\n'
                        "(RayWorker pid=10) ValueError: the batch is empty\n")]).root_cause
    assert (r.pattern, r.evidence.line) == ("host_oom.ray_worker_system_error", 1)


def test_an_unnamed_nccl_warn_is_the_detail_only_just_above_a_generic_nccl_error(write):
    # the layout of https://github.com/vllm-project/vllm/issues/6201: the WARN says why the call failed
    warn = "host:116024:116024 [0] misc/strongstream.cc:53 NCCL WARN NCCL cannot be captured in a graph\n"
    exc = "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)\n"
    r = diagnose([write("near.log", warn + "host:116024:116024 [0] NCCL INFO enqueue.cc:1935 -> 5\n" + exc)]).root_cause
    assert (r.pattern, r.evidence.line) == ("fallback.nccl_warn", 1)
    # a WARN at start-up, far above the failure, is not its detail
    r = diagnose([write("far.log", warn + "step ok\n" * 40 + exc)]).root_cause
    assert (r.pattern, r.evidence.line) == ("nccl.error", 42)


def test_an_oom_kill_record_outranks_the_kill_report_before_it(write):
    log = write(
        "slurm-191.out",
        "/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py --epochs 400\n"
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may have "
        "been killed by the cgroup out-of-memory handler.\n",
    )
    r = diagnose([log]).root_cause
    assert r.category == "host_oom" and r.pattern == "host_oom.slurm_cgroup_oom"


def test_an_exception_detail_comes_with_its_exception_line(write):
    log = write(
        "nccl.log",
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 9, in <module>\n'
        "    dist.barrier()\n"
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1207, internal error, NCCL version 2.14.3\n"
        "ncclInternalError: Internal check failed.\n"
        "Last error:\n"
        "Bootstrap : no socket interface found\n",
    )
    r = diagnose([log]).root_cause
    assert r.pattern == "nccl.no_interface"
    assert r.message.startswith("torch.distributed.DistBackendError: NCCL error in:")
    assert r.message.endswith("Bootstrap : no socket interface found")


def test_a_traceback_introduced_by_a_colon_belongs_to_that_exception(write):
    log = write(
        "ray.log",
        "(TemporaryActor pid=318, ip=10.0.0.2) Traceback (most recent call last):\n"
        '(TemporaryActor pid=318, ip=10.0.0.2)   File "/ray/function_manager.py", line 589, in temporary_actor_method\n'
        "(TemporaryActor pid=318, ip=10.0.0.2)     raise RuntimeError(\n"
        "(TemporaryActor pid=318, ip=10.0.0.2) RuntimeError: The actor with name TrainTrainable failed to import on the worker:\n"
        "(TemporaryActor pid=318, ip=10.0.0.2) \n"
        "(TemporaryActor pid=318, ip=10.0.0.2) Traceback (most recent call last):\n"
        '(TemporaryActor pid=318, ip=10.0.0.2)   File "/ray/function_manager.py", line 628, in _load_actor_class\n'
        "(TemporaryActor pid=318, ip=10.0.0.2)     actor_class = pickle.loads(pickled_class)\n"
        "(TemporaryActor pid=318, ip=10.0.0.2) ModuleNotFoundError: No module named 'datasets_modules'\n",
    )
    r = diagnose([log]).root_cause
    assert r.category == "import" and r.text == "ModuleNotFoundError: No module named 'datasets_modules'"



@pytest.mark.parametrize("log,want", [
    # https://github.com/modelscope/ms-swift/issues/6107: the exception says only "unhandled system error";
    # NCCL's WARN names the call that failed
    ("[rank10]: Traceback (most recent call last):\n"
     '[rank10]:   File "/c/torch/distributed/distributed_c10d.py", line 2634, in _coalescing_manager\n'
     "[rank10]:     work = group.reduce_scatter_tensor_coalesced(outputs, inputs, reduce_opts)\n"
     "[rank10]: RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
     "\n"
     "[2025-10-13 10:12:54] iv-ydin754tmoxjd1twgixh:1458548:1480527 [0] misc/ibvwrap.cc:182 NCCL WARN Call to "
     "ibv_reg_mr_iova2 failed with error Invalid argument\n",
     ("nccl", "nccl.net_warn", 10, 6)),
    # https://github.com/modelscope/ms-swift/issues/8378's layout: the kernel prints its assertion with no rank,
    # before the traceback of the rank that hit it, which says only "device-side assert triggered"
    ("/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], "
     "thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.\n"
     "[rank5]: Traceback (most recent call last):\n"
     '[rank5]:   File "/w/rlhf.py", line 7, in <module>\n'
     "[rank5]:     torch.multinomial(probs, 1)\n"
     "[rank5]: RuntimeError: CUDA error: device-side assert triggered\n",
     ("nan", "nan.probabilities_nan", 5, 1)),
], ids=["nccl-warn", "kernel-assertion"])
def test_the_line_that_names_the_cause_is_the_root_with_the_reports_rank(write, log, want):
    r = diagnose([write("r.log", log)]).root_cause
    assert (r.category, r.pattern, r.rank, r.evidence.line) == want


def test_an_unranked_error_line_takes_the_rank_of_the_traceback_printed_under_it(write):
    # the layout of https://github.com/EleutherAI/gpt-neox/issues/1310: ROCm's runtime prints its fault with no
    # rank, then that process's traceback begins (here cut before its exception, as pasted)
    log = write(
        "rocm.log",
        "[rank0]: iteration 10 | loss 2.1\n"
        "Memory access fault by GPU node-9 (Agent handle: 0x7d5f990) on address 0x14a1cfe01000. Reason: Unknown.\n"
        "[rank6]: Traceback (most recent call last):\n"
        '[rank6]:   File "/w/train.py", line 9, in <module>\n'
        "[rank6]:     main()\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank, r.evidence.line) == ("cuda", 6, 2)
    assert r.details.get("rank_from", "").endswith("rocm.log:3")


def test_an_unranked_error_line_far_from_a_traceback_keeps_no_rank(write):
    log = write(
        "far.log",
        "Memory access fault by GPU node-9 (Agent handle: 0x7d5f990) on address 0x14a1cfe01000. Reason: Unknown.\n"
        + "".join(f"noise {i}\n" for i in range(20))
        + "[rank6]: Traceback (most recent call last):\n"
        '[rank6]:   File "/w/train.py", line 9, in <module>\n',
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank) == ("cuda", None)


def test_an_nccl_exception_line_and_its_detail_are_one_message(write):
    log = write(
        "nccl.log",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3\n"
        "Last error:\n"
        "node2: Net : Call to recv from 10.0.0.2<56843> failed : Connection refused\n",
    )
    r = diagnose([log]).root_cause
    assert r.category == "nccl" and r.evidence.line == 3
    assert r.message.startswith("RuntimeError: NCCL error in:") and r.message.endswith("Connection refused")


def test_a_native_crash_inside_a_cuda_library_is_a_cuda_failure(write):
    # UCX's crash handler, the layout of https://github.com/wzzheng/StreamVGGT/issues/10
    log = write(
        "fpe.log",
        "[host:176055:0:176055] Caught signal 8 (Floating point exception: integer divide by zero)\n"
        "==== backtrace (tid: 176055) ====\n"
        " 0 0x0000000000042520 __sigaction()  ???:0\n"
        " 1 0x00000000007b13a4 cublasLtMatmulAlgoGetHeuristic()  ???:0\n"
        " 2 0x00000000035af5a3 at::cuda::blas::gemm_and_bias<float>()  :0\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.pattern, r.evidence.line) == ("cuda", "cuda.library_crash", 1)
    assert r.details["crashed_in"].endswith("fpe.log:4")


def test_a_native_crash_elsewhere_stays_unexplained(write):
    log = write(
        "segv.log",
        "[host:17:0:17] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))\n"
        "==== backtrace (tid: 17) ====\n"
        " 0 0x0000000000042520 __sigaction()  ???:0\n"
        " 1 0x00000000001a2b3c my_extension_kernel()  ???:0\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.pattern) == ("unknown", "unknown.native_crash") and "crashed_in" not in r.details


def test_an_exception_name_with_its_message_on_the_next_line(write):
    log = write(
        "oom.log",
        "    return t.to(\n"
        "torch.OutOfMemoryError:\n"
        "CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 12.81 MiB is free.\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.evidence.line) == ("oom", 2)
    assert r.message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 130.00 MiB")


def test_a_rank_named_in_a_later_line_of_the_exception_message(write):
    log = write(
        "ddp.log",
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 9, in <module>\n'
        "    loss = model(x)\n"
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
        "indicates that your module has parameters that were not used in producing loss.\n"
        "Parameter indices which did not receive grad for rank 1: 578 579 580\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank) == ("config", 1) and r.details["rank_from"].endswith("ddp.log:5")


def test_a_library_error_under_the_jobs_own_data_code_is_read_by_that_code(write):
    # the layout of https://github.com/hpcaitech/Open-Sora/issues/665: pandas raises the KeyError for a CSV
    # column the job's sampler reads; the frames under the sampler's are pandas' own
    log = write(
        "keyerror.log",
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/w/opensora/datasets/sampler.py", line 22, in apply\n'
        '[rank0]:     data["height"],\n'
        '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/pandas/core/series.py", line 1040, in __getitem__\n'
        "[rank0]:     return self._get_value(key)\n"
        '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/pandas/core/series.py", line 1156, in _get_value\n'
        "[rank0]:     loc = self.index.get_loc(label)\n"
        '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/pandas/core/indexes/base.py", line 3798, in get_loc\n'
        "[rank0]:     raise KeyError(key) from err\n"
        "[rank0]: KeyError: 'height'\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.rank) == ("data", 0)


def test_nccls_unhandled_cuda_error_takes_its_detail(write):
    log = write(
        "nccl.log",
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Cuda failure 1 'invalid argument'\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.pattern, r.evidence.line) == ("nccl", "nccl.cuda_failure_in_setup", 4)
    assert r.message.startswith("torch.distributed.DistBackendError: NCCL error in:")


def test_a_named_failure_right_under_an_unnamed_cpp_abort_is_the_root(write):
    # the layout of https://github.com/pytorch/pytorch/issues/58155: two threads of one process abort
    log = write(
        "abort.log",
        "terminate called after throwing an instance of 'std::system_error'\n"
        "  what():  Transport endpoint is not connected\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: uncorrectable NVLink error detected during the execution\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.evidence.line) == ("cuda", 4)


def test_an_mpi_rank_killed_names_its_rank_behind_a_renamed_mpirun(write):
    log = write("mpi.log", "mpirun.real noticed that process rank 1 with PID 39 on node worker-1 exited on signal 9 (Killed).\n")
    r = diagnose([log]).root_cause
    assert (r.category, r.rank, r.host) == ("host_oom", 1, "worker-1")


@pytest.mark.parametrize("tail,want", [
    ("[2023-05-23 10:55:58,501] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 31621\n", "host_oom"),
    # a worker that exited 1 printed its error somewhere this log does not hold: no guess
    ("[2023-05-23 10:55:58,501] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 31621\n"
     "[2023-05-23 10:55:59,501] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
     "'--local_rank=1'] exits with return code = 1\n", "unknown"),
], ids=["silent", "exit-1"])
def test_deepspeeds_teardown_with_no_worker_error_is_a_silent_kill(write, tail, want):
    log = write("ds.log", "[2023-05-23 10:50:00,000] [INFO] [launch.py:228:main] process 31621 spawned with command: python train.py\n" + tail)
    r = diagnose([log]).root_cause
    assert r.category == want and r.confidence == "low"


def test_a_traceback_cut_before_its_exception_is_named_with_low_confidence(write):
    log = write(
        "cut.log",
        "waiting for master\n"
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/w/train.py", line 9, in <module>\n'
        "[rank2]:     main()\n"
        '[rank2]:   File "/w/train.py", line 5, in main\n'
        "[rank2]:     load()\n",
    )
    d = diagnose([log])
    r = d.root_cause
    assert d.status == "failed" and (r.category, r.pattern, r.confidence) == ("unknown", "unknown.traceback_cut", "low")
    assert (r.rank, r.evidence.line, r.frames[-1].line) == (2, 2, 5)


def test_a_generic_spawn_exception_after_ncclss_refused_connection_is_its_consequence(write):
    # the layout of https://github.com/pytorch/examples/issues/689
    log = write(
        "spawn.log",
        "id-d3:715:790 [1] include/socket.h:382 NCCL WARN Connect to 172.18.0.1<49273> failed : Connection refused\n"
        "Traceback (most recent call last):\n"
        '  File "dis_train.py", line 120, in main\n'
        "    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))\n"
        "Exception:\n"
        "\n"
        "-- Process 1 terminated with the following error:\n",
    )
    r = diagnose([log]).root_cause
    assert (r.category, r.evidence.line) == ("nccl", 1)


def test_an_exception_name_in_a_traceback_takes_its_message_from_the_next_line(write):
    log = write(
        "tb.log",
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 3, in <module>\n'
        "    check(batch)\n"
        "ValueError:\n"
        "the batch holds no samples\n",
    )
    r = diagnose([log]).root_cause
    assert (r.evidence.line, r.message) == (4, "ValueError: the batch holds no samples")


# torchrun 2.13's agent when a worker's error file is empty as it reads it: its logger prints the traceback under
# its glog header, then the agent itself dies with the same exception (from a real run, paths shortened)
REPLY_FILE_RACE = """\
Failed to parse reply file: /job/logs/1826668a_4g11ey8m/attempt_0/0/error.json
Traceback (most recent call last):
  File "/opt/py/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 123, in __post_init__
    self.error_file_data = json.load(fp)
                           ^^^^^^^^^^^^^
  File "/opt/py/lib/python3.11/json/__init__.py", line 293, in load
    return loads(fp.read(),
           ^^^^^^^^^^^^^^
  File "/opt/py/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/py/lib/python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/py/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
Traceback (most recent call last):
  File "/opt/py/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>
    main()
  File "/opt/py/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 974, in _capture_process_failures
    self._failures[local_rank] = ProcessFailure(
                                 ^^^^^^^^^^^^^^^
  File "<string>", line 7, in __init__
  File "/opt/py/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 123, in __post_init__
    self.error_file_data = json.load(fp)
                           ^^^^^^^^^^^^^
  File "/opt/py/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""


def test_torchrun_failing_to_read_an_error_file_is_not_the_root(write, tmp_path):
    """The agent's JSONDecodeError (a half-written error.json) is a symptom: the worker's own error is the root."""
    base = "logs/torchrun/abc_1/attempt_0"
    for lr in range(2):
        write(f"{base}/{lr}/stdout.log", "step 1\n")
        write(f"{base}/{lr}/error.json", "")
    write(f"{base}/0/stderr.log", "")
    write(
        f"{base}/1/stderr.log",
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/w/pretrain.py", line 5, in <module>\n'
        "[rank1]:     import transformer_engine\n"
        "[rank1]: ModuleNotFoundError: No module named 'transformer_engine'\n",
    )
    glog = "E1206 20:40:18.189000 4845 site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py:132] "
    head, tail = REPLY_FILE_RACE.split("Traceback (most recent call last):\n  File \"/opt/py/lib/python3.11/site-packages/torch/distributed/run.py", 1)
    write("logs/console.log", "".join(glog + ln + "\n" for ln in head.splitlines())
          + "Traceback (most recent call last):\n  File \"/opt/py/lib/python3.11/site-packages/torch/distributed/run.py" + tail)
    d = diagnose([tmp_path / "logs"])
    r = d.root_cause
    assert (r.category, r.rank) == ("import", 1), (r.category, r.message)
    assert {"launcher.reply_file_unread", "launcher.reply_file_parse_error"} <= {s.pattern for s in d.symptoms}


def test_a_caret_line_is_not_a_frames_source_line(write):
    """Where the source line is missing (a paste, a prefix the scan drops), the caret line under it is no code."""
    d = diagnose([write("x.log", 'Traceback (most recent call last):\n  File "/w/train.py", line 5, in <module>\n'
                                 "                 ^^^^^^^^^^^^^\nValueError: bad value\n")])
    assert d.root_cause.frames[-1].code is None


def test_a_cut_tracebacks_raise_line_is_not_the_report(write):
    """A log that starts inside a traceback: the exception line under `raise …` is the report, not the source line."""
    d = diagnose([write("x.log", '    raise Exception("Could not find the transformer layer class to wrap in the model.")\n'
                                 "Exception: Could not find the transformer layer class to wrap in the model.\n")])
    assert d.root_cause.message.startswith("Exception: Could not find")
    assert d.root_cause.evidence.line == 2


@pytest.mark.parametrize("job, line", [("3736", 3), ("9999", 1)])
def test_a_bare_slurm_cancel_takes_the_reason_its_own_job_gives_later(write, job, line):
    d = diagnose([write("x.log",
                        "slurmstepd: error: *** STEP 3736.0 ON n5146 CANCELLED AT 2021-03-15T17:50:23 ***\n"
                        "WARNING:submitit:Bypassing signal 15\n"
                        f"slurmstepd: error: *** JOB {job} ON n5146 CANCELLED AT 2021-03-15T18:00:46 DUE TO PREEMPTION ***\n")])
    assert d.root_cause.evidence.line == line


def test_rays_report_of_a_dead_worker_yields_to_the_workers_own_last_words(write):
    d = diagnose([write("x.log",
                        "2024-04-02 16:24:19,702\tWARNING worker.py:1986 -- A worker died or was killed while executing a task "
                        "by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker.\n"
                        "(imitationRunner pid=37880) cannot allocate memory for thread-local data: ABORT\n")])
    assert (d.root_cause.category, d.root_cause.evidence.line) == ("host_oom", 2)


@pytest.mark.parametrize("text, category, rank", [
    # rank 0's monitored barrier names the faulty rank; another rank's line only points at rank 0
    ("[E ProcessGroupGloo.cpp:138] Rank 3 successfully reached monitoredBarrier, but received errors while waiting for "
     "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
     "[E ProcessGroupGloo.cpp:138] [Rank 0]: Rank 2 failed to pass monitoredBarrier in 30000 ms\n", "nccl", 2),
    # a failed connection, and the one rank the launcher saw die
    ("terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
     "  what():  [enforce fail at gloo/transport/tcp/pair.cc:498] optval == 0. 111 vs 0. SO_ERROR: Connection refused\n"
     "mpirun noticed that process rank 1 with PID 29013 on node n2 exited on signal 6 (Aborted).\n", "nccl", 1),
    # a communication error of the only process
    ("WORLD_SIZE: 1,\n[E socket.cpp:472] [c10d] The server socket has failed to listen on any local network address.\n",
     "nccl", 0),
])
def test_the_rank_of_a_communication_failure(write, text, category, rank):
    d = diagnose([write("x.log", text)])
    assert (d.root_cause.category, d.root_cause.rank) == (category, rank)


def test_distributed_samplers_assertion_is_a_dataset_too_small(write):
    d = diagnose([write("x.log",
                        "Traceback (most recent call last):\n"
                        '  File "/venv/lib/python3.6/site-packages/torch/utils/data/sampler.py", line 208, in __iter__\n'
                        "    for idx in self.sampler:\n"
                        '  File "/venv/lib/python3.6/site-packages/torch/utils/data/distributed.py", line 80, in __iter__\n'
                        "    assert len(indices) == self.total_size\n"
                        "AssertionError\n")])
    assert d.root_cause.pattern == "data.too_few_samples_for_ranks"


@pytest.mark.parametrize("text, pattern, rank", [
    # a load_state_dict error whose detail line says what kind of mismatch it is
    ("RuntimeError: Error(s) in loading state_dict for Qwen2ForCausalLM:\n"
     "\tsize mismatch for model.layers.26.self_attn.k_proj.weight: copying a param with shape torch.Size([0]) from "
     "checkpoint, the shape in current model is torch.Size([512, 3584]).\n", "shape.size_mismatch", None),
    # Lightning's launcher names the child that died in its `[rank: N]` column (`rank=i + 1` in its
    # subprocess_script.py): a local rank, the global one where the logs show one node
    ("(_train_tune pid=22946) [rank: 1] Child process with PID 23026 terminated with code 1. Forcefully terminating "
     "all other processes to avoid zombies\n", "launcher.lightning_child_failed", 1),
    # a KeyError raised where a checkpoint is loaded
    ('Traceback (most recent call last):\n  File "/venv/site-packages/deepspeed/runtime/engine.py", line 2671, in '
     "_load_checkpoint\n    self.optimizer.load_state_dict(checkpoint['optimizer'])\nKeyError: 'optimizer'\n",
     "data.checkpoint_key_missing", None),
])
def test_details_that_name_the_kind_and_ranks_that_are_not_the_failed_ones(write, text, pattern, rank):
    d = diagnose([write("x.log", text)])
    assert (d.root_cause.pattern, d.root_cause.rank) == (pattern, rank)


SUMMARY = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-09-07_13:03:29
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 14689)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 14689
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-09-07_13:02:58
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 14690)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_a_straggler_killed_after_torchruns_root_cause_is_not_the_root(write):
    """torchrun SIGKILLed rank 0 half a minute after rank 1 exited with an error: rank 1's failure is named."""
    d = diagnose([write("x.log", SUMMARY)])
    assert (d.root_cause.category, d.root_cause.rank) == ("unknown", 1)
    assert d.root_cause.details.get("confidence") == "low" or d.root_cause.confidence == "low"
