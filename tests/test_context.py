"""Job context from the logs (arguments dumps, parallel sizes, memory reports, progress) and the
checks mdiag computes from it."""
import pytest
from click.testing import CliRunner

from diagnose import diagnose
from diagnose.cli.main import main
from diagnose.cli.patterns import category_table
from diagnose.analyze.context import JobContext
from diagnose.analyze.findings import config_checks, oom_figures
from diagnose.patterns.library import load

from .conftest import ROOT


def _dump(args: dict) -> str:
    lines = ["------------------------ arguments ------------------------"]
    for k in sorted(args, key=str.lower):
        lines.append("  {} {} {}".format(k, "." * (48 - len(k)), args[k]))
    lines.append("-------------------- end of arguments ---------------------")
    return "\n".join(lines) + "\n"


BASE = {"world_size": 16, "tensor_model_parallel_size": 4, "pipeline_model_parallel_size": 2,
        "context_parallel_size": 1, "num_attention_heads": 32, "num_query_groups": 8, "num_layers": 24,
        "micro_batch_size": 2, "global_batch_size": 64, "seq_length": 4096, "use_torch_fsdp2": False}


@pytest.mark.parametrize("version", ["core_v0.8", "head"])
def test_arguments_dump_and_world_line_of_megatron_versions(write, version):
    world = ("using world size: 16, data-parallel size: 2, context-parallel size: 1 tensor-model-parallel size: 4, "
             "pipeline-model-parallel size: 2 " if version == "core_v0.8" else
             "using world size: 16, data-parallel size: 2, context-parallel size: 1, hierarchical context-parallel "
             "sizes: None, tensor-model-parallel size: 4, pipeline-model-parallel size: 2")
    d = diagnose([write("a.log", world + "\n" + _dump(BASE))])
    j = d.job
    assert (j["world_size"], j["tensor_model_parallel_size"], j["pipeline_model_parallel_size"], j["data_parallel_size"]) == (16, 4, 2, 2)
    assert j["seq_length"] == 4096 and j["use_torch_fsdp2"] is False
    checks = {c["check"]: c["status"] for c in j["checks"]}
    assert checks["world_size"] == checks["num_attention_heads_vs_tp"] == checks["num_layers_vs_pp"] == "pass"
    assert checks["global_batch_size"] == "pass"


def _ctx(**kw):
    c = JobContext()
    c.args = {**BASE, **kw}
    return c


def _status(ctx):
    return {c["check"]: c["status"] for c in config_checks(ctx)}


def test_checks_fail_with_numbers():
    c = _ctx(world_size=12, num_attention_heads=30, num_layers=25, global_batch_size=63, context_parallel_size=2,
             seq_length=4097)
    res = {c_["check"]: c_ for c_ in config_checks(c)}
    assert res["world_size"]["status"] == "fail" and "12" in res["world_size"]["detail"]
    assert res["num_attention_heads_vs_tp"]["status"] == "fail"
    assert res["num_layers_vs_pp"]["status"] == "fail"
    assert res["seq_length_vs_cp"]["status"] == "fail"


def test_checks_unknown_when_logs_are_silent():
    st = _status(JobContext())
    assert set(st.values()) == {"unknown"}


@pytest.mark.parametrize(
    "gpu, value, extra, want",
    [
        ("H100 80GB HBM3", None, {}, "unknown"),
        ("H100 80GB HBM3", 1, {}, "pass"),
        ("H100 80GB HBM3", 8, {}, "fail"),
        ("B200", None, {}, "pass"),
        ("H100 80GB HBM3", 1, {"use_torch_fsdp2": True}, "fail"),
        ("H100 80GB HBM3", 8, {"use_megatron_fsdp": True}, "pass"),
        ("H100 80GB HBM3", 32, {"overlap_moe_expert_parallel_comm": True}, "pass"),
        ("H100 80GB HBM3", 1, {"overlap_moe_expert_parallel_comm": True}, "fail"),
    ],
)
def test_cuda_device_max_connections_rules(gpu, value, extra, want):
    c = _ctx(**extra)
    c.gpu, c.cuda_device_max_connections = gpu, value
    assert _status(c)["cuda_device_max_connections"] == want


