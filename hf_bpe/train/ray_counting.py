"""Counting pre-tokens on a Ray cluster, with the same counts as the local worker processes.

`RayCountingEngine(address)` is a counting engine for `hf_bpe.train.count` (`count_pretokens_in_files(...,
engine=RayCountingEngine(address))`, `train_bpe(..., engine="ray")`): the chunks the local engine would count
(byte ranges cut at the same safe places) are counted by one Ray actor per cluster CPU, each keeping one
`PieceCounter` and converting it to pre-token counts once, exactly like a local worker process. The actors then add
their counts in a tree, level by level (actor a receives actor b's counter by ObjectRef, adds it to its own, and b
ends), so no process ever holds more than two counters of distinct pre-tokens; only the final sum reaches the
driver, which runs the merge loop.

A Ray Dataset is counted for training in two lines (`text` being its text column):

    batches = (batch["text"].tolist() for batch in ds.iter_batches(batch_size=1000, batch_format="numpy"))
    counts = count_pretokens_in_iterator(chain.from_iterable(batches), specials, engine=RayCountingEngine())
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hf_bpe.cluster.session import check_code_fingerprint, cluster_cpus, code_fingerprint, dispatch, get, ray_session
from hf_bpe.common.errors import InputError
from hf_bpe.train.piece_counter import PieceCounter


class RayCountingEngine:
    """The `hf_bpe.train.count.CountingEngine` that counts on a Ray cluster (see the module docstring).

    `num_workers` is the number of counting actors (default: one per CPU of the cluster). The result is the same
    Counter the local engine returns: each chunk is counted once by the same `run`, and counts add up exactly.
    """

    def __init__(self, address: str | None = None, *, num_workers: int | None = None) -> None:
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self.address = address
        self.num_workers = num_workers

    def __repr__(self) -> str:
        return f"RayCountingEngine(address={self.address!r})"

    def count(self, tasks: Iterable[Any], run: Callable[[PieceCounter, Any], int], special_tokens: Sequence[str],
              bar: Any) -> Counter[bytes]:
        """Run `run(counter, task)` for every task on the cluster's actors and return the summed pre-token counts.

        An InputError in a task (say invalid UTF-8) is raised here after the tasks before it have finished, so the
        error reported is the one of the first failing task, as with the local engine.
        """
        with ray_session(self.address) as ray:
            workers = self.num_workers or cluster_cpus(ray)
            if hasattr(tasks, "__len__"):
                workers = min(workers, max(1, len(tasks)))  # type: ignore[arg-type]
            actor_class = ray.remote(num_cpus=1)(_CountingWorker)
            actors = [actor_class.remote(run, list(special_tokens), code_fingerprint()) for _ in range(workers)]
            try:
                errors = dispatch(ray, actors, "add", ((index, task) for index, task in enumerate(tasks)),
                                   lambda result: bar.update(result[0]))
                if errors:
                    raise InputError(errors[min(errors)])
                for message in get(ray, [actor.finish.remote() for actor in actors], "counting failed"):
                    if message is not None:
                        raise InputError(message)
                return _sum_in_tree(ray, actors)
            finally:
                for actor in actors:
                    ray.kill(actor)


class _CountingWorker:
    """A Ray actor: one `PieceCounter` fed with many tasks and converted to pre-token counts once (`finish`); then
    the actors add up their counts pairwise (`absorb` another actor's `take`)."""

    def __init__(self, run: Callable[[PieceCounter, Any], int], special_tokens: list[str], fingerprint: str) -> None:
        check_code_fingerprint(fingerprint)
        self.run = run
        self.counter = PieceCounter(special_tokens)
        self.counts: Counter[bytes] = Counter()

    def add(self, index: int, task: Any) -> tuple[int, str | None]:
        """(size for the progress bar, None), or (0, message) when the task's input is bad."""
        try:
            return self.run(self.counter, task), None
        except InputError as error:
            return 0, str(error)

    def finish(self) -> str | None:
        """Convert the pieces to pre-token counts (the counter hands them over and is empty after); an error
        message, or None."""
        try:
            self.counts = self.counter.pretoken_counts()
        except InputError as error:
            return str(error)
        return None

    def take(self) -> Counter[bytes]:
        counts, self.counts = self.counts, Counter()
        return counts

    def absorb(self, other: Counter[bytes]) -> int:
        """Add another actor's counts (passed by ObjectRef) to this one's; the number of distinct pre-tokens."""
        if len(other) > len(self.counts):  # add the smaller counter into the larger
            self.counts, other = other, self.counts
        self.counts.update(other)
        return len(self.counts)


def _sum_in_tree(ray: Any, actors: list[Any]) -> Counter[bytes]:
    """The sum of the actors' counts, added pairwise level by level (actor a absorbs actor b's counts, then b ends),
    so no process holds more than two counters and only the final sum reaches the driver."""
    actors = list(actors)
    while len(actors) > 1:
        pairs = list(zip(actors[::2], actors[1::2]))
        get(ray, [kept.absorb.remote(given.take.remote()) for kept, given in pairs], "adding counts failed")
        for _, given in pairs:
            ray.kill(given)
        actors = actors[::2]
    return get(ray, actors[0].take.remote(), "adding counts failed")
