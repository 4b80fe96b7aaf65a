"""Lines that healthy runs print, and that look like the failures some rules name: they make no healthy log
failed, and they do not take the root from a log's real failure."""
import pytest

from diagnose import diagnose

_STEPS = "step 100 loss 2.31\nstep 200 loss 2.05\nTraining complete.\n"

HEALTHY = {
    # HCCL's log at WARNING level (ASCEND_SLOG_PRINT_TO_STDOUT=1): the level is peeled like any other
    "hccl_warning": (
        "[WARNING] HCCL(2717288,python3):2025-07-23-03:40:12.177.194 [adapter_hccp.cc:420] [2717288][InitHccp] hccp "
        "already init, no need to init again\n"
        "[WARNING] HCCL(2717288,python3):2025-07-23-03:40:12.281.001 [config.cc:312] [2717288]HCCL_CONNECT_TIMEOUT not "
        "set, use default 120s\n" + _STEPS
    ),
    # NCCL retrying a peer that starts late, then setting up its communicator
    "nccl_retries_then_init": (
        "node-2:31337:31400 [0] NCCL INFO socketPollConnect: connect to 10.0.0.1<52333> returned Connection refused, "
        "retrying (1/34) after sleep for 100 msec\n"
        "node-2:31337:31400 [0] NCCL INFO socketPollConnect: connect to 10.0.0.1<52333> returned Connection refused, "
        "retrying (2/34) after sleep for 200 msec\n"
        "node-2:31337:31400 [0] NCCL INFO Connected all rings\n"
        "node-2:31337:31400 [0] NCCL INFO comm 0x55d5c8a0 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n" + _STEPS
    ),
    # kubelet's readiness probe while a server loads its model
    "k8s_readiness_probe": (
        "Status:           Running\n"
        "  Warning  Unhealthy  8m (x12 over 10m)  kubelet            Readiness probe failed: Get "
        '"http://10.244.1.17:8000/health": dial tcp 10.244.1.17:8000: connect: connection refused\n'
    ),
    # older NCCL's retries, the same
    "nccl_old_retries_then_init": (
        "node-2:31337:31400 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"
        "node-2:31337:31400 [0] NCCL INFO Connected all rings\n"
        "node-2:31337:31400 [0] NCCL INFO comm 0x55d5c8a0 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n" + _STEPS
    ),
    # aws-ofi-nccl (under Neuron's collectives) probing its protocols where EFA is not used, and libfabric closing at a clean exit
    "ofi_probe_and_close": (
        "2025-Dec-08 10:00:01.000123 1234:1300 [0] nccl_net_ofi_create_plugin(...):213 CCOM WARN NET/OFI Failed to "
        "initialize sendrecv protocol\n" + _STEPS
        + "libfabric:3205148:1765657721::efa:fabric:efa_fabric_close():38<warn> Unable to close fabric: Device or "
        "resource busy\n"
    ),
    # an optional speed-up that falls back
    "optional_package_warning": (
        "UserWarning: Fused RMSNorm requires the triton package; falling back to the PyTorch implementation.\n" + _STEPS
    ),
    # HIP's normal reply to a query of work still running, logged at AMD_LOG_LEVEL=3
    "hip_not_ready": (
        ":3:hip_event.cpp            :308 : 2833412229 us: [pid:21833 tid:0x7f3b1c1e7740] hipEventQuery: Returned "
        "hipErrorNotReady : \n" + _STEPS
    ),
    # an error word in a line logged at warning level: the program goes on
    "wandb_retry_warning": (
        "wandb: WARNING Retrying request after error: HTTPSConnectionPool(host='api.wandb.ai', port=443): Read timed "
        "out. (read timeout=20)\n" + _STEPS
    ),
    "warning_level_error_word": (
        "2024-05-01 10:00:05 WARNING  Error: could not read .netrc, falling back to WANDB_API_KEY\n" + _STEPS
    ),
    # c10d's client trying localhost's IPv6 address first (errno 99), then connecting over IPv4
    "c10d_client_errno_99": (
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
        "assign requested address).\n" + _STEPS
    ),
    # torch 1.0's warning at start-up on Turing GPUs with cudnn.benchmark: the run goes on
    "thc_error_11_at_start_up": (
        "=> creating model 'resnet50'\n"
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=663 error=11 : invalid argument\n" + _STEPS
    ),
    # TensorFlow on a node without a GPU, at error level, then training on the CPU
    "tf_cuinit_without_gpu": (
        "2024-04-02 08:00:01.234567: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to "
        "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n" + _STEPS
    ),
    # pytest's live log of a passing test, at error level
    "pytest_live_log_error": (
        "ERROR    trainer.retry:retry.py:41 step failed, retrying (attempt 1/3)\n"
        "PASSED                                                                   [100%]\n" + _STEPS
    ),
    # an optional import skipped at warning level
    "optional_import_skipped": "WARNING:root:No module named 'apex'\nINFO:__main__:apex not available\n" + _STEPS,
    # torch.compile with suppress_errors: dynamo falls back to eager and the run goes on
    "dynamo_wont_convert": (
        "[rank0]:W0612 10:00:00.000000 1234 torch/_dynamo/convert_frame.py:1009] WON'T CONVERT forward /workspace/"
        "model.py line 88 due to: Failed running call_function <built-in function getitem>(*(FakeTensor(..., "
        "device='cuda:0', size=(8, 512)), FakeTensor(..., device='cuda:0', size=(4,), dtype=torch.int64)), **{}):\n"
        + _STEPS
    ),
    # the UCC backend's start-up report
    "ucc_info": (
        "[I ProcessGroupUCC.cpp:412] [Rank 0][ProcessGroupUCC-0][INIT][INFO] Successfully read and set "
        "ProcessGroupUCC env. variables as followings UCX_TLS=rc,cuda_copy TORCH_UCC_BLOCKING_WAIT=none\n" + _STEPS
    ),
    # a MemoryError caught and worked around, at warning level
    "memory_error_worked_around": (
        "[2024-05-01 10:00:10] WARNING: tokenizing with 64 workers raised MemoryError: falling back to 8 workers\n"
        + _STEPS
    ),
    # a status code in an info-level record (a checkpoint not there yet; a runtime retrying its device)
    "status_code_at_info_level": (
        "2023-10-27 14:18:44.000000: I tensorflow/core/platform/cloud/gcs_file_system.cc:100] Status: NOT_FOUND: "
        "gs://bucket/ckpt/checkpoint; will start from scratch\n"
        "I0000 00:00:1714557600.000000  12345 tpu_initializer.cc:100] Attempt (1) UNAVAILABLE: TPU driver busy, "
        "retrying in 5s\n" + _STEPS
    ),
    # a trainer that skips a batch whose loss is NaN, and one that goes back to its last checkpoint
    "nan_loss_skipped": (
        "WARNING: NaN loss detected, skipping this batch\n"
        "[2024-05-01 10:00:00] INFO - nan loss detected at step 101 (count=1/5), reverting to last checkpoint\n" + _STEPS
    ),
    # DeepEP's timeout as configured, not as reached
    "deepep_timeout_setting": "DeepEP dispatch timeout set to 100 s\n" + _STEPS,
    # TensorFlow and JAX at start-up, at error level: a CUDA library's factory registered twice
    "cuda_factory_registered_twice": (
        "E0000 00:00:1712345678.123456   12345 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to "
        "register factory for plugin cuDNN when one has already been registered\n" + _STEPS
    ),
    # NCCL tracing an error code it recovered from, in a process that then joined its communicator
    "nccl_error_trace_then_init": (
        "node-2:31337:31400 [0] NCCL INFO misc/socket.cc:567 -> 2\n"
        "node-2:31337:31400 [0] NCCL INFO Connected all rings\n"
        "node-2:31337:31400 [0] NCCL INFO comm 0x55d5c8a0 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n" + _STEPS
    ),
    # XLA's rendezvous warning, then its word that the wait ended (https://github.com/aklein4/nc-jax-demo, its README's log)
    "xla_rendezvous_slow_then_unstuck": (
        "E0915 03:15:02.160012     395 rendezvous.cc:108] [id=6] This thread has been waiting for `[1] [rank=1] "
        "[run_id=2012504188] Initialize clique: devices=8:[0,1,2,3,4,5,6,7]; local_participants=8; communication_id=0; "
        "incarnations=[]` for 10 seconds and may be stuck. All 8 threads joined the rendezvous, however the leader has "
        "not marked the rendezvous as completed. Leader can be deadlocked inside the rendezvous callback.\n"
        "E0915 03:15:25.101290     395 rendezvous.cc:130] [id=6] This thread is unstuck waiting for `[1] [rank=1] "
        "[run_id=2012504188] Initialize clique: devices=8:[0,1,2,3,4,5,6,7]; local_participants=8; communication_id=0; "
        "incarnations=[]` after 32.941385531s. All threads joined the rendezvous on time however the leader took long "
        "time to complete it. Warning above was a false-positive. Perhaps the timeout is too short.\n"
        "2026-09-15 03:15:25,197 step=1 loss=1.475494 seconds=40.485538\n" + _STEPS
    ),
    # torchvision's notice at import, printed bare: a `Failed to …:` is a root only where the log ends on it
    "failed_to_at_start_up": (
        "Failed to load image Python extension: libc10_cuda.so: cannot open shared object file: No such file or "
        "directory\n" + _STEPS
    ),
    # an exception a program caught and logged as it fell back, a config's comment naming a DeepSpeed field, an
    # optional file's OSError printed, notices of a missing file the program goes on without (a second read's logs)
    "caught_and_went_on": (
        "WARNING:__main__:flash-attn unavailable, using sdpa instead (RuntimeError: FlashAttention is only supported "
        "on sm80 and newer; found sm75)\n"
        "  reduce_bucket_size: 5.0e+8   # also the default for stage3_prefetch_bucket_size\n"
        "[Errno 2] No such file or directory: 'configs/local_overrides.yaml'\n"
        "=> no local overrides, using defaults\n"
        "2024-06-11 09:00:04 | INFO | train | Could not find checkpoint at /scratch/runs/ft-07/last.pt, starting from "
        "scratch\n" + _STEPS
    ),
    # NCCL's recovered error traces in a container (its hex id for a host), and at teardown where only subgroups'
    # communicators were printed (Megatron's tensor-parallel groups)
    "nccl_traces_container_and_teardown": (
        "4f9c2e7a1b3d:41234:41302 [1] NCCL INFO misc/socket.cc:567 -> 2\n"
        "4f9c2e7a1b3d:41234:41302 [1] NCCL INFO comm 0x5612f4b0a1c0 rank 1 nranks 2 cudaDev 1 busId 2a000 - Init COMPLETE\n"
        "using world size: 4, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 2, "
        "pipeline-model-parallel size: 1\n"
        "> initializing torch distributed ...\n"
        "node01:8812:8870 [0] NCCL INFO comm 0x55aa00 rank 0 nranks 2 cudaDev 0 busId 18000 - Init COMPLETE\n"
        + _STEPS +
        "node01:8812:8890 [0] NCCL INFO misc/socket.cc:47 -> 3\n"
        "node01:8812:8890 [0] NCCL INFO proxy.cc:1374 -> 3\n"
        "node01:8812:8812 [0] NCCL INFO comm 0x55aa00 rank 0 nranks 2 cudaDev 0 busId 18000 - Destroy COMPLETE\n"
    ),
    # a DeepSpeed config that names the field, and a library's notice of what it supports
    "deepspeed_config_dump_and_support_notice": (
        '  "stage3_prefetch_bucket_size": "auto",\n'
        "INFO: only bf16 and fp32 are supported by the fused kernel; using the unfused path\n" + _STEPS
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_routine_line_makes_no_healthy_log_failed(write, name):
    d = diagnose([write(f"{name}.log", HEALTHY[name])])
    assert d.status == "no_failure_found", d.root_cause


def test_nccl_retries_at_start_up_do_not_take_a_later_failures_root(write):
    log = write("job.log", HEALTHY["nccl_retries_then_init"]
                + "[2024-05-01 10:00:00] FATAL: checkpoint writer failed: disk quota exceeded on /scratch/ckpt\n")
    root = diagnose([log]).root_cause
    assert root is not None and "disk quota exceeded" in root.message


def test_nccl_retries_that_end_the_log_are_named_with_low_confidence(write):
    line = ("node-2:31337:31400 [0] NCCL INFO socketPollConnect: connect to 10.0.0.1<52333> returned Connection "
            "refused, retrying ({n}/34) after sleep for {ms} msec\n")
    log = write("job.log", "".join(line.format(n=n, ms=100 * n) for n in range(18, 22)))
    root = diagnose([log]).root_cause
    assert root.category == "nccl" and root.pattern == "fallback.nccl_connect_retry" and root.confidence == "low"


def test_a_jax_barrier_other_than_start_up_is_a_task_that_did_not_arrive(write):
    log = write("job.log", (
        "Traceback (most recent call last):\n"
        '  File "/home/user/train.py", line 260, in main\n'
        "    mngr.save(step, args=ocp.args.StandardSave(state))\n"
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "orbax_checkpoint_save_5000::Finalize. Timed out task names:\n"
        "/job:jax_worker/replica:0/task:5\n"
    ))
    root = diagnose([log]).root_cause
    assert root.pattern == "nccl.monitored_barrier", root.pattern


def test_open_mpis_pmix_lock_message_does_not_take_a_later_failures_root(write):
    # Open MPI 4 with PMIx 3 prints it in runs that succeed
    log = write("job.log", "[gpu001:438533] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168\n"
                "[1,1]<stderr>:Traceback (most recent call last):\n"
                '[1,1]<stderr>:  File "train.py", line 3, in <module>\n'
                "[1,1]<stderr>:KeyError: 'learning_rate'\n")
    root = diagnose([log]).root_cause
    assert root.pattern == "python.exception" and root.rank == 1


def test_a_missing_conda_before_the_job_runs_is_no_root(write):
    # the job script's `conda` is not there, the environment is activated another way and the job runs until the
    # cgroup kills it: only a missing launcher is a root
    log = write("slurm-4412871.out", (
        "/var/spool/slurmd/job4412871/slurm_script: line 14: conda: command not found\n"
        "Activated environment /scratch/u123/envs/llm (python 3.10.13)\n"
        "{'loss': 1.8432, 'learning_rate': 1.9e-05, 'epoch': 0.02}\n"
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4412871.batch. Some of the step tasks have been OOM Killed.\n"
    ))
    assert diagnose([log]).root_cause.category == "host_oom"


def test_another_ranks_warning_among_a_tracebacks_frames_does_not_take_its_root(write):
    # a merged log: rank 1's c10d warning lands between rank 0's frames; the ValueError stays the root
    log = write("job.log", (
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 88, in <module>\n'
        "    main(cfg)\n"
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
        "assign requested address).\n"
        '  File "/workspace/train.py", line 61, in main\n'
        "    raise ValueError(f\"unknown scheduler {cfg.scheduler}\")\n"
        "ValueError: unknown scheduler cosine_warm\n"
    ))
    root = diagnose([log]).root_cause
    assert root.message.startswith("ValueError: unknown scheduler")


def test_mpichs_error_stack_is_no_crash_frame(write):
    # MPICH names the failed call with its arguments (addresses among them): no backtrace frame of a crash in MPI
    log = write("job.log", (
        "[gpu-07:12345:0:12345] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x10)\n"
        "==== backtrace (tid:  12345) ====\n"
        " 0  /opt/app/lib/libsolver.so(solve_block+0x44) [0x7f00aa001234]\n"
        "Abort(1) on node 1: Fatal error in PMPI_Allreduce: Other MPI error, error stack:\n"
        "MPI_Allreduce(sbuf=0x7ffd5c3a1b40, rbuf=0x7ffd5c3a1b48, count=1, datatype=MPI_DOUBLE, op=MPI_SUM, "
        "comm=MPI_COMM_WORLD) failed\n"
    ))
    assert diagnose([log]).root_cause.pattern == "unknown.native_crash"


def test_a_relayed_timeout_names_no_rank(write):
    # only node 0's log: rank 0 relays the flight recorder's signal that rank 13's collective timed out
    log = write("node0.log", (
        "[rank0]: step 1260 | loss 2.3120 | lr 2.9e-04\n"
        "[rank0]:[E501 10:12:54.817424543 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a "
        "dump signal due to a collective timeout from  rank 13 and we will try our best to dump the debug info.\n"
        "E0501 10:22:57.300000 8812 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) "
        "local_rank: 0 (pid: 8819) of binary: /usr/bin/python3\n"
    ))
    root = diagnose([log]).root_cause
    assert root.category == "nccl" and root.rank is None


def test_an_exception_no_pattern_names_takes_the_kind_its_words_name(write):
    log = write("job.log", _STEPS + "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                "    main()\nRuntimeError: ProcessGroupGloo lost its peer while reducing bucket 3\n")
    root = diagnose([log]).root_cause
    assert (root.category, root.pattern, root.details.get("category_from")) == ("nccl", "python.exception", "nccl_library")
    plain = diagnose([write("other.log", _STEPS + "RuntimeError: the reducer lost bucket 3\n")]).root_cause
    assert plain.category == "python" and "category_from" not in plain.details


def test_a_warning_before_a_real_failure_does_not_take_its_root(write):
    log = write("job.log", "WARNING:root:No module named 'apex'\n" + _STEPS + "[rank3]: Traceback (most recent call last):\n"
                "[rank3]:   File \"train.py\", line 9, in <module>\n[rank3]:     batch = next(it)['labels']\n"
                "[rank3]: KeyError: 'labels'\n")
    root = diagnose([log]).root_cause
    assert (root.rank, root.message) == (3, "KeyError: 'labels'")


@pytest.mark.parametrize("line", [
    # glog's fatal header (https://github.com/PaddlePaddle/Paddle/issues/18575), and absl's (seconds since the epoch)
    "F0710 13:11:24.494246 34492 grpc_client.cc:408] GetRPC name:[emb_query.block0], ep:[10.90.104.41:62003], "
    "status:[-1] meets grpc error, error_code:14 error_message:Socket closed error_details:",
    "F0000 00:00:1718186460.123456   4242 pjrt_client.cc:99] the coordination service went away",
    # Python logging's default format at the error level, its level peeled with the logger's name
    # (https://github.com/EleutherAI/gpt-neox/issues/757)
    "ERROR:root:NeoXArgs.calculate_derived() (global_num_gpus / pp_size) / mp_size [(4 / 4) / 2",
])
def test_a_fatal_line_no_pattern_names_is_named_with_low_confidence(write, line):
    root = diagnose([write("job.log", _STEPS + line + "\n")]).root_cause
    assert root is not None and root.pattern == "fallback.error_line" and root.confidence == "low"


def test_a_spawned_workers_abort_does_not_take_the_root_of_its_own_error(write):
    """mp.spawn's parent reports a worker's SIGABRT after the worker's own error: that error is the root."""
    d = diagnose([write("spawn.log", (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: out of memory\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 200, in <module>\n'
        "    mp.spawn(main, nprocs=2)\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 158, in join\n'
        "    raise ProcessExitedException(\n"
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGABRT\n"
    ))])
    assert d.root_cause.category == "oom", d.root_cause


def test_an_info_level_status_does_not_take_a_later_failures_root(write):
    d = diagnose([write("xla.log", (
        "2024-05-01 10:00:01.000000: I tensorflow/core/platform/cloud/gcs_file_system.cc:100] Status: NOT_FOUND: "
        "gs://bucket/ckpt/checkpoint; will start from scratch\n"
        "step 10 loss 2.0\n"
        "2024-05-01 10:10:00.000000: E tensorflow/compiler/xla/xla_client/xla_util.cc:90]   (0) INTERNAL: the device "
        "program aborted\n"
    ))])
    assert "(0) INTERNAL" in d.root_cause.message, d.root_cause


@pytest.mark.parametrize("line", [
    "INFO:root:NeoXArgs.calculate_derived() Total number of GPUs determined to be: 4",
    # a logger's error level on lines of runs that went on: a notebook name, a retried download, a skipped sample
    "ERROR:wandb.jupyter:Failed to detect the name of this notebook, you can set it manually with the "
    "WANDB_NOTEBOOK_NAME environment variable to enable code saving.",
    "2024-05-01 10:00:05,123 - ERROR - huggingface_hub.utils._http - HTTP Error 429 thrown while requesting HEAD "
    "https://huggingface.co/x/resolve/main/config.json, retrying in 1s",
    "2024-05-01 10:00:05.123 | ERROR    | utils.metrics:log_eval:55 - eval sample 17 produced empty output, skipping",
])
def test_a_logger_line_in_a_run_that_went_on_is_no_error(write, line):
    assert diagnose([write("job.log", line + "\n" + _STEPS)]).root_cause is None


def test_a_benign_error_level_line_does_not_take_a_launchers_failure_report(write):
    d = diagnose([write("job.log", (
        "2024-05-01 10:00:05 | ERROR | data.loader:_fetch:88 - sample 4412 unreadable, skipping\n" + _STEPS
        + "srun: error: node12: task 3: Exited with exit code 1\n"))])
    assert d.root_cause.pattern == "launcher.srun_task_exit", d.root_cause


def test_a_process_that_says_it_is_alone_is_rank_0(write):
    """LAVIS's init prints `(rank 0, world 1)`: one process in all, whatever error it then meets."""
    d = diagnose([write("job.log", (
        "| distributed init (rank 0, world 1): env://\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 85, in main\n'
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR "
        "expected, but not set\n"
    ))])
    assert d.root_cause.rank == 0 and d.root_cause.category == "config", d.root_cause


# mp.spawn's report of a worker killed by SIGKILL, which says nothing of who killed it
_SPAWN_SIGKILL = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 98, in <module>\n'
    "    mp.spawn(main, nprocs=world_size)\n"
    "torch.multiprocessing.spawn.ProcessExitedException: process {} terminated with signal SIGKILL\n")


def test_the_kernels_oom_record_names_a_sigkill_it_explains(tmp_path):
    """mp.spawn's SIGKILL report says only that a process was killed; dmesg beside the log says the kernel's OOM killer
    did it (https://github.com/SteveImmanuel/SegGPT-FineTune/issues/2): the record is the root."""
    (tmp_path / "job.log").write_text(_SPAWN_SIGKILL.format(0))
    (tmp_path / "dmesg.log").write_text(
        "[Wed Jun 19 04:01:48 2024] Out of memory: Killed process 1906131 (python) total-vm:279474328kB, "
        "anon-rss:231214868kB, file-rss:73844kB\n")
    root = diagnose([tmp_path]).root_cause
    assert root.pattern == "host_oom.kernel_oom_killer" and root.evidence.file.endswith("dmesg.log"), root


def test_an_oom_record_of_another_process_does_not_explain_a_sigkill(tmp_path):
    """Another process's kill (a notebook server's), days before, is no cause of this one."""
    (tmp_path / "job.log").write_text(_SPAWN_SIGKILL.format(2))
    (tmp_path / "dmesg.log").write_text(
        "[Mon Jun 10 11:22:05 2024] Out of memory: Killed process 88231 (jupyter-lab) total-vm:9474328kB\n")
    assert diagnose([tmp_path]).root_cause.pattern == "host_oom.torchrun_sigkill"


def test_an_oom_record_of_another_pid_does_not_explain_torchruns_kill_report(tmp_path):
    (tmp_path / "job.log").write_text(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2024-06-19_04:01:48\n  host      : node1\n"
        "  rank      : 3 (local_rank: 3)\n  exitcode  : -9 (pid: 1906131)\n  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 1906131\n")
    (tmp_path / "dmesg.log").write_text(
        "[Mon Jun 10 11:22:05 2024] Out of memory: Killed process 88231 (python) total-vm:9474328kB\n")
    root = diagnose([tmp_path]).root_cause
    assert root.pattern != "host_oom.kernel_oom_killer" and root.rank == 3, root


def test_rpc_names_the_worker_whose_exception_it_re_raises(write):
    d = diagnose([write("job.log", (
        "On WorkerInfo(id=2, name=trainer2):\n"
        "RuntimeError('CUDA error: invalid device ordinal\\nCUDA kernel errors might be asynchronously reported')\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/torch/distributed/rpc/internal.py", line 204, in _run_function\n'
    ))])
    assert d.root_cause.rank == 2 and d.root_cause.category == "config", d.root_cause


def test_a_ucx_error_names_the_generic_exception_mpi_raises_after_it(write):
    """UCX's own error, then the MPI call's exception that says only `MPI_ERR_OTHER`
    (https://github.com/mlcommons/training_results_v3.0/issues/5): the transport's error is the root."""
    d = diagnose([write("job.log", (
        "[1695144496.484294] [hpci5201:103648:0]       ib_device.c:1250 UCX  ERROR   ibv_create_ah(dlid=49152 sl=0 "
        "port=1) for UD verbs connect on bnxt_re0 failed: Connection timed out\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        "    comm.bcast(x)\n"
        "RuntimeError: Runtime error: MPI_ERR_OTHER: known error not in list\n"
    ))])
    assert d.root_cause.pattern == "nccl.ucx_error", d.root_cause


# torch 2.3's cuDNN v8 API warns and goes on (pytorch/pytorch#121834)
_CUDNN_WARNING = (
    "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/conv.py:456: UserWarning: Plan failed with a "
    "cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: "
    "CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)\n"
    "  return F.conv2d(input, weight, bias, self.stride,\n"
)
# dynamo gives up compiling a frame and runs it uncompiled, its traceback at glog's warning level
_W = "W0711 17:08:34.348000 76404 site-packages/torch/_dynamo/convert_frame.py:1280] "
_WONT_CONVERT = "".join(_W + line + "\n" for line in (
    "WON'T CONVERT forward /work/model.py line 209", "due to:", "Traceback (most recent call last):",
    '  File "/env/site-packages/torch/_dynamo/convert_frame.py", line 1213, in __call__',
    "    result = self._inner_convert(",
    "torch._dynamo.exc.TorchRuntimeError: Failed running call_function <built-in method squeeze>(*(FakeTensor(..., "
    "size=(4,)),), **{'dim': 1}):", "Dimension out of range (expected to be in range of [-1, 0], but got 1)"))
# the same at torch 2.0's logger format, the inner exception on the line under the one that wraps it
_L = "[2023-07-31 11:08:28,980] torch._dynamo.convert_frame: [WARNING] "
_WONT_CONVERT_LOGGER = "".join(_L + line + "\n" for line in (
    "WON'T CONVERT forward model.py line 12", "due to:", "Traceback (most recent call last):",
    '  File "/data/pytorch/torch/_dynamo/output_graph.py", line 973, in call_user_compiler',
    "    compiled_fn = compiler_fn(gm, self.example_inputs())",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)"))
# DeepSpeed accepts a CUDA minor-version mismatch and goes on (its op_builder; deepspeedai/DeepSpeed#3436)
_DS_ACCEPTED = (" [WARNING]  DeepSpeed Op Builder: Installed CUDA version 11.8 does not match the version torch was "
                "compiled with 11.7 but since the APIs are compatible, accepting this combination\n")


@pytest.mark.parametrize("text", [_CUDNN_WARNING, _WONT_CONVERT, _WONT_CONVERT_LOGGER, _DS_ACCEPTED],
                         ids=["cudnn_plan_warning", "wont_convert_glog", "wont_convert_logger", "deepspeed_cuda_minor"])
def test_a_failures_words_in_a_warning_make_no_healthy_log_failed(write, text):
    assert diagnose([write("job.log", "step 1 loss 2.5\n" + text + _STEPS)]).root_cause is None


def test_a_warning_does_not_take_the_root_of_the_failure_after_it(write):
    # (https://github.com/2noise/ChatTTS/issues/657: the warning, then the script's own error)
    root = diagnose([write("job.log", _CUDNN_WARNING + (
        "Traceback (most recent call last):\n"
        '  File "Chattts_adv.py", line 34, in <module>\n'
        '    torchaudio.save("out.wav", torch.from_numpy(audio[0]), 24000)\n'
        "ValueError: Expected 2D Tensor, got 1D.\n"))]).root_cause
    assert root.message == "ValueError: Expected 2D Tensor, got 1D.", root


def test_a_warning_names_a_failure_that_nothing_else_explains_with_low_confidence(write):
    """A traceback cut before its exception, and above it a warning that names a kind: the warning, said softly."""
    # (joblib's probe of /dev/shm, then mp.spawn's SimpleQueue failing on the same semaphore: https://github.com/Plachtaa/VITS-fast-fine-tuning/issues/397)
    root = diagnose([write("job.log", (
        "/opt/conda/lib/python3.8/site-packages/joblib/_multiprocessing_helpers.py:46: UserWarning: [Errno 28] No space "
        "left on device.  joblib will operate in serial mode\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 55, in main\n'
        "    mp.spawn(run, nprocs=n_gpus)\n"
        '  File "/opt/conda/lib/python3.8/multiprocessing/queues.py", line 336, in __init__\n'
        "    self._rlock = ctx.Lock()\n"))]).root_cause
    assert (root.category, root.confidence) == ("host_oom", "low"), root


def test_a_routine_warning_does_not_take_a_launchers_report(write):
    """Only srun's word that a task failed: the warning every process prints is no root, nor does it take the rank."""
    root = diagnose([write("job.log", _CUDNN_WARNING + "srun: error: gpu-node-07: task 3: Exited with exit code 1\n")]).root_cause
    assert root.pattern == "launcher.srun_task_exit", root


def test_a_failure_after_a_warning_level_traceback_is_not_the_warnings(write):
    """The lines after dynamo's warning-level traceback are its own only at its level: slurmstepd's are not."""
    root = diagnose([write("job.log", _WONT_CONVERT + (
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your processes may have been killed "
        "by the cgroup out-of-memory handler.\n"))]).root_cause
    assert root.pattern == "host_oom.slurm_cgroup_oom", root


def test_lightnings_child_failed_line_names_the_failed_childs_rank(write):
    """Lightning's launcher prefixes the line with the index of the child that failed (a local rank; one node here,
    so the global rank): it gives a rank to the error that names none."""
    root = diagnose([write("job.log", (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 GiB. GPU 3 has a total capacty of "
        "79.22 GiB of which 24.22 GiB is free.\n"
        "[rank: 3] Child process with PID 11479 terminated with code 1. Forcefully terminating all other processes to "
        "avoid zombies 🧟\nKilled\n"))]).root_cause
    assert (root.category, root.rank) == ("oom", 3), root


def test_a_samplers_invalid_rank_names_the_rank_and_the_configuration(write):
    root = diagnose([write("job.log", "ValueError: Invalid rank 4, rank should be in the interval [0, 3]\n")]).root_cause
    assert (root.category, root.rank) == ("config", 4), root


def test_error_codes_printed_under_a_generic_exception_name_its_kind(write):
    """torch_npu prints the device's error codes under the exception they explain: they say what failed."""
    # (https://github.com/vllm-project/vllm-ascend/issues/1443)
    root = diagnose([write("job.log", (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/site-packages/torch_npu/npu/utils.py", line 60, in synchronize\n'
        "    return torch_npu._C._npu_synchronize()\n"
        "RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: "
        "AclrtSynchronizeDeviceWithTimeout, error code is 507048\n"
        "[Error]: The execution of the internal task times out.\n"
        "EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out. Reason: "
        "The Notify register has not received the Notify record from remote rank: [unknown].\n"))]).root_cause
    assert root.category == "nccl" and "EI0002: " in root.message, root


def test_another_ranks_error_under_a_generic_exception_does_not_take_its_root(write):
    root = diagnose([write("job.log", (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "train.py", line 9, in <module>\n'
        "[rank0]:     step(batch)\n"
        "[rank0]: RuntimeError: the reducer lost bucket 3\n"
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n"
    ))]).root_cause
    assert (root.rank, root.message) == (0, "RuntimeError: the reducer lost bucket 3"), root


def test_a_ray_workers_lines_take_the_rank_one_of_them_states(write):
    """Ray prefixes a worker's lines with its pid: torch's `[rank2]:` on one of them is the rank of all of them."""
    # (https://github.com/vllm-project/vllm/issues/13121)
    root = diagnose([write("job.log", (
        "(RayWorkerWrapper pid=1061) ERROR 02-12 02:14:01 worker_base.py:574] RuntimeError: Gloo connectFullMesh failed "
        "with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
        "(RayWorkerWrapper pid=1061) [rank2]:[E212 02:14:01.179080356 ProcessGroupGloo.cpp:143] Gloo connectFullMesh "
        "failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
        "(RayWorkerWrapper pid=1062) INFO 02-12 02:14:01 worker_base.py:100] [rank3] waiting\n"))]).root_cause
    assert (root.category, root.rank) == ("nccl", 2), root


def test_two_ranks_on_one_pid_give_none_to_its_other_lines(write):
    root = diagnose([write("job.log", (
        "(TaskRunner pid=7) ERROR worker_base.py:574] RuntimeError: Gloo connectFullMesh failed with [pair.cc:144] no error\n"
        "(TaskRunner pid=7) [rank2]: step 1\n(TaskRunner pid=7) [rank3]: step 1\n"))]).root_cause
    assert root.rank is None, root


def test_two_processes_announcing_one_global_rank_are_the_root(write):
    """Each node spawning its processes as if it were the first (https://github.com/NVIDIA-NeMo/Speech/issues/5819)."""
    root = diagnose([write("job.log", "".join(
        f"{node}: Initializing distributed: GLOBAL_RANK: {g}, MEMBER: {g + 1}/8\n" for node in (0, 1) for g in (1, 2, 3)))]).root_cause
    assert (root.pattern, root.evidence.line) == ("config.duplicate_global_rank", 4), root


def test_each_process_announcing_its_own_global_rank_is_no_failure(write):
    log = "".join(f"{node}: Initializing distributed: GLOBAL_RANK: {4 * node + g}, MEMBER: {4 * node + g + 1}/8\n"
                  for node in (0, 1) for g in range(4))
    # (and a restart in one stream announcing its rank again)
    log += "0: Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8\n"
    assert diagnose([write("job.log", log + _STEPS)]).root_cause is None



# (logs a second read wrote against the rules of batch 58)
def test_a_launchers_banner_under_a_generic_exception_does_not_take_its_root(write):
    root = diagnose([write("job.log", (
        'Epoch 1:  45%|████▌     | 450/1000 [02:10<02:39,  3.45it/s, loss=2.13]\n'
        'Traceback (most recent call last):\n'
        '  File "/home/u/proj/train.py", line 88, in <module>\n'
        '    trainer.fit(model, dm)\n'
        '  File "/home/u/proj/model.py", line 41, in training_step\n'
        '    n = x.size(0)\n'
        "AttributeError: 'NoneType' object has no attribute 'size'\n"
        'srun: error: gpu-node07: task 0: Exited with exit code 1\n'
        'srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n'
        'slurmstepd: error: *** STEP 4412.0 ON gpu-node07 CANCELLED AT 2024-05-01T10:00:02 ***\n'
        'srun: error: gpu-node07: task 1: Terminated\n'
    ))]).root_cause
    # (and its rank is the task srun saw exit non-zero, not the one it terminated after)
    assert (root.pattern, root.rank) == ("python.exception", 0) and root.message.startswith("AttributeError"), root


def test_a_peers_nccl_warn_under_a_generic_exception_does_not_take_its_root(write):
    root = diagnose([write("job.log", (
        'Epoch 0 step 100 loss 2.31\n'
        'Traceback (most recent call last):\n'
        '  File "/workspace/train.py", line 210, in <module>\n'
        '    main()\n'
        '  File "/workspace/train.py", line 95, in prepare\n'
        '    raise ValueError(f"sequence length {n} exceeds max_position_embeddings 2048")\n'
        'ValueError: sequence length 4096 exceeds max_position_embeddings 2048\n'
        '\n'
        'WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2346 closing signal SIGTERM\n'
        'node1:2346:2390 [1] NCCL WARN Net : Connection closed by remote peer node1<45311>\n'
        'ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 2345) of binary: /usr/bin/python\n'
    ))]).root_cause
    assert root.message.startswith("ValueError: sequence length"), root


def test_ray_tune_trials_announcing_their_ranks_again_are_no_collision(write):
    assert diagnose([write("job.log", (
        '2024-06-01 10:00:00,000\tINFO tune.py:614 -- [output] This uses the legacy output and progress reporter, as Jupyter notebooks are not supported by the new engine, yet.\n'
        '(RayTrainWorker pid=4101, ip=10.0.0.5) Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n'
        '(RayTrainWorker pid=4102, ip=10.0.0.5) Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n'
        '(RayTrainWorker pid=4101, ip=10.0.0.5) ----------------------------------------------------------------------------------------------------\n'
        '(RayTrainWorker pid=4101, ip=10.0.0.5) distributed_backend=nccl\n'
        '(RayTrainWorker pid=4101, ip=10.0.0.5) All distributed processes registered. Starting with 2 processes\n'
        '(RayTrainWorker pid=4101, ip=10.0.0.5) Epoch 0: 100%|██████████| 50/50 [00:10<00:00,  4.90it/s, v_num=0, train_loss=0.512]\n'
        '(RayTrainWorker pid=4101, ip=10.0.0.5) `Trainer.fit` stopped: `max_epochs=1` reached.\n'
        '2024-06-01 10:01:00,000\tINFO tune.py:1009 -- Trial TorchTrainer_a1b2c_00000 completed.\n'
        '(RayTrainWorker pid=4311, ip=10.0.0.5) Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n'
        '(RayTrainWorker pid=4312, ip=10.0.0.5) Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n'
        '(RayTrainWorker pid=4311, ip=10.0.0.5) All distributed processes registered. Starting with 2 processes\n'
        '(RayTrainWorker pid=4311, ip=10.0.0.5) Epoch 0: 100%|██████████| 50/50 [00:10<00:00,  4.90it/s, v_num=0, train_loss=0.498]\n'
        '(RayTrainWorker pid=4311, ip=10.0.0.5) `Trainer.fit` stopped: `max_epochs=1` reached.\n'
        '2024-06-01 10:02:00,000\tINFO tune.py:1009 -- Trial TorchTrainer_a1b2c_00001 completed.\n'
        '2024-06-01 10:02:01,000\tINFO tune.py:1041 -- Total run time: 121.50 seconds (121.30 seconds for the tuning loop).\n'
    ))]).root_cause is None


def test_a_relays_stray_rank_is_not_lent_to_its_own_reports(write):
    root = diagnose([write("job.log", (
        '(CommandActor pid=553) INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:\n'
        '(CommandActor pid=553)   restart_count=0\n'
        '(CommandActor pid=553)   group_world_size=1\n'
        '(CommandActor pid=553) [rank1]:[W501 10:00:00.000000000 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 1]  using GPU 1 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force use of a particular device, or call init_process_group() with a device_id.\n'
        '(CommandActor pid=553) Epoch 0 step 10 loss 2.1\n'
        '(CommandActor pid=553) W0501 10:05:00.000000 553 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4243 closing signal SIGTERM\n'
        '(CommandActor pid=553) E0501 10:05:01.000000 553 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 0 (pid: 4242) of binary: /usr/bin/python\n'
    ))]).root_cause
    assert root.rank == 0, root


def test_one_process_a_pod_is_no_single_node(write):
    root = diagnose([write("job.log", (
        '+ torchrun --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=bert-ddp-master-0:23456 --rdzv_id=bert-ddp train.py --epochs 3\n'
        'Loading dataset from /data/wiki\n'
        'Traceback (most recent call last):\n'
        '  File "/workspace/train.py", line 142, in <module>\n'
        '    loss = model(**batch).loss\n'
        'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; 13.10 GiB already allocated; 1.20 GiB free; 13.50 GiB reserved in total by PyTorch)\n'
    ))]).root_cause
    assert (root.category, root.rank) == ("oom", None), root


def test_a_generic_exception_before_the_steps_oom_kill_is_its_consequence(write):
    """slurmstepd reports the step's OOM kill as the step ends, after the errors of the processes left."""
    # (Ray Tune under SLURM: https://github.com/ray-project/ray/issues/14394)
    root = diagnose([write("job.log", (
        "Traceback (most recent call last):\n"
        '  File "tune_run.py", line 40, in <module>\n'
        "    tune.run(train, num_samples=8)\n"
        "ray.tune.error.TuneError: ('Trials did not complete', [seed:5591])\n"
        "slurmstepd: error: Detected 8 oom-kill event(s) in step 59137890.batch cgroup. Some of your processes may have "
        "been killed by the cgroup out-of-memory handler.\n"))]).root_cause
    assert root.pattern == "host_oom.slurm_cgroup_oom", root


def test_an_xla_rendezvous_that_never_ends_names_the_hang(write):
    """Without XLA's word that the wait ended, its `may be stuck` warning is the likeliest root (low confidence)."""
    # (a two-host pmap called on one host only: https://github.com/jax-ml/jax/issues/22740)
    d = diagnose([write("host0.log", (
        "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been waiting for "
        "`initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7]; stream=0; run_id=724296073` for 10 seconds "
        "and may be stuck. Expected 8 threads to join the rendezvous, but not all of them arrived on time.\n"))])
    assert (d.root_cause.category, d.root_cause.pattern) == ("nccl", "fallback.xla_rendezvous_stuck"), d.root_cause


def test_an_nccl_error_trace_of_a_process_that_never_joined_is_named(write):
    # (Lightning FSDP on two DGX nodes in containers: https://github.com/NVIDIA/nccl/issues/1000)
    d = diagnose([write("node.log", (
        "dso-s1-r1-a100-03:2331:2666 [3] NCCL INFO Using network IBext\n"
        "dso-s1-r1-a100-03:2330:2658 [2] NCCL INFO misc/socket.cc:567 -> 2\n"
        "dso-s1-r1-a100-03:2330:2658 [2] NCCL INFO bootstrap.cc:270 -> 2\n"))])
    assert d.root_cause.pattern == "fallback.nccl_error_trace" and d.root_cause.evidence.line == 2, d.root_cause


def test_torch_1_9_failure_summary_names_its_rank(write):
    """torch 1.9-1.10 wrote `Root Cause:` and unpadded keys (`  rank: 1 (local_rank: 1)`)."""
    # (https://github.com/Sense-GVT/Fast-BEV/issues/9)
    root = diagnose([write("job.log", (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "**************************************************\n"
        "              tools/train.py FAILED               \n"
        "==================================================\n"
        "Root Cause:\n"
        "[0]:\n"
        "  time: 2023-03-05_20:42:07\n"
        "  rank: 1 (local_rank: 1)\n"
        "  exitcode: -11 (pid: 43458)\n"
        "  error_file: <N/A>\n"
        '  msg: "Signal 11 (SIGSEGV) received by PID 43458"\n'
        "==================================================\n"
        "Other Failures:\n"
        "  <NO_OTHER_FAILURES>\n"))]).root_cause
    assert root.rank == 1, root


def test_a_spawned_childs_truncated_pickle_is_its_parents_kill(write):
    """A spawned child reading its start-up data when its parent was killed: the kill is the root."""
    # (https://github.com/OpenDriveLab/UniAD/issues/41)
    root = diagnose([write("job.log", (
        "[                                                  ] 0/6019, elapsed: 0s, ETA:Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        '  File "/envs/uniad/lib/python3.8/multiprocessing/spawn.py", line 116, in spawn_main\n'
        "    exitcode = _main(fd, parent_sentinel)\n"
        '  File "/envs/uniad/lib/python3.8/multiprocessing/spawn.py", line 127, in _main\n'
        "    self = reduction.pickle.load(from_parent)\n"
        "_pickle.UnpicklingError: pickle data was truncated\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 8512) of binary: "
        "/envs/uniad/bin/python\n"))]).root_cause
    assert root.category == "host_oom" and root.evidence.line == 8, root


def test_an_xla_rendezvous_stuck_after_an_earlier_one_ended_is_named(write):
    """XLA's word that one rendezvous ended clears the warnings before it, not a later one that never ends."""
    d = diagnose([write("host1.log", (
        "E0915 03:14:52.160034     395 rendezvous.cc:78] [id=6] This thread has been waiting for `[1] [rank=1] "
        "Initialize clique: devices=8` for 10 seconds and may be stuck.\n"
        "E0915 03:15:25.101290     395 rendezvous.cc:130] [id=6] This thread is unstuck waiting for `[1] [rank=1] "
        "Initialize clique: devices=8` after 32.9s. Warning above was a false-positive. Perhaps the timeout is too short.\n"
        "I0915 03:17:40.000000     395 train.py:201] step 300 loss=2.705 lr=3e-4\n"
        "E0915 03:28:50.512301     395 rendezvous.cc:78] [id=731] This thread has been waiting for `[1] [rank=1] "
        "all-reduce.17; participants=16` for 620 seconds and may be stuck. Expected 16 threads to join the rendezvous, "
        "but only 8 of them arrived on time.\n"))])
    assert d.root_cause is not None and d.root_cause.evidence.line == 4, d.root_cause


def test_a_message_whose_colon_introduced_its_own_lines_introduces_no_traceback(write):
    """`Error(s) in loading state_dict for X:` and its `Missing key(s)` line, then another process's traceback
    (no prefixes): that traceback is no cause of the first, and the first names the failure."""
    # (a second read's log, after https://github.com/togethercomputer/OpenChatKit/issues/95)
    root = diagnose([write("job.log", (
        "Traceback (most recent call last):\n"
        '  File "dist_clm_train.py", line 301, in main\n'
        "    pipe = get_pp_module(args, config, device, use_dp)\n"
        "RuntimeError: Error(s) in loading state_dict for GPTStageFirst:\n"
        '\tMissing key(s) in state_dict: "embed_in.weight".\n'
        "Traceback (most recent call last):\n"
        '  File "dist_clm_train.py", line 290, in main\n'
        "    dist.barrier(group=_PIPELINE_PARALLEL_COMM)\n"
        "RuntimeError: Socket Timeout\n"))]).root_cause
    assert root.pattern == "data.state_dict_mismatch", root


def test_two_summaries_mapping_one_local_rank_to_two_ranks_name_neither(write):
    """torch 1.9's summaries of two nodes, pasted without hosts: local rank 1 is rank 3 in one, rank 1 in the other."""
    summary = ("***************************************\n"
               "Root Cause:\n"
               "[0]:\n"
               "  time: 2021-09-14_10:02:{s}\n"
               "  rank: {r} (local_rank: 1)\n"
               "  exitcode: 1 (pid: {p})\n"
               "Other Failures:\n"
               "  <NO_OTHER_FAILURES>\n")
    root = diagnose([write("job.log", (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 190, in <module>\n'
        "    loss = model(x).sum()\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 31.75 GiB total capacity)\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 5511) of binary: "
        "/usr/bin/python3\n" + summary.format(s=11, r=3, p=5511) +
        "Traceback (most recent call last):\n"
        '  File "train.py", line 196, in <module>\n'
        "    optimizer.step()\n"
        "RuntimeError: NCCL communicator was aborted on rank 1.\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 7720) of binary: "
        "/usr/bin/python3\n" + summary.format(s=40, r=1, p=7720)))]).root_cause
    assert root.category == "oom" and root.rank in (None, 3), root
