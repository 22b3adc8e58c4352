"""`spilled_bytes` reads directories Ray creates and deletes while it samples them."""

from __future__ import annotations

from pathlib import Path

from hf_bpe.cluster.store_stats import spilled_bytes


def test_spilled_bytes_sums_the_spill_files_of_every_session(tmp_path: Path) -> None:
    for session, sizes in (("session_1", [3, 5]), ("session_2", [7])):
        directory = tmp_path / session / "ray_spilled_objects_node"
        directory.mkdir(parents=True)
        for index, size in enumerate(sizes):
            (directory / f"object_{index}").write_bytes(b"x" * size)
    (tmp_path / "session_1" / "not_spilled").write_bytes(b"x" * 100)
    assert spilled_bytes(tmp_path) == 15


def test_a_spill_directory_gone_between_the_glob_and_the_scan_counts_as_empty(tmp_path: Path) -> None:
    # A dangling link is what the glob finds and the scan cannot open: the state of a directory removed in between.
    session = tmp_path / "session_1"
    session.mkdir()
    (session / "ray_spilled_objects_gone").symlink_to(tmp_path / "removed")
    kept = session / "ray_spilled_objects_node"
    kept.mkdir()
    (kept / "object").write_bytes(b"x" * 4)
    assert spilled_bytes(tmp_path) == 4
