"""A real Ray cluster of several nodes on this machine (loopback), for tests and benchmarks.

Each node is a `ray start` process group; `stop` ends every process the cluster started, so nothing is left behind.
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

    >>> with LocalRayCluster(num_nodes=2, cpus_per_node=1) as cluster:  # doctest: +SKIP
    ...     counts = count_pretokens_in_files(paths, engine=RayCountingEngine(cluster.address))
    """

    def __init__(self, num_nodes: int = 2, cpus_per_node: int = 1, start_timeout: float = 120.0,
                 stop_timeout: float = 8.0) -> None:
        self.num_nodes, self.cpus_per_node, self.start_timeout = num_nodes, cpus_per_node, start_timeout
        self.stop_timeout = stop_timeout
        self.processes: list[Any] = []
        self.address = ""
        self.temp_dir = ""

    def environment(self) -> dict[str, str]:
        """Environment variables for the nodes and for drivers joining them: no usage stats; no token
        authentication, which keeps the cluster apart from the token file other clusters on this machine rewrite."""
        return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}

    def __enter__(self) -> LocalRayCluster:
        import tempfile

        self.temp_dir = tempfile.mkdtemp(prefix="hfbpe-ray-")  # short: Ray's socket paths must fit in 107 bytes
        common = ["--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
                  f"--num-cpus={self.cpus_per_node}", f"--temp-dir={self.temp_dir}"]
        try:
            self._start(["--head", "--port=0", "--include-dashboard=false", *common], "head")
            address_file = Path(self.temp_dir) / "ray_current_cluster"
            self.address = self._wait_for(lambda: address_file.is_file() and address_file.read_text().strip())
            for node in range(1, self.num_nodes):
                self._start([f"--address={self.address}", *common], f"worker{node}")
            self._wait_for(lambda: self._alive_nodes() >= self.num_nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _start(self, arguments: list[str], name: str) -> None:
        import shutil
        import subprocess
        import sys

        ray_command = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray") or "ray"
        log = open(Path(self.temp_dir) / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen([ray_command, "start", *arguments], stdout=log,
                                               stderr=subprocess.STDOUT, env=self.environment()))
        log.close()

    def _wait_for(self, condition: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes):
                raise RuntimeError(f"a ray node failed to start; see the logs in {self.temp_dir}")
            value = condition()
            if value:
                return value
            time.sleep(0.5)
        raise RuntimeError(f"the local ray cluster did not start in {self.start_timeout:.0f} s ({self.temp_dir})")

    def _alive_nodes(self) -> int:
        import subprocess
        import sys

        script = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
                  "print(sum(node['Alive'] for node in ray.nodes()))")
        result = subprocess.run([sys.executable, "-c", script, self.address], capture_output=True, text=True,
                                env=self.environment(), timeout=self.start_timeout)
        return int(result.stdout.split()[-1]) if result.returncode == 0 and result.stdout.split() else 0

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
        for process in self.processes:  # all at once: each node shuts down on its own
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
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
