"""Start and stop a one-node SLURM cluster (munged, slurmctld, slurmd) for the end-to-end tests.

    python tests/e2e/slurm/cluster.py start DIR     # prints `export SLURM_CONF=DIR/slurm.conf`
    python tests/e2e/slurm/cluster.py stop DIR

Needs root and Debian's `slurm-wlm` + `munge` (apt-get install -y slurm-wlm munge).  The
configuration is `slurm.conf.in` next to this file, rendered with this machine's short hostname
and fresh ports; all state, spool and log files go under DIR.  Nothing is written to /etc/slurm:
clients find the cluster through the SLURM_CONF environment variable.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "slurm.conf.in"
DAEMONS = ("slurmctld", "slurmd", "munged")


class ClusterError(RuntimeError):
    """SLURM could not be started here (the message says why)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbin(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/local/sbin/{name}")
                                       if os.access(p, os.X_OK)), None)


def missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if os.geteuid() != 0:
        return "the SLURM tests start slurmctld/slurmd and need root"
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "scontrol", "srun"):
        if not _sbin(tool):
            return f"{tool} not found (apt-get install -y slurm-wlm munge)"
    if not Path("/etc/munge/munge.key").exists():
        return "/etc/munge/munge.key missing (the munge package creates it)"
    return None


def _munge_ok() -> bool:
    enc = subprocess.run(["munge", "-n"], capture_output=True)
    return enc.returncode == 0 and subprocess.run(["unmunge"], input=enc.stdout, capture_output=True).returncode == 0


def start_munge(dir: Path) -> bool:
    """Start munged as user munge unless one already answers.  True if this call started it."""
    if shutil.which("munge") and _munge_ok():
        return False
    for d in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    pidfile = "/run/munge/munged.pid"
    r = subprocess.run(["runuser", "-u", "munge", "--", _sbin("munged"), "--pid-file", pidfile],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ClusterError(f"munged did not start: {r.stderr.strip()}")
    for _ in range(50):
        if _munge_ok():
            (dir / "munged.pid").write_text(Path(pidfile).read_text())
            return True
        time.sleep(0.1)
    raise ClusterError("munged started but munge -n | unmunge fails")


def render(dir: Path, epilog: Path | None = None) -> Path:
    host = socket.gethostname().split(".")[0]
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    for sub in ("state", "spool"):
        (dir / sub).mkdir(parents=True, exist_ok=True)
    conf = TEMPLATE.read_text().format(host=host, dir=dir, ctld_port=_free_port(), slurmd_port=_free_port(),
                                       cpus=max(8, os.cpu_count() or 1), mem=max(1024, mem_mb // 2),
                                       epilog=f"Epilog={epilog}" if epilog else "#Epilog=")
    path = dir / "slurm.conf"
    path.write_text(conf)
    return path


def start(dir: Path, wait_s: float = 30.0, epilog: Path | None = None) -> dict:
    """Start munged (if needed), slurmctld and slurmd; wait until the node is idle.  Returns the env to use."""
    why = missing()
    if why:
        raise ClusterError(why)
    dir = Path(dir).resolve()
    dir.mkdir(parents=True, exist_ok=True)
    start_munge(dir)
    conf = render(dir, epilog)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for daemon, args in (("slurmctld", ["-c", "-i"]), ("slurmd", [])):
        r = subprocess.run([_sbin(daemon), "-f", str(conf), *args], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise ClusterError(f"{daemon} did not start (exit {r.returncode}): {r.stderr.strip()[-500:]}"
                               f"{_tail(dir / (daemon + '.log'))}")
    deadline = time.monotonic() + wait_s
    last = ""
    while time.monotonic() < deadline:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
        last = (r.stdout + r.stderr).strip()
        if r.returncode == 0 and last.split() and last.split()[0].rstrip("*") in ("idle", "mixed", "allocated"):
            return env
        time.sleep(0.5)
    stop(dir)
    raise ClusterError(f"the node did not become idle within {wait_s:.0f} s (sinfo: {last!r})"
                       f"{_tail(dir / 'slurmctld.log')}{_tail(dir / 'slurmd.log')}")


def _tail(p: Path, n: int = 8) -> str:
    try:
        return f"\n--- {p.name}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _other_slurmctld() -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().split(b"\0")[0].endswith(b"slurmctld"):
                return True
        except OSError:
            continue
    return False


def stop(dir: Path) -> None:
    """Stop the daemons this module started (by the pids they wrote under DIR)."""
    dir = Path(dir).resolve()
    for daemon in DAEMONS:
        pidfile = dir / f"{daemon}.pid"
        if daemon == "munged" and _other_slurmctld():
            continue  # another cluster on this machine (a parallel test run) still needs munged
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    cmd, folder = sys.argv[1], Path(sys.argv[2])
    if cmd == "start":
        e = start(folder)
        print(f"export SLURM_CONF={e['SLURM_CONF']}")
    else:
        stop(folder)
