"""Counting pre-tokens on a Ray cluster, with the same counts as the local worker processes.

`RayCountingEngine(address)` is a counting engine for `hf_bpe.train.counting.count` (`count_pretokens_in_files(...,
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

from hf_bpe.cluster.session import cluster_cpus, code_fingerprint, ray_session
from hf_bpe.cluster.workers import ClusterWorker, WorkerPool, WorkersLost
from hf_bpe.common.errors import InputError
from hf_bpe.train.counting.local_engine import check_num_workers
from hf_bpe.train.counting.piece_counter import PieceCounter, add_counts


class RayCountingEngine:
    """The `hf_bpe.train.counting.count.CountingEngine` that counts on a Ray cluster (see the module docstring).

    `num_workers` is the number of counting actors (default: one per CPU of the cluster). The result is the same
    Counter the local engine returns: each chunk is counted once by the same `run`, and counts add up exactly.

    A lost worker (its process killed, its node gone) loses the counts of every chunk it had counted: those chunks
    are counted again by the other actors (`hf_bpe.cluster.workers`), so the counts are still exact; `lost` lists
    the workers lost in the last `count`. Batches of texts from an iterator are read once and not kept, so losing
    a worker that had counted some of them stops the run with an InputError.
    """

    def __init__(self, address: str | None = None, *, num_workers: int | None = None) -> None:
        check_num_workers(num_workers)
        self.address = address
        self.num_workers = num_workers
        self.lost: list[str] = []

    def __repr__(self) -> str:
        return f"RayCountingEngine(address={self.address!r})"

    def count(self, tasks: Iterable[Any], run: Callable[[PieceCounter, Any], int], special_tokens: Sequence[str],
              bar: Any) -> Counter[bytes]:
        """Run `run(counter, task)` for every task on the cluster's actors and return the summed pre-token counts.

        An InputError in a task (say invalid UTF-8) is raised here after the tasks before it have finished, so the
        error reported is the one of the first failing task, as with the local engine. Tasks given as a list (file
        chunks) are sent again when their worker is lost; tasks from an iterator are not (see the class).
        """
        replayable = isinstance(tasks, (list, tuple))
        with ray_session(self.address) as ray:
            workers = self.num_workers or cluster_cpus(ray)
            if hasattr(tasks, "__len__"):
                workers = min(workers, max(1, len(tasks)))  # type: ignore[arg-type]
            pool = WorkerPool(ray, _CountingWorker, (run, list(special_tokens), code_fingerprint()), workers,
                              what="counting", stateful=True, replayable=replayable,
                              undo=lambda index, size: bar.update(-size), call_name="chunk")
            try:
                calls: Iterable[tuple[int, tuple[int, Any]]] = (
                    (index, (index, task)) for index, task in enumerate(tasks))
                while True:
                    errors = pool.run(calls, "add", lambda index, size: bar.update(size))
                    if errors:
                        raise InputError(errors[min(errors)])
                    try:
                        return _finish_and_sum(pool)
                    except WorkersLost:
                        calls = ()  # the lost workers' chunks wait in the pool: count them again, then finish
            finally:
                self.lost = list(pool.lost)
                pool.close()


def _finish_and_sum(pool: WorkerPool) -> Counter[bytes]:
    """Convert every actor's pieces to pre-token counts, then add the actors' counts pairwise, level by level (actor
    a absorbs actor b's counts, then b ends), so no process holds more than two counters and only the final sum
    reaches the driver. WorkersLost when an actor dies meanwhile: the chunks whose counts died with it are then
    back in the pool's queue."""
    for _, message in pool.call_each("finish"):
        if message is not None:
            raise InputError(message)
    actors = pool.live()
    while len(actors) > 1:
        pairs = list(zip(actors[::2], actors[1::2]))
        refs = [kept.handle.absorb.remote(given.handle.take.remote()) for kept, given in pairs]
        failed = []
        for (kept, given), ref in zip(pairs, refs):
            try:
                pool.ray.get(ref)
                pool.retire(given, into=kept)
            except pool.ray.exceptions.RayActorError:
                failed.append((kept, given))
        if failed:
            for kept, given in failed:
                # Either may have died. A given actor still alive has handed its counts over (take ran), so they
                # are lost with the absorb that failed; a kept actor still alive never ran absorb and is whole.
                alive = pool.ping([kept, given])
                if given.number in alive:
                    pool.forget(given)
            raise WorkersLost([actor for pair in failed for actor in pair if actor.number not in pool.actors])
        actors = actors[::2]
    [(_, counts)] = pool.gather(actors, [actors[0].handle.take.remote()])
    return counts


class _CountingWorker(ClusterWorker):
    """A Ray actor: one `PieceCounter` fed with many tasks and converted to pre-token counts once (`finish`); then
    the actors add up their counts pairwise (`absorb` another actor's `take`)."""

    def __init__(self, run: Callable[[PieceCounter, Any], int], special_tokens: list[str], fingerprint: str) -> None:
        super().__init__(fingerprint)
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
            self.counts = add_counts(self.counts, self.counter.pretoken_counts())
        except InputError as error:
            return str(error)
        return None

    def take(self) -> Counter[bytes]:
        counts, self.counts = self.counts, Counter()
        return counts

    def absorb(self, other: Counter[bytes]) -> int:
        """Add another actor's counts (passed by ObjectRef) to this one's; the number of distinct pre-tokens."""
        self.counts = add_counts(self.counts, other)
        return len(self.counts)