def test_oom_figures_all_generations():
    new = oom_figures("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use. Of the allocated memory 74.50 GiB is allocated by PyTorch, and 2.06 GiB is reserved by PyTorch but unallocated.")
    assert new == {"tried_to_allocate": "2.00 GiB", "gpu": 3, "total_capacity": "79.11 GiB", "free": "1.02 GiB",
                   "in_use_by_process": "78.08 GiB", "allocated_by_pytorch": "74.50 GiB", "reserved_unallocated": "2.06 GiB"}
    typo = oom_figures("GPU 0 has a total capacty of 79.11 GiB of which 2.93 GiB is free.")
    assert typo["total_capacity"] == "79.11 GiB"
    old = oom_figures("RuntimeError: CUDA out of memory. Tried to allocate 256.00 MiB (GPU 0; 39.59 GiB total capacity; 37.12 GiB already allocated; 99.19 MiB free; 37.92 GiB reserved in total by PyTorch)")
    assert old["free"] == "99.19 MiB" and old["gpu"] == 0


def test_oom_checklist_full_and_sparse(write):
    full = (
        "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 4, pipeline-model-parallel size: 2\n"
        + _dump(BASE)
        + "[Rank 5] (after 10 iterations) memory (MB) | allocated: 61000.12 | max allocated: 76543.21 | reserved: 78000.00 | max reserved: 79000.00\n"
        " [2026-12-02 10:31:13] iteration       10/  500000 | consumed samples:          640 |\n"
        "[rank5]: Traceback (most recent call last):\n"
        '[rank5]:   File "/w/megatron/core/pipeline_parallel/schedules.py", line 400, in backward_step\n'
        "[rank5]:     torch.autograd.backward(x)\n"
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.11 GiB of which 1.02 GiB is free.\n"
    )
    r = diagnose([write("full.log", full)]).root_cause
    c = r.details["checklist"]
    assert c["missing"] == []
    assert c["items"]["peak_memory_mb"] == 76543.21 and c["items"]["phase"] == "backward"
    assert r.details["progress"]["last_iteration"] == 10 and r.details["progress"]["train_iters"] == 500000
    sparse = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n"
    r2 = diagnose([write("sparse.log", sparse)]).root_cause
    assert set(r2.details["checklist"]["missing"]) >= {"rank", "micro_batch_size", "seq_length", "parallelism", "peak_memory_mb"}


def test_failure_explained_by_a_config_check(write):
    log = (
        "using world size: 4, data-parallel size: 1, context-parallel size: 1, tensor-model-parallel size: 3, pipeline-model-parallel size: 1\n"
        + _dump({**BASE, "world_size": 4, "tensor_model_parallel_size": 3, "pipeline_model_parallel_size": 1})
        + "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/w/megatron/core/parallel_state.py", line 532, in initialize_model_parallel\n'
        '[rank0]:     raise RuntimeError(f"world_size ({world_size}) is not divisible by {total_model_size}")\n'
        "[rank0]: RuntimeError: world_size (4) is not divisible by 3\n"
    )
    r = diagnose([write("cfg.log", log)]).root_cause
    assert r.category == "shape"
    assert any(c["check"] == "world_size" and "not divisible" in c["detail"] for c in r.details["failed_checks"])


def test_inconsistent_arguments_across_nodes(write, tmp_path):
    write("logs/node0.out", _dump(BASE))
    write("logs/node1.out", _dump({**BASE, "seq_length": 2048}) + "ValueError: boom\n")
    d = diagnose([tmp_path / "logs"])
    assert d.job["inconsistent_arguments"] == {"seq_length": ["2048", "4096"]}


def test_bare_torchrun_import_hint():
    r = diagnose([ROOT / "sample_logs" / "import-rank1-logdir"]).root_cause
    assert r.category == "import" and "uv run python -m torch.distributed.run" in r.remediation[0]


def test_readme_category_table_is_generated_from_patterns():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- categories:start")[1].split("-->", 1)[1].split("<!-- categories:end -->")[0]
    assert block.strip() == category_table(load()).strip()


def test_patterns_commands():
    r = CliRunner()
    res = r.invoke(main, ["patterns", "test"])
    assert res.exit_code == 0 and "0 failed" in res.output
    res = r.invoke(main, ["patterns", "list", "--category", "oom"])
    assert res.exit_code == 0 and "oom.cuda_allocator" in res.output and "nccl." not in res.output
    res = r.invoke(main, ["patterns", "explain", "oom.cuda_allocator"])
    assert res.exit_code == 0 and "Tried to allocate" in res.output and "What to do" in res.output
    assert r.invoke(main, ["patterns", "explain", "nope"]).exit_code == 2


