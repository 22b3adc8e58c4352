"""How the count of SuperBPE's last stage-2 merge compares with the n-th largest count of stage 2's initial pairs,
for n stage-2 merges: the ratio that `hf_bpe.train.starts.superword_words.guess_last_count` guesses from (a half).

    python scripts/superword_last_count.py $SHARED/corpora/en_gcide.txt --settings 32000:28000 64000:56000

For each corpus and setting (vocab size : transition), it trains SuperBPE with `train_bpe` in this process and
prints n, the n-th largest count among the exact pair counts of stage 2 (those the merge loop's cut is chosen from),
the count of the last merge, and their ratio. It watches two places of the training (the pair table's `at_least`,
called once on the exact counts, and the merge loop's `RankedStore.pop`), so it is a diagnostic, not a benchmark.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from hf_bpe import train_bpe
from hf_bpe.train.merging import merge_loop
from hf_bpe.train.starts import tallies


def last_count_ratio(corpus: Path, vocab_size: int, transition: int) -> tuple[int, int, int]:
    """(n stage-2 merges, the n-th largest exact stage-2 pair count, the last merge's count)."""
    seen: dict[str, np.ndarray] = {}
    popped: list[int] = []
    at_least, pop = tallies.PairTally.at_least, merge_loop.RankedStore.pop

    def watched_at_least(tally: tallies.PairTally, count: int) -> tallies.PairTally:
        seen["totals"] = np.sort(tally.totals)[::-1]
        return at_least(tally, count)

    def watched_pop(store: merge_loop.RankedStore) -> str | None:
        pair = pop(store)
        if pair is not None:
            popped.append(int(store.corpus.pair_counts[pair]))
        return pair

    tallies.PairTally.at_least, merge_loop.RankedStore.pop = watched_at_least, watched_pop  # type: ignore
    try:
        train_bpe(corpus, vocab_size, ["<|endoftext|>"], superword_from=transition)
    finally:
        tallies.PairTally.at_least, merge_loop.RankedStore.pop = at_least, pop  # type: ignore
    merges = vocab_size - transition
    return merges, int(seen["totals"][merges - 1]), popped[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", type=Path)
    parser.add_argument("--settings", nargs="+", default=["32000:28000"], help="vocab size:transition")
    args = parser.parse_args()
    print("| corpus | vocab / transition | n | n-th largest pair count | last merge's count | ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for corpus in args.corpus:
        for setting in args.settings:
            vocab_size, transition = map(int, setting.split(":"))
            merges, nth, last = last_count_ratio(corpus, vocab_size, transition)
            print(f"| {corpus.name} | {vocab_size:,} / {transition:,} | {merges:,} | {nth:,} | {last:,} | "
                  f"{last / nth:.3f} |", flush=True)


if __name__ == "__main__":
    main()
