"""A real Ray cluster of several nodes on this machine (loopback), for tests and benchmarks.

Each node is a `ray start --block` process; stopping that process stops its node, as `ray stop` would on its own
machine (`ray stop` itself is not used: it stops every Ray process of the user on this machine, other clusters'
too). `stop` ends every process the cluster started, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class LocalRayCluster:
    """A throwaway Ray cluster on this machine's loopback: a head node and `num_nodes - 1` worker nodes joining it
    with `ray start --address`, as on a real cluster (each `ray start --block` is our child process, so stopping the
    cluster ends exactly these processes). For tests and benchmarks; `address` is what `--ray-address` takes.

    `object_store_memory` (bytes per node, at least 75 MB) gives every node a small object store, as
    `ray start --object-store-memory` does; None leaves Ray's default (30% of the memory). `add_node` and
    `stop_node` let a test change the cluster while a job runs, and `worker_pids` finds the processes of Ray actors.

    >>> with LocalRayCluster(num_nodes=2, cpus_per_node=1) as cluster:  # doctest: +SKIP
    ...     counts = count_pretokens_in_files(paths, engine=RayCountingEngine(cluster.address))
    """

    def __init__(self, num_nodes: int = 2, cpus_per_node: int = 1, start_timeout: float = 120.0,
                 stop_timeout: float = 8.0, object_store_memory: int | None = None) -> None:
        self.num_nodes, self.cpus_per_node, self.start_timeout = num_nodes, cpus_per_node, start_timeout
        self.stop_timeout, self.object_store_memory = stop_timeout, object_store_memory
        self.processes: dict[str, Any] = {}  # node name -> its `ray start --block` process
        self.address = ""
        self.temp_dir = ""

    def environment(self) -> dict[str, str]:
        """Environment variables for the nodes and for drivers joining them: no usage stats; no token
        authentication, which keeps the cluster apart from the token file other clusters on this machine rewrite."""
        return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}

    def __enter__(self) -> LocalRayCluster:
        import tempfile

        self.temp_dir = tempfile.mkdtemp(prefix="hfbpe-ray-")  # short: Ray's socket paths must fit in 107 bytes
        try:
            self._start(["--head", "--port=0", "--include-dashboard=false"], "head")
            address_file = Path(self.temp_dir) / "ray_current_cluster"
            recorded = self._wait_for(lambda: address_file.is_file() and address_file.read_text().strip())
            # Ray records the GCS under the machine's outward address even when every node binds to loopback; the
            # nodes and drivers of this cluster talk over loopback only.
            self.address = "127.0.0.1:" + recorded.rpartition(":")[2]
            for node in range(1, self.num_nodes):
                self._start([f"--address={self.address}"], f"worker{node}")
            self._wait_for(lambda: self.alive_nodes() >= self.num_nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def add_node(self, name: str, cpus: int | None = None, env: dict[str, str] | None = None) -> None:
        """Start one more worker node named `name` and wait until the cluster counts it; `env` adds environment
        variables for that node's processes (a PYTHONPATH with other sources, say). The count is the cluster's:
        a node ended by `stop_node(kill=True)` counts until Ray's health checks miss it (tens of seconds)."""
        expected = self.alive_nodes() + 1
        self._start([f"--address={self.address}"], name, cpus, env)
        self._wait_for(lambda: self.alive_nodes() >= expected)

    def stop_node(self, name: str, kill: bool = False, wait: bool = True) -> None:
        """Stop the node `name`: SIGTERM to its `ray start --block`, which ends the node's processes as `ray stop` on
        that machine does; with `kill`, SIGKILL to every process of the node at once (a machine that dies: its
        processes end in the same instant). With `wait`, until its `ray start` process has exited."""
        import signal
        import subprocess

        process = self.processes.pop(name)
        if kill:
            for pid in [process.pid, *_descendants(process.pid)]:  # Ray's workers have sessions of their own
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        elif process.poll() is None:
            process.send_signal(signal.SIGTERM)
        if wait:
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _start(self, arguments: list[str], name: str, cpus: int | None = None,
               env: dict[str, str] | None = None) -> None:
        import shutil
        import subprocess
        import sys

        ray_command = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray") or "ray"
        common = ["--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
                  f"--num-cpus={self.cpus_per_node if cpus is None else cpus}", f"--temp-dir={self.temp_dir}"]
        if self.object_store_memory is not None:
            common.append(f"--object-store-memory={self.object_store_memory}")
        log = open(Path(self.temp_dir) / f"{name}.log", "wb")
        self.processes[name] = subprocess.Popen([ray_command, "start", *arguments, *common], stdout=log,
                                                stderr=subprocess.STDOUT, env={**self.environment(), **(env or {})})
        log.close()

    def _wait_for(self, condition: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes.values()):
                raise RuntimeError(f"a ray node failed to start; see the logs in {self.temp_dir}")
            value = condition()
            if value:
                return value
            time.sleep(0.5)
        raise RuntimeError(f"the local ray cluster did not start in {self.start_timeout:.0f} s ({self.temp_dir})")

    def alive_nodes(self) -> int:
        """How many nodes the cluster counts as alive (asked from a new process: a driver's view may lag)."""
        import subprocess
        import sys

        script = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
                  "print(sum(node['Alive'] for node in ray.nodes()))")
        result = subprocess.run([sys.executable, "-c", script, self.address], capture_output=True, text=True,
                                env=self.environment(), timeout=self.start_timeout)
        return int(result.stdout.split()[-1]) if result.returncode == 0 and result.stdout.split() else 0

    def worker_pids(self, marker: str, node: str | None = None) -> list[int]:
        """The processes of this cluster (of its node `node`, if given) whose command line contains `marker`: Ray
        names an actor's process `ray::ClassName` (`ray::ClassName.method` while it runs a call)."""
        found = []
        on_node = set(_descendants(self.processes[node].pid)) if node is not None else set()
        for pid in self._member_pids():
            with contextlib.suppress(OSError):
                if node is not None and pid not in on_node:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        found.append(pid)
        return found

    def _member_pids(self) -> list[int]:
        """The processes of this cluster: those with a file open in its temporary directory (Linux /proc)."""
        if not self.temp_dir or not os.path.isdir("/proc"):
            return []
        members = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                with contextlib.suppress(OSError):
                    fd_dir = f"/proc/{entry}/fd"
                    if any(os.readlink(f"{fd_dir}/{fd}").startswith(self.temp_dir) for fd in os.listdir(fd_dir)):
                        members.append(int(entry))
        return members

    def stop(self) -> None:
        """Stop the nodes and remove the temporary directory."""
        import shutil
        import signal
        import subprocess

        members = self._member_pids()
        processes = list(self.processes.values())
        for process in processes:  # all at once: each node shuts down on its own
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                # A node exits in 2-3 s, but waits 30 s for worker processes that Ray Data leaves behind; those
                # die with it anyway (each `ray start --block` runs a reaper that ends its node's processes).
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        for pid in members:  # agents and workers a node left running (they hold files in our temporary directory)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def _descendants(root: int) -> list[int]:
    """The processes below `root` in the process tree (Linux /proc): a node's raylet, agents and workers."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as stat:
                    children.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found
