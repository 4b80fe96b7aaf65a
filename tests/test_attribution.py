"""Rank attribution from every launcher prefix, and the timeline's timestamp formats."""
import pytest

from diagnose import diagnose

EXC = "ModuleNotFoundError: No module named 'apex'"


def _tb(prefix: str) -> str:
    return (f"{prefix}Traceback (most recent call last):\n{prefix}  File \"/w/t.py\", line 1, in <module>\n"
            f"{prefix}    import apex\n{prefix}{EXC}\n")


def test_mpirun_tag_is_global_rank(write):
    r = diagnose([write("m.log", _tb("[1,7]<stderr>:"))]).root_cause
    assert (r.rank, r.message) == (7, EXC)


def test_stacked_tee_and_rank(write):
    r = diagnose([write("t.log", _tb("[default3]:[rank11]: "))]).root_cause
    assert (r.rank, r.local_rank) == (11, 3)


def test_srun_label_with_tee_is_not_a_rank(write):
    r = diagnose([write("s.log", _tb(" 1: [default3]:"))]).root_cause
    assert (r.rank, r.local_rank) == (None, 3)


def test_srun_label_space_padded(write):
    r = diagnose([write("p.log", "10: step\n" + _tb(" 3: "))]).root_cause
    assert r.rank == 3


def test_ray_worker_prefix(write):
    r = diagnose([write("r.log", _tb("(WorkerDict pid=3490362) [rank1]:"))]).root_cause
    assert r.rank == 1 and r.text == EXC and r.message.endswith(EXC)


def test_nccl_host_prefix_gives_host(write):
    r = diagnose([write("n.log", "gpu-node007:77:190 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-node003<55012>\n")]).root_cause
    assert r.category == "nccl" and r.host == "gpu-node007"


def test_pg_rank_of_default_group_only(write):
    line0 = "[E1202 10:41:00.1 ProcessGroupNCCL.cpp:1504] [PG 0 (default_pg) Rank 6] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n"
    assert diagnose([write("a.log", line0)]).root_cause.rank == 6
    line2 = line0.replace("PG 0 (default_pg) Rank 6", "PG 2 Rank 1")
    assert diagnose([write("b.log", line2)]).root_cause.rank is None


def test_glog_year_comes_from_other_timestamps(write):
    log = (" [2025-12-31 23:59:00] iteration        1/      10 |\n"
           "[rank0]:[E1231 23:59:30.123456789 ProcessGroupNCCL.cpp:1504] [PG 0 (default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure\n")
    r = diagnose([write("y.log", log)]).root_cause
    assert r.time.isoformat() == "2025-12-31T23:59:30"  # the monotonic nanoseconds are dropped


def test_three_digit_glog_month(write):
    r = diagnose([write("j.log", "[rank2]:[E709 17:05:38.1 ProcessGroupNCCL.cpp:1] [PG 0 (default_pg) Rank 2] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure\n"
                                 " [2026-07-09 17:00:00] iteration 1/ 2 |\n")]).root_cause
    assert (r.time.month, r.time.day, r.time.hour) == (7, 9, 17)


def test_nccl_warn_timestamp_and_python_logging(write):
    log = ("\n[2025-01-01 12:00:07] gpu1:11:12 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.5<1> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n")
    r = diagnose([write("w.log", log)]).root_cause
    assert r.time.isoformat() == "2025-01-01T12:00:07" and r.host == "gpu1"


def test_untimed_line_takes_time_of_its_own_stream_only(write):
    log = ("[rank1]:[W1202 10:00:00.1 x.cpp:1] Warning: hello (function f)\n"
           "[rank0]:[W1202 11:00:00.1 x.cpp:1] Warning: hello (function f)\n"
           " [2026-12-02 11:30:00] iteration 1/ 2 |\n"
           + _tb("[rank1]: "))
    r = diagnose([write("o.log", log)]).root_cause
    assert r.rank == 1 and r.time.isoformat() == "2026-12-02T10:00:00"


def test_exception_group(write):
    log = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "/w/t.py", line 3, in <module>\n'
        "  |     raise ExceptionGroup(\"many\", [ValueError(1), KeyError(2)])\n"
        "  | ExceptionGroup: many (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | ValueError: 1\n"
        "    +---------------- 2 ----------------\n"
        "    | KeyError: 2\n"
        "    +------------------------------------\n"
    )
    r = diagnose([write("g.log", log)]).root_cause
    assert r.category == "python" and "ExceptionGroup: many" in r.message


