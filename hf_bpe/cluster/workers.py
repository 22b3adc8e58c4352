"""A pool of Ray actors that outlives its workers: a lost worker process or node costs the calls it had, which are
sent again to the others, and a new actor takes its place.

Both Ray engines run their work through `WorkerPool` (one actor per cluster CPU, two calls in flight per actor, so
an actor never idles while the driver sends the next). Why not Ray's own `max_restarts` and `max_task_retries`:

* a counting actor keeps state from call to call (its piece table): an actor restarted by Ray comes back empty, and
  a retried call would leave out the counts of every earlier call of that actor. The pool knows which calls each
  actor has absorbed (`replayable=True`) and sends them all again;
* an actor restarted by Ray waits for its resources on a node that has them: when its node has left, for ever, and
  the calls queued on it with it. The pool sends them to the live actors at once and starts a new actor wherever
  Ray can place one; one that never starts is not waited for.

So a call is retried on another actor when its actor dies (`RayActorError`: the process was killed, ran out of
memory, or its node left); it is retried at most `max_attempts` times (a call that kills every worker it runs on is
a bug to report, not to retry for ever). Every actor reports first whether its hf_bpe sources are the driver's
(`ClusterWorker.hello`); a different version stops the run with an InputError naming the node.

What is not handled: the loss of an object a call needs (an input put into the store by the driver lives on the
driver's node, so only the loss of that node loses it, and the driver with it), and the loss of the driver itself
(Ray then ends its actors; the engines' manifests say what is finished).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hf_bpe.common.errors import InputError

logger = logging.getLogger("hf_bpe.cluster")

# Calls in flight per actor: one running, one waiting.
IN_FLIGHT_PER_ACTOR = 2
# How long the pool waits for a first actor (or, after losing them all, a new one) before giving up.
START_TIMEOUT_SECONDS = 300.0


class ClusterWorker:
    """Base of hf_bpe's Ray actors: checks at start that this node's hf_bpe sources are the driver's."""

    def __init__(self, fingerprint: str) -> None:
        from hf_bpe.cluster.session import code_mismatch

        self.code_mismatch = code_mismatch(fingerprint)

    def hello(self) -> tuple[int, str, str | None]:
        """(process id, node IP, None or why this node's hf_bpe differs from the driver's)."""
        import ray

        return os.getpid(), ray.util.get_node_ip_address(), self.code_mismatch


@dataclass
class _Actor:
    handle: Any
    number: int
    pid: int = 0
    node: str = ""
    in_flight: int = 0
    absorbed: list[tuple[Any, tuple[Any, ...], Any]] = field(default_factory=list)  # (key, args, value) done here

    def describe(self) -> str:
        return f"worker {self.number} (pid {self.pid} on {self.node})" if self.pid else f"worker {self.number}"


class WorkersLost(Exception):
    """Actors died while the pool was not running calls (`call_each`, the engines' final steps)."""

    def __init__(self, actors: list[_Actor]) -> None:
        super().__init__(", ".join(actor.describe() for actor in actors))
        self.actors = actors