def test_patterns_test_fails_on_a_broken_example(tmp_path):
    (tmp_path / "x.toml").write_text(
        'category = "python"\n[[pattern]]\nid = "python.x"\nrole = "root"\nregex = "needle"\ntitle = "t"\n'
        'why = "w"\nremediation = ["r"]\nexamples = ["hay"]\n'
    )
    res = CliRunner().invoke(main, ["patterns", "test", str(tmp_path)])
    assert res.exit_code == 1 and "FAIL" in res.output


def test_env_patterns_folder(tmp_path, monkeypatch, write):
    (tmp_path / "site.toml").write_text(
        'category = "data"\n[[pattern]]\nid = "data.lustre_eio"\nrole = "root"\npriority = 66\n'
        'regex = "LustreError: .*rc = -5"\ntitle = "Lustre I/O error"\nwhy = "w"\nremediation = ["check the OSTs"]\n'
        'examples = ["LustreError: 1234:0:(osc_request.c:1000) rc = -5"]\n'
    )
    monkeypatch.setenv("MDIAG_PATTERNS", str(tmp_path))
    r = diagnose([write("l.log", "LustreError: 99:0:(osc_request.c:1) rc = -5\n")]).root_cause
    assert r.pattern == "data.lustre_eio"


# The strongest anchors of every category in the reference catalog: each must be recognised.
ANCHORS = {
    "shape": ["world_size (4) is not divisible by 3", "num_attention_heads (14) must be a multiple of tensor_model_parallel_size (4).",
              "num_query_groups (3) must be a multiple or divisor of tensor_model_parallel_size (8).",
              "Number of layers should be divisible by the pipeline-model-parallel size"],
    "config": ["Using tensor model parallelism or context parallelism require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1",
               "num_layers argument is None"],
    "oom": ["CUDA out of memory. Tried to allocate 2.00 GiB", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
            "gpu1:1:2 [0] include/alloc.h:103 NCCL WARN Cuda failure 'out of memory'"],
    "host_oom": ["slurmstepd: error: Detected 1 oom-kill event(s) in StepId=18839905.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
                 "slurmstepd: error: Detected 1 oom_kill event in StepId=1.0. Some of the step tasks have been OOM Killed.",
                 "srun: error: csl41: task 0: Out Of Memory"],
    "cuda": ["CUDA error: an illegal memory access was encountered", "CUDA error: uncorrectable ECC error encountered",
             "CUDA error: device-side assert triggered", "CUDA error: unspecified launch failure"],
    "nccl": ["Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.",
             "NET/IB : Got completion from peer 10.0.0.5<46789> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
             "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
             "The client socket has timed out after 600000ms while trying to connect to (172.17.0.9, 46229).",
             "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
             "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined."],
    "nan": ["found NaN in local forward loss calculation", "found Inf in local grad norm for bucket #0 in backward pass before data-parallel communication collective"],
    "slurm": ["slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024-05-01T12:00:00 DUE TO TIME LIMIT ***",
              "slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024-05-01T12:00:00 DUE TO PREEMPTION ***",
              "slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024-05-01T12:00:00 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"],
    "data": ["Unable to load optimizer from checkpoint /ckpt/iter_0001000. Specify --no-load-optim or --finetune to prevent attempting to load the optimizer state, exiting ...",
             "/ckpt is not a distributed checkpoint"],
    "import": ["ModuleNotFoundError: No module named 'megatron'", "AttributeError: module 'transformer_engine' has no attribute 'pytorch'",
               "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c10"],
}


@pytest.mark.parametrize("category", sorted(ANCHORS))
def test_reference_anchors_are_recognised(category):
    pats = sorted((p for p in load() if not p.frames), key=lambda p: -p.priority)  # frame patterns never label a line alone
    for line in ANCHORS[category]:
        hit = next((p for p in pats if p.search(line)), None)
        assert hit is not None and hit.category == category, (line, hit and hit.id)


def test_ranks_without_output_with_per_rank_files(write, tmp_path):
    world = "using world size: 8, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1\n"
    write("logs/job-rank0.err", world)
    for r in (1, 2, 3):
        write(f"logs/job-rank{r}.err", "step 1\n")
    write("logs/job-rank3.err", "ValueError: boom\n")
    d = diagnose([tmp_path / "logs"])
    assert d.job["ranks_without_output"] == "4-7"
    assert any("node-local" in w for w in d.warnings)