def test_torchx_replica_prefix_and_megatron_rerun_rank(write):
    # https://github.com/NVIDIA-NeMo/Speech/issues/14348: NeMo-Run's `role/replica` before torchrun's prefixes
    log = ("i.pretrain/0 [default2]:[rank2]: RuntimeError: Rank 2, node dcfai-xe9680-01, device 2, iteration -1: Unexpected result nan "
           "(message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')\n")
    r = diagnose([write("x.log", log)]).root_cause
    assert (r.category, r.rank, r.local_rank) == ("nan", 2, 2)
    r = diagnose([write("y.log", log.split("[rank2]: ", 1)[1])]).root_cause
    assert (r.rank, r.host) == (2, "dcfai-xe9680-01")


def test_logged_traceback_continues_its_record_below_the_prefix(write):
    # https://github.com/facebookresearch/ParlAI/issues/4452: ParlAI logs the traceback as one record,
    # its `rank:  3 | time LEVEL |` column on the first line only
    log = ("rank:  3 | 2022-04-03 18:44:26,615 CRITICAL | Traceback (most recent call last):\n"
           '  File "/w/parlai/core/torch_agent.py", line 2314, in backward\n'
           "    self.optimizer.backward(loss, update_main_grads=False)\n"
           "RuntimeError: CUDA out of memory. Tried to allocate 21.06 GiB (GPU 3; 79.35 GiB total capacity; 63.19 GiB already allocated; 8.57 GiB free; 68.48 GiB reserved in total by PyTorch)\n"
           "\n"
           "During handling of the above exception, another exception occurred:\n")
    r = diagnose([write("p.log", log)]).root_cause
    assert (r.category, r.rank) == ("oom", 3)


def test_bare_lines_after_a_logged_traceback_are_not_the_record(write):
    # what follows the record's exception without a chain marker is another process's output: no rank
    log = ("rank:  3 | 2022-04-03 18:44:26,615 CRITICAL | Traceback (most recent call last):\n"
           '  File "/w/t.py", line 1, in <module>\n'
           "ValueError: one\n"
           "Traceback (most recent call last):\n"
           '  File "/w/u.py", line 2, in <module>\n'
           "RuntimeError: two\n")
    rank = dict(_attributed(write("q.log", log)).select("lineno", "rank").iter_rows())
    assert [rank[n] for n in range(1, 7)] == [3, 3, 3, None, None, None]


def _attributed(path):
    from diagnose.patterns import library
    from diagnose.read import attribute, collect, scan

    sources = collect.describe(collect.expand([str(path)])[0])
    kept, _ = scan.scan(sources, [p.regex for p in library.load(())])
    return attribute.attribute(kept, sources).sort("lineno")


def test_a_chained_traceback_stays_in_its_logged_record(write):
    log = ("rank:  1 | 2022-04-03 18:44:26,615 CRITICAL | Traceback (most recent call last):\n"
           '  File "/w/t.py", line 1, in <module>\n'
           "ValueError: one\n"
           "\n"
           "During handling of the above exception, another exception occurred:\n"
           "\n"
           "Traceback (most recent call last):\n"
           '  File "/w/t.py", line 3, in <module>\n'
           "RuntimeError: two\n"
           "rank:  0 | 2022-04-03 18:44:27,000 INFO | done\n")
    rank = dict(_attributed(write("c.log", log)).select("lineno", "rank").iter_rows())
    assert [rank[n] for n in (1, 2, 3, 5, 7, 8, 9, 10)] == [1] * 7 + [0]


_DS_FAIL = ("[2023-05-20 12:02:54,094] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 50686\n"
            "[2023-05-20 12:02:54,095] [ERROR] [launch.py:324:sigkill_handler] ['/data/anaconda3/envs/ljy_lmflow/bin/python3.9', "
            "'-u', 'main.py', '--local_rank=0'] exits with return code = -11\n")


def test_deepspeed_launcher_local_rank_of_the_only_node_shown(write):
    # https://github.com/deepspeedai/DeepSpeed/issues/3581: the failing command's --local_rank=0
    r = diagnose([write("d.log", _DS_FAIL)]).root_cause
    assert (r.rank, r.local_rank) == (0, 0)
    assert r.details["rank_from"] == "local rank 0: the logs show no other node"
    two = "[2020-12-24 16:25:13,902] [INFO] [launch.py:78:main] nnodes=2, num_local_procs=1, node_rank=0\n"
    r = diagnose([write("e.log", two + _DS_FAIL)]).root_cause
    assert (r.rank, r.local_rank) == (None, 0)


