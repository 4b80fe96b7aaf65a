"""Which files a folder gives: log suffixes, rotated and compressed logs, .stderr/.stdout streams."""
import gzip

import pytest

from diagnose.read import collect


def test_rotated_renamed_and_compressed_logs_are_collected(tmp_path):
    plain = ["train.log", "train.log.1", "job.stderr", "job.stdout", "notes.txt", "slurm-7.err.3"]
    for name in plain:
        (tmp_path / name).write_text(f"line of {name}\n")
    for name in ("slurm-1234.out.gz", "train.log.2.gz"):
        (tmp_path / name).write_bytes(gzip.compress(b"line\n"))
    for name in ("model.pt.1", "data.2.gz", "README.md", "ckpt.bin"):
        (tmp_path / name).write_bytes(b"\x00not a log\n")
    files, _ = collect.expand([str(tmp_path)])
    assert sorted(f.name for f in files) == sorted(plain + ["slurm-1234.out.gz", "train.log.2.gz"])


@pytest.mark.parametrize("name, stream", [("job.stderr", "stderr"), ("job.stdout", "stdout"),
                                          ("train.err.1", "stderr"), ("slurm-9.out.2.gz", "stdout"),
                                          ("train.log.1", None)])
def test_the_stream_comes_from_the_name_without_rotation_number(tmp_path, name, stream):
    (tmp_path / name).write_bytes(b"x\n")
    (src,) = collect.describe([tmp_path / name])
    assert src.stream == stream


def test_log_name_strips_gz_and_rotation_number_only_from_log_names():
    assert collect.log_name("train.log.2.gz") == "train.log"
    assert collect.log_name("job.stderr.10") == "job.stderr"
    assert collect.log_name("model.pt.1") == "model.pt.1"
    assert collect.log_name("run-2024.12.log") == "run-2024.12.log"
