"""A real single-node SLURM cluster for tests: munge, slurmctld and slurmd on this machine.

Debian's `slurm-wlm` and `munge` provide the daemons. Everything the cluster writes lives in one
temporary folder (its own munge key and socket, state, spool, logs, free ports), so it neither
needs nor touches a system munge or SLURM. The daemons run in the foreground as children of the
test, are stopped by PID, and inherit its niceness, and so do the jobs they start.

No accounting database (slurmdbd): the SLURM executor plugin can follow jobs with `squeue`
instead of `sacct`, provided finished jobs stay visible to squeue for at least three of its
status intervals (MinJobAge). Nothing here uses cgroups (proctrack/linuxproc, task/none): they
are not needed for one node and sandboxes often lack them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scancel", "srun")
PARTITION = "debug"
# Where SLURM clients look when SLURM_CONF is unset, after /etc/slurm/slurm.conf (the path
# `slurmd` uses for a configless node). The job-step side of the executor plugin strips SLURM_*
# variables before its `srun`, so a config passed through SLURM_CONF would not reach it.
CLIENT_CONFIG = Path("/run/slurm/conf/slurm.conf")
SYSTEM_CONFIG = Path("/etc/slurm/slurm.conf")
# Seconds a finished job stays visible to squeue; the plugin wants 3 status intervals or more.
MIN_JOB_AGE = 600
# Seconds between SIGTERM and SIGKILL for a job over its time limit (SLURM's default: 30).
KILL_WAIT = 5


def missing_reason() -> str | None:
    """Why a cluster cannot be started here, or None when it can."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name) is None]
    if absent:
        return f"needs Debian's slurm-wlm and munge ({', '.join(absent)} not found): apt-get install -y slurm-wlm munge"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs"
    for path in (SYSTEM_CONFIG, CLIENT_CONFIG):
        if path.exists() or path.is_symlink():
            return (
                f"{path} exists: this machine has its own SLURM configuration, which the test cluster would clash with"
            )
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def this_node() -> str:
    """`slurmd -C`'s line for this machine: its name, real CPU count and memory."""
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    if not line.startswith("NodeName="):
        raise RuntimeError(f"unexpected `slurmd -C` output: {line!r}")
    return line


def slurm_conf(folder: Path, node: str, ports: tuple[int, int]) -> str:
    node_name = node.split()[0].removeprefix("NodeName=")
    return f"""\
ClusterName=anatomy
SlurmctldHost={node_name}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/munge.socket
MpiDefault=none
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MinJobAge={MIN_JOB_AGE}
KillWait={KILL_WAIT}
ReturnToService=2
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName={PARTITION} Nodes={node_name} Default=YES MaxTime=INFINITE State=UP
"""


def write_munge_key(folder: Path) -> Path:
    folder.mkdir(mode=0o700)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    return key


@contextmanager
def daemon(command: list[str], log: Path):
    """Run one daemon in the foreground as our child; stop it by PID afterwards."""
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def client_config(conf: Path):
    """Make `conf` the config SLURM clients find without SLURM_CONF, for as long as it runs."""
    created = [folder for folder in (CLIENT_CONFIG.parent.parent, CLIENT_CONFIG.parent) if not folder.exists()]
    CLIENT_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    CLIENT_CONFIG.symlink_to(conf)
    try:
        yield
    finally:
        CLIENT_CONFIG.unlink()
        for folder in reversed(created):
            folder.rmdir()


def node_state() -> str:
    result = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%T"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def wait_for(check, what: str, folder: Path, daemons: list[subprocess.Popen], timeout: float = 60) -> None:
    """Wait until check() is true; on timeout, or when a daemon exits, fail with their logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        exited = [process.args[0] for process in daemons if process.poll() is not None]
        if exited:
            problem = f"{', '.join(exited)} exited"
            break
        time.sleep(0.2)
    else:
        problem = f"timed out after {timeout:.0f}s"
    logs = "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}" for log in sorted((folder / "log").iterdir())
    )
    raise RuntimeError(f"waiting for {what}: {problem}\n{logs}")


def job_ids() -> list[str]:
    result = subprocess.run(["squeue", "--noheader", "--format=%i"], capture_output=True, text=True)
    return result.stdout.split()


def cancel_all_jobs(timeout: float = 30) -> None:
    """Cancel what the tests left queued or running, so that no job outlives slurmd."""
    ids = job_ids()
    if ids:
        subprocess.run(["scancel", "--full", *ids], capture_output=True)
    deadline = time.monotonic() + timeout
    while job_ids() and time.monotonic() < deadline:
        time.sleep(0.5)


def kill_processes_under(folder: Path) -> list[int]:
    """SIGKILL every process whose working folder lies in `folder`; their PIDs.

    A job's process that was stopped (SIGSTOP) can outlive its job: proctrack/linuxproc loses it
    once its parent dies, so neither the time limit nor scancel reach it. Its working folder
    still tells whose it is.
    """
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = (entry / "cwd").resolve(strict=True)
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cwd.is_relative_to(folder.resolve()):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


@contextmanager
def slurm_cluster(folder: Path):
    """Start munge, slurmctld and slurmd with a fresh config in `folder`; yield the config path."""
    for name in ("state", "spool", "log"):
        (folder / name).mkdir(parents=True)
    key = write_munge_key(folder / "munge")
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, this_node(), (free_port(), free_port())), encoding="utf-8")
    logs = folder / "log"
    munge_socket = folder / "munge" / "munge.socket"
    with ExitStack() as stack:
        # --force: munged refuses a socket whose folders are not open to all, as the test's
        # private temporary folder is not; only root talks to this one.
        munge = stack.enter_context(
            daemon(
                [
                    "munged",
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={munge_socket}",
                    f"--pid-file={folder}/munge/munged.pid",
                    f"--seed-file={folder}/munge/seed",
                    f"--log-file={logs}/munged.log",
                ],
                logs / "munged.out",
            )
        )
        wait_for(munge_socket.exists, "munged's socket", folder, [munge])
        stack.enter_context(client_config(conf))
        controller = stack.enter_context(daemon(["slurmctld", "-D", "-i", "-f", str(conf)], logs / "slurmctld.out"))
        node = stack.enter_context(daemon(["slurmd", "-D", "-f", str(conf)], logs / "slurmd.out"))
        stack.callback(cancel_all_jobs)  # runs before the daemons stop
        wait_for(lambda: node_state() == "idle", "the node to be idle in sinfo", folder, [munge, controller, node])
        yield conf


def job_states(ids) -> dict[str, tuple[str, str]]:
    """SLURM job id -> (state, comment) as slurmctld reports them, finished jobs included."""
    result = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%i|%T|%k", "--jobs", ",".join(ids)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        job: (state, comment) for job, state, comment in (line.split("|", 2) for line in result.stdout.splitlines())
    }


SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")


def submitted_jobs(snakemake_output: str) -> dict[str, str]:
    """SLURM job id -> its SLURM log, from what the executor plugin prints on submitting."""
    return dict(SUBMITTED.findall(snakemake_output))
