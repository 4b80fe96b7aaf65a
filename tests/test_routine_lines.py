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
