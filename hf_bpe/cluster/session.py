"""Connecting to a Ray cluster, and what every hf_bpe job on one shares: the code check and keeping actors busy.

The Ray engines are `hf_bpe.train.counting.ray_counting.RayCountingEngine` (counting for training) and
`hf_bpe.data.ray_tokenize.tokenize_dataset_ray` (token arrays); both are optional (`pip install "hf_bpe[ray]"`), and
ray is imported only when they run.

Ray workers must import the same hf_bpe as the driver: install it on every node (`pip install "hf_bpe[ray]"`, which
also installs its dependencies there), or ship the driver's package directory with the runtime environment,
`ray_session(address, runtime_env=project_runtime_env())` from Python or `ray job submit --runtime-env-json
'{"py_modules": ["/path/to/hf_bpe"]}' -- hf-bpe ...` (the dependencies must still be on the nodes). Workers compare a
hash of their hf_bpe sources with the driver's and refuse to run a different version, since results must match.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from hf_bpe.common.errors import InputError

RAY_INSTALL_HINT = "pip install 'hf_bpe[ray]' (or pip install ray)"
# Where hf_bpe's work runs: worker processes on this machine, or a Ray cluster. Each protocol has one switch over these
# names: `hf_bpe.train.counting.count.counting_engine` for counting, `hf_bpe.data.engines.tokenize_dataset_on` for
# token arrays.
ENGINES = ("local", "ray")
# The hf_bpe package directory, as Ray workers must import it (found from here: this module must not import hf_bpe's
# top level, which imports the stages above it).
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def check_engine(engine: str, ray_address: str | None, *, asked_as: str = "engine='ray'") -> None:
    """ValueError for an unknown engine or a Ray address without the ray engine; InputError when the ray engine is
    asked for (as `asked_as` says) and ray is not installed. Made before any work.

    >>> check_engine("spark", None)
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of 'local', 'ray', got 'spark'
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
    if engine != "ray" and ray_address is not None:
        raise ValueError(f"ray_address={ray_address!r} is only used with engine='ray'")
    if engine == "ray":
        require_ray(asked_as)


def require_ray(what: str = "the ray engine") -> ModuleType:
    """The `ray` module; an InputError saying that `what` needs it, and how to install it, when it is missing.

    The one check behind `engine="ray"`, the CLI's `--engine ray` and `ray_session`: this module itself imports
    without ray, so that check can run before any work.
    """
    try:
        import ray
    except ImportError:
        raise InputError(f"{what} needs the ray package: {RAY_INSTALL_HINT}") from None
    return ray


def project_runtime_env() -> dict[str, Any]:
    """The runtime environment that lets Ray workers import this very hf_bpe: the package directory as a py_module."""
    return {"py_modules": [str(PACKAGE_DIR)], "excludes": ["__pycache__", "*.pyc"]}


@contextlib.contextmanager
def ray_session(address: str | None, runtime_env: dict[str, Any] | None = None) -> Iterator[Any]:
    """The `ray` module, connected to the cluster at `address`; a connection made here is closed on exit.

    With `address=None` Ray's own rules apply: RAY_ADDRESS, else the cluster last started on this machine with
    `ray start`, else a new local cluster. An existing connection (`ray.init` called earlier) is used as it is.
    `runtime_env` (e.g. `project_runtime_env()`) is passed to `ray.init`.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    check_reachable(address)
    try:
        ray.init(address=address, runtime_env=runtime_env, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as error:
        where = f"at {address}" if address else "(RAY_ADDRESS, or a new local cluster)"
        raise InputError(f"could not connect to the Ray cluster {where}: {' '.join(str(error).split())}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def check_reachable(address: str | None, timeout: float = 10.0) -> None:
    """InputError when nothing listens at a `host:port` (or `ray://host:port`) address: Ray itself would retry for
    minutes. Other forms (None, "auto", "local") are left to Ray.

    >>> check_reachable("127.0.0.1:1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused); start it ...
    """
    import socket

    if not address or ":" not in address:
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not port.isdigit():
        raise InputError(f"--ray-address {address!r} is not host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise InputError(f"cannot reach the Ray cluster at {address} ({reason}); start it with `ray start --head` or "
                         f"check --ray-address") from None


def cluster_cpus(ray: Any) -> int:
    """The number of CPUs the connected cluster has (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


# --- the same code on every worker ------------------------------------------------------------------------------


def code_fingerprint() -> str:
    """sha256 of hf_bpe's Python sources, every subpackage included: workers check they run the same code as the
    driver (same results)."""
    import hashlib

    package = PACKAGE_DIR
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def code_mismatch(expected: str) -> str | None:
    """Why this worker may not run the driver's job: None when its hf_bpe sources hash to `expected` (the driver's
    `code_fingerprint()`), else a message naming this node and its package directory."""
    if code_fingerprint() == expected:
        return None
    import socket

    return (f"the hf_bpe on Ray node {socket.gethostname()} ({PACKAGE_DIR}) differs from the driver's: install the "
            f"same version on every node, or ship the driver's with runtime_env={{'py_modules': [hf_bpe]}}")
