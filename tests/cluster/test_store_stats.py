"""`spilled_bytes` reads directories that Ray creates and removes while a monitor samples them."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from hf_bpe.cluster.store_stats import spilled_bytes


def test_spilled_bytes_sums_the_spill_files_of_every_session_once(tmp_path: Path) -> None:
    for session, sizes in (("session_1", [3, 5]), ("session_2", [7])):
        directory = tmp_path / session / "ray_spilled_objects_node"
        directory.mkdir(parents=True)
        for index, size in enumerate(sizes):
            (directory / f"object_{index}").write_bytes(b"x" * size)
    (tmp_path / "session_1" / "not_spilled").write_bytes(b"x" * 100)
    (tmp_path / "session_latest").symlink_to(tmp_path / "session_2")  # as Ray links its current session
    assert spilled_bytes(tmp_path) == 15


def test_sessions_and_spill_directories_removed_while_it_looks_count_as_empty(tmp_path: Path) -> None:
    # A thread makes and removes sessions and spill directories as fast as it can, as a cluster starting and
    # stopping does; every sample must count what it finds and never raise for what went meanwhile.
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for name in ("session_a", "session_b"):
                directory = tmp_path / name / "ray_spilled_objects_node"
                directory.mkdir(parents=True, exist_ok=True)
                (directory / "object").write_bytes(b"x")
            for name in ("session_a", "session_b"):
                shutil.rmtree(tmp_path / name, ignore_errors=True)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        samples = [spilled_bytes(tmp_path) for _ in range(3000)]
    finally:
        stop.set()
        thread.join()
    assert set(samples) <= {0, 1, 2}