def test_deepspeed_launcher_quotes_the_last_workers_command_not_the_failed_one(write):
    # DeepSpeed's sigkill_handler prints the command of the worker it spawned last: `--local_rank=1` of two
    # workers says nothing of which failed (https://github.com/deepspeedai/DeepSpeed/issues/3581's layout)
    r = diagnose([write("d.log", _DS_FAIL.replace("--local_rank=0", "--local_rank=1"))]).root_cause
    assert (r.category, r.rank, r.local_rank) == ("unknown", None, None)


def test_deepspeed_runner_without_hostfile_is_one_node(write):
    # https://github.com/deepspeedai/DeepSpeed/issues/3581: the runner found no hostfile, so the job ran on this host
    log = ("[2023-05-20 12:01:30,733] [WARNING] [runner.py:190:fetch_hostfile] Unable to find hostfile, will proceed "
           "with training with local resources only.\n" + _DS_FAIL)
    r = diagnose([write("d.log", log)]).root_cause
    assert (r.rank, r.local_rank) == (0, 0)


def test_deepspeed_world_info_of_one_host_is_one_node(write):
    # https://github.com/deepspeedai/DeepSpeed/issues/618: the launcher's WORLD INFO DICT names each host and its slots
    one = "[2020-12-24 16:25:13,902] [INFO] [launch.py:78:main] WORLD INFO DICT: {'localhost': [0, 1]}\n"
    assert diagnose([write("w1.log", one + _DS_FAIL)]).root_cause.rank == 0
    two = "[2020-12-24 16:25:13,902] [INFO] [launch.py:78:main] WORLD INFO DICT: {'n1': [0, 1], 'n2': [0, 1]}\n"
    assert diagnose([write("w2.log", two + _DS_FAIL)]).root_cause.rank is None


_ELASTIC_FAIL = ("E0208 21:12:26.795000 1460 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
                 "(exitcode: 2) local_rank: 0 (pid: 1464) of binary: /root/miniconda3/bin/python\n")


def test_quoted_nnodes_one_is_one_node(write):
    # https://github.com/StarsfieldAI/R1-V/issues/42: `torchrun --nproc_per_node="1" --nnodes="1"` echoed by the shell
    log = ('root@c:~/R1-V# torchrun --nproc_per_node="1" \\\n    --nnodes="1" \\\n    src/open_r1/grpo.py\n\n'
           "/root/miniconda3/bin/python: can't open file '/root/R1-V/src/open_r1/grpo.py': [Errno 2] No such file or directory\n"
           + _ELASTIC_FAIL)
    assert diagnose([write("n.log", log)]).root_cause.rank == 0
    assert diagnose([write("m.log", log.replace('"1" \\\n    src', '"2" \\\n    src'))]).root_cause.rank is None


def test_spawn_process_index_is_a_local_rank(write):
    # https://github.com/resistzzz/Prompt4NR/issues/3: mp.spawn's index is the worker's local rank; no other node shown
    log = ("Traceback (most recent call last):\n"
           '  File "/e/torch/multiprocessing/spawn.py", line 146, in join\n'
           "    signal_name=name\n"
           "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL\n")
    r = diagnose([write("s.log", log)]).root_cause
    assert (r.rank, r.local_rank) == (1, 1)
    # more ranks than one node holds: the node is not assumed
    many = ("using world size: 16, data-parallel size: 16, context-parallel size: 1, tensor-model-parallel size: 1, "
            "pipeline-model-parallel size: 1\n")
    r = diagnose([write("t.log", many + log)]).root_cause
    assert (r.rank, r.local_rank) == (None, 1)


def test_rendezvous_of_one_agent_is_one_node(write):
    # https://github.com/meta-pytorch/torchx/pull/492: torchrun's rendezvous result, one field a line;
    # group_world_size is the number of agents (nodes)
    result = ("INFO:torch.distributed.elastic.agent.server.api:[] Rendezvous complete for workers. Result:\n"
              "  restart_count=0\n  master_addr=tristanr-arch2\n  master_port=48089\n  group_rank=0\n"
              "  group_world_size={n}\n  local_ranks=[0]\n  role_ranks=[0]\n  global_ranks=[0]\n"
              "  role_world_sizes=[2]\n  global_world_sizes=[2]\n\n")
    assert diagnose([write("a.log", result.format(n=1) + _ELASTIC_FAIL)]).root_cause.rank == 0
    assert diagnose([write("b.log", result.format(n=2) + _ELASTIC_FAIL)]).root_cause.rank is None