class WorkerPool:
    """`size` actors of `actor_class` (a `ClusterWorker`, created with `init_args`), each given `num_cpus` CPUs.

    `run(calls, method, on_result)` calls `actor.method(*args)` for every `(key, args)` of `calls`, pulled only as
    actors are free; results are `(value, error message or None)`. A `stateful` actor keeps what its calls did
    (a counter): when it dies, the calls it had done are lost too. With `replayable` they are sent again (after
    `undo(key, value)` for each, which takes back their progress); without it, such a loss is an InputError.
    """

    def __init__(self, ray: Any, actor_class: type, init_args: tuple[Any, ...], size: int, *, what: str,
                 num_cpus: float = 1, stateful: bool = False, replayable: bool = False, max_attempts: int = 3,
                 undo: Callable[[Any, Any], None] | None = None, rerun: str = "rerun the command",
                 call_name: str = "call") -> None:
        self.ray, self.what, self.max_attempts, self.rerun = ray, what, max_attempts, rerun
        self.call_name = call_name
        self.stateful, self.replayable, self.undo = stateful, replayable, undo or (lambda key, value: None)
        self.remote_class = ray.remote(num_cpus=num_cpus, max_restarts=0)(actor_class)
        self.init_args, self.size = init_args, size
        self.actors: dict[int, _Actor] = {}  # live and started, by number
        self.starting: dict[Any, _Actor] = {}  # hello() ref -> actor not yet known to run
        self.lost: list[str] = []  # what was lost, for messages and tests
        self._numbers = iter(range(1 << 30))
        self._replacements_left = 2 * size + 2
        self._redo: deque[tuple[Any, tuple[Any, ...]]] = deque()
        self._attempts: dict[Any, int] = {}
        for _ in range(size):
            self._start_actor()

    # --- actors ------------------------------------------------------------------------------------------------

    def _start_actor(self) -> None:
        actor = _Actor(self.remote_class.remote(*self.init_args), next(self._numbers))
        self.starting[actor.handle.hello.remote()] = actor

    def _started(self, ref: Any) -> None:
        actor = self.starting.pop(ref)
        try:
            actor.pid, actor.node, mismatch = self.ray.get(ref)
        except self.ray.exceptions.RayError as error:
            self._note_loss(actor, f"{actor.describe()} did not start ({type(error).__name__})")
            return
        if mismatch is not None:
            raise InputError(mismatch)
        self.actors[actor.number] = actor

    def _note_loss(self, actor: _Actor, message: str) -> None:
        self.lost.append(message)
        logger.warning("%s: %s; its work goes to the other workers", self.what, message)
        self.ray.kill(actor.handle, no_restart=True)
        if self._replacements_left > 0:
            self._replacements_left -= 1
            self._start_actor()

    def _lose(self, actor: _Actor, error: BaseException, key: Any) -> None:
        """`actor` died running the call `key`: its absorbed calls go back into the queue (or the run stops)."""
        if self.actors.pop(actor.number, None) is None:
            return  # already counted as lost by an earlier call of the same actor
        cause = " ".join(str(error).split())[:200]
        self._note_loss(actor, f"lost {actor.describe()} while it ran {self._describe(key)} "
                               f"({type(error).__name__}: {cause})")
        self.forget(actor)

    def _describe(self, key: Any) -> str:
        return f"{self.call_name} {key}" if isinstance(key, int) else str(key)

    def live(self) -> list[_Actor]:
        return sorted(self.actors.values(), key=lambda actor: actor.number)

    def _wait_for_an_actor(self, deadline: float) -> None:
        if not self.starting:
            raise InputError(f"{self.what}: every Ray worker was lost ({'; '.join(self.lost)}); {self.rerun}")
        if time.monotonic() > deadline:
            raise InputError(f"{self.what}: no Ray worker started in {START_TIMEOUT_SECONDS:.0f} s "
                             f"({'; '.join(self.lost) or 'is the cluster short of CPUs?'})")
        ready, _ = self.ray.wait(list(self.starting), num_returns=1, timeout=1.0)
        for ref in ready:
            self._started(ref)

    # --- running calls ---------------------------------------------------------------------------------------------

    def run(self, calls: Iterable[tuple[Any, tuple[Any, ...]]], method: str,
            on_result: Callable[[Any, Any], None]) -> dict[Any, str]:
        """Call `method` for every `(key, args)`; `on_result(key, value)` for each success. After the first error
        message no new call is sent (the calls in flight finish). Returns the error messages by key."""
        source: Iterator[tuple[Any, tuple[Any, ...]]] = iter(calls)
        pending: dict[Any, tuple[_Actor, Any, tuple[Any, ...]]] = {}
        errors: dict[Any, str] = {}
        exhausted = False
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            for actor in self.live():
                while actor.in_flight < IN_FLIGHT_PER_ACTOR and not errors:
                    call = self._redo.popleft() if self._redo else None if exhausted else next(source, None)
                    if call is None:
                        exhausted = True
                        break
                    key, args = call
                    pending[getattr(actor.handle, method).remote(*args)] = (actor, key, args)
                    actor.in_flight += 1
            if not pending and (errors or exhausted and not self._redo):
                return errors
            if not pending:
                self._wait_for_an_actor(deadline)
                continue
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            ready, _ = self.ray.wait(list(pending) + list(self.starting), num_returns=1, timeout=1.0)
            for ref in ready:
                if ref in self.starting:
                    self._started(ref)
                    continue
                actor, key, args = pending.pop(ref)
                actor.in_flight -= 1
                try:
                    value, error = self.ray.get(ref)
                except self.ray.exceptions.RayActorError as lost:
                    self._retry(actor, lost, key, args)
                    continue
                except self.ray.exceptions.RayError as failed:
                    raise RuntimeError(f"{self.what}: {self._describe(key)} failed: {failed}") from failed
                if error is not None:
                    errors[key] = error
                    continue
                if self.stateful:
                    actor.absorbed.append((key, args if self.replayable else (), value))
                on_result(key, value)

    def _retry(self, actor: _Actor, error: BaseException, key: Any, args: tuple[Any, ...]) -> None:
        attempts = self._attempts[key] = self._attempts.get(key, 1) + 1
        self._lose(actor, error, key)
        if attempts > self.max_attempts:
            raise InputError(f"{self.what}: {self._describe(key)} lost its Ray worker {self.max_attempts} times "
                             f"({'; '.join(self.lost[-self.max_attempts:])}); {self.rerun}")
        self._redo.append((key, args))

    def call_each(self, method: str, *args: Any) -> list[tuple[_Actor, Any]]:
        """`(actor, actor.method(*args))` for every live actor; WorkersLost names the actors that died meanwhile
        (their absorbed calls are back in the queue for the next `run`)."""
        actors = self.live()
        refs = [getattr(actor.handle, method).remote(*args) for actor in actors]
        return self.gather(actors, refs)

    def gather(self, actors: list[_Actor], refs: list[Any]) -> list[tuple[_Actor, Any]]:
        """The values of `refs`, each a call of the matching actor; WorkersLost as in `call_each`."""
        results, dead = [], []
        for actor, ref in zip(actors, refs):
            try:
                results.append((actor, self.ray.get(ref)))
            except self.ray.exceptions.RayActorError as error:
                self._lose(actor, error, f"{self.what} (final step)")
                dead.append(actor)
            except self.ray.exceptions.RayError as failed:
                raise RuntimeError(f"{self.what}: {failed}") from failed
        if dead:
            raise WorkersLost(dead)
        return results

    def ping(self, actors: list[_Actor]) -> set[int]:
        """The numbers of the `actors` that answer; those that do not are counted as lost."""
        alive = set()
        for actor in actors:
            try:
                self.ray.get(actor.handle.hello.remote())
                alive.add(actor.number)
            except self.ray.exceptions.RayActorError as error:
                self._lose(actor, error, f"{self.what} (final step)")
        return alive

    def forget(self, actor: _Actor) -> None:
        """`actor`'s state is gone (it died, or handed it to an actor that died): its absorbed calls go back into the
        queue, or the run stops when they cannot be sent again."""
        if actor.absorbed and not self.replayable:
            raise InputError(f"{self.what}: lost {actor.describe()} and what its {len(actor.absorbed)} calls had "
                             f"added up, which cannot be sent again (an iterator is read once); {self.rerun}")
        for key, args, value in reversed(actor.absorbed):
            self.undo(key, value)
            self._redo.appendleft((key, args))
        actor.absorbed.clear()

    def retire(self, actor: _Actor, into: _Actor) -> None:
        """`actor` handed its state over to `into` (which now stands for its absorbed calls) and is ended."""
        into.absorbed.extend(actor.absorbed)
        self.actors.pop(actor.number, None)
        self.ray.kill(actor.handle)

    def close(self) -> None:
        """End every actor, started or not."""
        for actor in [*self.actors.values(), *self.starting.values()]:
            self.ray.kill(actor.handle, no_restart=True)
        self.actors.clear()
        self.starting.clear()


__all__ = ["IN_FLIGHT_PER_ACTOR", "ClusterWorker", "WorkerPool", "WorkersLost"]
