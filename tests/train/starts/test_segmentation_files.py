"""SuperBPE's stage-2 segmentation kept in files between passes (hf_bpe.train.starts.segmentation_files). That the
merges and token counts are those of segmenting again is tested with the passes' other ways
(tests/train/starts/test_superword.py, `test_cuts_and_samples_change_no_merge_and_no_token_count`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from hf_bpe import train_bpe, train_bpe_from_iterator
from hf_bpe.common.errors import InputError
from hf_bpe.train.starts import superword_passes
from hf_bpe.train.starts.segmentation_files import (
    count_segmentation_files,
    room_for,
    save_segmentation,
    segmentation_files,
)
from tests import FIXTURES

ENDOFTEXT = "<|endoftext|>"


def segmented(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, size=20)
    return rng.integers(0, 300, size=int(lengths.sum())).astype(np.uint16), lengths, rng.integers(1, 9, size=20)


def total_ids(data: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> int:
    return int((lengths * counts).sum()) + int(data.sum())


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_each_file_is_counted_once_in_this_process_or_in_a_pool(tmp_path: Path, workers: int) -> None:
    arrays = [segmented(seed) for seed in range(5)]
    for each in arrays:
        save_segmentation(tmp_path, each)
    files = segmentation_files(tmp_path)
    assert len(files) == 5 and not list(tmp_path.glob("*.part"))
    found: list[int] = []
    count_segmentation_files(files, lambda *each: total_ids(*each), found.append, workers)
    assert sorted(found) == sorted(total_ids(*each) for each in arrays)


def test_a_directory_that_cannot_take_the_files_is_one_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(InputError, match=rf"^{missing}: cannot keep SuperBPE's stage-2 segmentation: "):
        save_segmentation(missing, segmented(0))


def test_the_files_are_used_only_with_room_for_them_twice(tmp_path: Path) -> None:
    assert room_for(tmp_path, 1000, 2)
    assert not room_for(tmp_path, 1 << 60, 2)


def test_the_python_api_keeps_the_segmentation_in_a_temporary_directory_it_removes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    used: list[str] = []
    original = superword_passes.StageTwoPass.__call__

    def noting_the_directory(self: superword_passes.StageTwoPass, counts: object) -> object:
        if self.keep_in is not None:
            used.append(self.keep_in)
        return original(self, counts)  # type: ignore[arg-type]

    monkeypatch.setattr(superword_passes.StageTwoPass, "__call__", noting_the_directory)
    monkeypatch.setattr(superword_passes, "MIN_SAMPLED_GUESS", 1 << 30)  # every pair counted in a pass of its own
    texts = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(ENDOFTEXT)
    kept = train_bpe_from_iterator(texts, 600, [ENDOFTEXT], num_workers=2, superword_from=450)
    assert used and Path(used[0]).parent == Path(tempfile.gettempdir()) and not Path(used[0]).exists()
    path = tmp_path / "corpus.txt"
    path.write_text(ENDOFTEXT.join(texts), encoding="utf-8")
    used.clear()
    assert train_bpe(path, 600, [ENDOFTEXT], num_workers=1, superword_from=450, progress=False) == kept
    assert used and not Path(used[0]).exists()
    monkeypatch.setattr(superword_passes, "room_for", lambda *arguments: False)  # no room: segmented again
    used.clear()
    assert train_bpe_from_iterator(texts, 600, [ENDOFTEXT], num_workers=2, superword_from=450) == kept
    assert not used