def test_spawn_names_the_worker_of_the_traceback_below(write):
    # https://github.com/youngwanLEE/centermask2/issues/9: spawn re-raises process 1's error with its traceback
    log = ("-- Process 1 terminated with the following error:\n"
           "Traceback (most recent call last):\n"
           '  File "/v/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 19, in _wrap\n'
           "    fn(i, *args)\n"
           '  File "/v/lib/python3.6/site-packages/detectron2/engine/train_loop.py", line 239, in _detect_anomaly\n'
           "    self.iter, loss_dict\n"
           "FloatingPointError: Loss became infinite or NaN at iteration=137!\n"
           "loss_dict = {'loss_mask': tensor(0.7000, device='cuda:1')}\n")
    r = diagnose([write("s.log", log)]).root_cause
    assert (r.category, r.rank, r.local_rank) == ("nan", 1, 1)
    local = dict(_attributed(write("t.log", log)).select("lineno", "local_rank").iter_rows())
    assert [local[n] for n in (2, 3, 7, 8)] == [1, 1, 1, None]


def test_one_node_maps_local_ranks_the_summary_does_not_name(write):
    # the summary names the ranks that failed (https://github.com/bghira/SimpleTuner/issues/333's layout);
    # on one node every other local rank is its global rank too
    log = ("torchrun --standalone --nproc_per_node=4 train.py\n"
           "[default3]:Traceback (most recent call last):\n"
           '[default3]:  File "/w/t.py", line 1, in <module>\n'
           "[default3]:ModuleNotFoundError: No module named 'apex'\n"
           "Root Cause (first observed failure):\n[0]:\n"
           "  time      : 2024-03-28_18:48:30\n  host      : DESKTOP-825HBJ6.\n  rank      : 0 (local_rank: 0)\n"
           "  exitcode  : -9 (pid: 4541)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 4541\n")
    r = diagnose([write("o.log", log)]).root_cause
    assert (r.category, r.rank, r.local_rank) == ("import", 3, 3)
    r = diagnose([write("p.log", log.replace("--standalone ", ""))]).root_cause
    assert (r.rank, r.local_rank) == (3, 3)
    assert r.details["rank_from"] == "local rank 3: the logs show no other node"
    r = diagnose([write("q.log", log.replace("--standalone ", "--nnodes=2 "))]).root_cause
    assert (r.rank, r.local_rank) == (None, 3)


@pytest.mark.parametrize("other", [
    "torchrun --nnodes=2 --nproc_per_node=8 train.py\n",
    "torchrun --nnodes 1:4 --nproc_per_node=8 train.py\n",
    "export NODE_RANK=1\n",
    "The following values were not passed to `accelerate launch` and had defaults used instead:\n"
    "\t`--num_machines` was set to a value of `2`\n",
    "[2020-12-24 16:25:13,902] [INFO] [launch.py:78:main] WORLD INFO DICT: {'n1': [0, 1], 'n2': [0, 1]}\n",
    "NNODES=2 NPROC_PER_NODE=8 bash train.sh\n",
    "torchrun --node-rank=1 --nproc-per-node=8 train.py\n",
    "['torchrun', '--nnodes', '2', '--nproc_per_node', '8', 'train.py']\n",
    # torchrun's launch config, logged at start
    "[2024-05-01 10:00:00,000] torch.distributed.launcher.api: [INFO]   min_nodes        : 2\n",
    # DeepSpeed launched per node without ssh: no hostfile here, but two nodes
    "Unable to find hostfile, will proceed with training with local resources only.\ntorchrun --nnodes=2 x.py\n",
    # NCCL's own lines from two hosts (https://github.com/NVIDIA/nccl/issues/1032's layout)
    "n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n"
    "n2:2:2 [0] NCCL INFO comm 0x2 rank 2 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n",
])
def test_a_local_rank_is_no_rank_where_the_logs_show_another_node(write, other):
    r = diagnose([write("n.log", other + _ELASTIC_FAIL)]).root_cause
    assert (r.rank, r.local_rank) == (None, 0)
    r = diagnose([write("o.log", _ELASTIC_FAIL)]).root_cause
    assert (r.rank, r.local_rank) == (0, 0)


