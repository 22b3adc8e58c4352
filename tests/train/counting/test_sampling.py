"""The sample of a corpus that SuperBPE's stage 2 guesses from (`hf_bpe.train.counting.sampling`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe.train.counting import count, sampling
from hf_bpe.train.counting.count import count_pretokens, count_pretokens_in_files, count_pretokens_in_iterator
from hf_bpe.train.counting.sampling import sample_tasks

ENDOFTEXT = "<|endoftext|>"


class WindowCounts:
    """A convert that asks for one byte in `sample` of the files and keeps the counts of what it is given."""

    def __init__(self, sample: int) -> None:
        self.sample = sample

    def counting_all(self) -> WindowCounts:
        return WindowCounts(1)

    def __call__(self, counts: Counter[bytes]) -> Counter[bytes]:
        assert self.sample == 1  # given the windows, not asked to sample them again
        return counts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6), every=st.integers(1, 5),
       window=st.integers(1, 20), per_task=st.integers(1, 4))
def test_windows_are_every_nth_of_the_files_end_to_end(sizes: list[int], every: int, window: int, per_task: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "WINDOWS_PER_TASK", per_task)
    paths = [f"file{index}" for index in range(len(sizes))]
    tasks = sample_tasks(paths, sizes, every, window)
    # Each window's bytes, by their offset in the files taken end to end.
    offsets = dict(zip(paths, [sum(sizes[:index]) for index in range(len(sizes))]))
    read = [offsets[path] + at for _, windows in tasks for path, start, end in windows for at in range(start, end)]
    # Reference: the window of each multiple of `step` runs to `window` bytes on, or to the end of its file.
    step, total = every * window, sum(sizes)
    file_ends = [sum(sizes[:index + 1]) for index in range(len(sizes))]
    expected = []
    for slot in range(0, total, step):
        file_end = min(end for end in file_ends if end > slot)
        expected.extend(range(slot, min(slot + window, file_end)))
    assert read == expected
    assert all(0 < len(windows) <= per_task for _, windows in tasks)
    assert sum(covered for covered, _ in tasks) == sum(sizes)  # the progress bar ends at the corpus's size


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sampled_count_counts_the_windows_each_as_a_text(workers: int, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "SAMPLE_WINDOW_BYTES", 50)
    monkeypatch.setattr(sampling, "WINDOWS_PER_TASK", 3)
    texts = ["the cat sat on the mat, naïve café 1234567 " * 40 + ENDOFTEXT + "by the way " * 30, "short é",
             "ü" * 400]
    paths = []
    for index, text in enumerate(texts):
        paths.append(tmp_path / f"{index}.txt")
        paths[-1].write_text(text, encoding="utf-8")
    counted = count_pretokens_in_files(paths, [ENDOFTEXT], num_workers=workers, pattern="superword",
                                       convert=WindowCounts(4), progress=False)
    data = [path.read_bytes() for path in paths]
    expected = sum((count_pretokens([data[int(Path(path).stem)][start:end].decode("utf-8", "ignore")], [ENDOFTEXT],
                                    pattern="superword")
                    for _, windows in sample_tasks(list(map(str, paths)), list(map(len, data)), 4, 50)
                    for path, start, end in windows), Counter())
    assert counted == expected
    # About a quarter of the bytes, cut characters dropped.
    assert 0.2 * sum(map(len, data)) < sum(len(pretoken) * count for pretoken, count in counted.items()) < 0.3 * sum(
        map(len, data))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sampled_count_of_texts_counts_their_windows_each_as_a_text(workers: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "SAMPLE_WINDOW_BYTES", 30)
    monkeypatch.setattr(count, "BATCH_CHARS", 100)  # several batches: the workers count them
    texts = ["the cat sat on the mat, naïve café 1234567 " * 9 + ENDOFTEXT + "by the way " * 7, "short é", "ü" * 90]
    counted = count_pretokens_in_iterator(texts * 3, [ENDOFTEXT], num_workers=workers, pattern="superword",
                                          convert=WindowCounts(3), progress=False)
    windows = list(sampling.sample_texts(texts * 3, 3, 30))
    assert sum(map(len, windows)) == pytest.approx(sum(map(len, texts * 3)) / 3, abs=30)
    assert counted == sum((count_pretokens([window], [ENDOFTEXT], pattern="superword") for window in windows),
                          Counter())
