"""Tests of the Ray engines on real local clusters; every module here needs ray (skipped without it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hf_bpe.cluster.local_cluster import LocalRayCluster


@contextmanager
def connected_cluster(object_store_memory: int) -> Iterator[LocalRayCluster]:
    """A two-node Ray cluster on this machine (one CPU each), with this process connected to it for the block.

    One connection serves a whole test module (the engines use an existing one); CLI tests connect by address with the
    environment set here.
    """
    import ray

    with LocalRayCluster(num_nodes=2, cpus_per_node=1, object_store_memory=object_store_memory) as running:
        saved = dict(os.environ)
        os.environ.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"})
        if ray.is_initialized():  # left over by another test module
            ray.shutdown()
        ray.init(address=running.address, logging_level="WARNING", log_to_driver=False)
        try:
            yield running
        finally:
            ray.shutdown()
            os.environ.clear()
            os.environ.update(saved)