# mp.spawn's parent when worker 1 raised: its traceback, then the worker's under the process index
_SPAWN_PARENT = ("Traceback (most recent call last):\n"
                 '  File "/e/torch/multiprocessing/spawn.py", line 150, in join\n'
                 "    raise ProcessRaisedException(msg, error_index, failed_process.pid)\n"
                 "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
                 "-- Process 1 terminated with the following error:\n"
                 "Traceback (most recent call last):\n")


def test_spawn_worker_inside_the_parents_traceback(write):
    # https://github.com/LSH9832/edgeyolo/issues/38: the parent's traceback ends in ProcessRaisedException, then
    # spawn prints the worker's own traceback under `-- Process 1 terminated with the following error:`
    log = (_SPAWN_PARENT +
           '  File "/e/torch/cuda/__init__.py", line 261, in set_device\n'
           "    torch._C._cuda_setDevice(device)\n"
           "RuntimeError: CUDA error: invalid device ordinal\n")
    r = diagnose([write("p.log", log)]).root_cause
    assert (r.category, r.rank, r.local_rank, r.evidence.line) == ("config", 1, 1, 10)


def test_a_spawn_workers_generic_exception_is_the_root_not_the_parents(write):
    # https://github.com/thuml/Transfer-Learning-Library/issues/134: no pattern names either exception; the worker's,
    # printed as the cause under the parent's, is the root, with the process index as its local rank
    log = (_SPAWN_PARENT +
           '  File "/w/lib/registry.py", line 51, in get\n'
           "    f = self[name]\n"
           "KeyError: 'night_split'\n")
    r = diagnose([write("p.log", log)]).root_cause
    assert (r.message, r.rank, r.local_rank, r.evidence.line) == ("KeyError: 'night_split'", 1, 1, 10)


def test_the_same_local_rank_in_two_files_is_two_nodes(tmp_path):
    tb = ("[default0]:Traceback (most recent call last):\n"
          '[default0]:  File "/w/t.py", line 1, in <module>\n'
          "[default0]:ModuleNotFoundError: No module named 'apex'\n")
    (tmp_path / "node0.log").write_text(tb)
    (tmp_path / "node1.log").write_text(tb)
    r = diagnose([tmp_path]).root_cause
    assert (r.rank, r.local_rank) == (None, 0)


def test_a_rank_named_in_the_text_is_not_said_to_come_from_a_local_rank(write):
    log = ("torchrun --nnodes=2 train.py\n"
           "[default3]:[E602 11:17:52.185053341 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank 3] "
           "Process group watchdog thread terminated with exception: NCCL error: unhandled system error\n")
    r = diagnose([write("t.log", log)]).root_cause
    assert r.rank == 3 and "rank_from" not in r.details


# NCCL_DEBUG=INFO's setup lines state each process's rank (the shape of https://github.com/horovod/horovod/issues/1122)
NCCL_INIT = "node1:{pid}:{tid} [{dev}] NCCL INFO comm 0x7f10243{pid} rank {rank} nranks {n} cudaDev {dev} nvmlDev {dev} - Init COMPLETE\n"
NCCL_WARN = "node1:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n"


def test_an_nccl_line_takes_the_rank_nccl_gave_its_process(write):
    log = write("a.err", "".join(NCCL_INIT.format(pid=2142 + r, tid=2550 + r, dev=r, rank=r, n=4) for r in range(4))
                + NCCL_WARN)
    r = diagnose([log]).root_cause
    assert r.rank == 1 and r.details["rank_from"].endswith("a.err:2")
    # old NCCL's ring lines say the same where no communicator line is
    log = write("b.err", "node1:2143:2561 [1] NCCL INFO Ring 00 : 1[1b000] -> 2[3d000] via direct shared memory\n"
                "node1:2142:2560 [0] NCCL INFO Ring 00 : 0[1a000] -> 1[1b000] via direct shared memory\n" + NCCL_WARN)
    assert diagnose([log]).root_cause.rank == 1


def test_ranks_of_subgroup_communicators_are_not_global(write):
    # two 2-rank communicators (a TP group each) in a 4-rank job: rank 1 is two processes' rank
    log = write("a.err", "".join(NCCL_INIT.format(pid=2142 + r, tid=2550 + r, dev=r, rank=r % 2, n=2) for r in range(4))
                + NCCL_WARN)
    assert diagnose([log]).root_cause.rank is None
