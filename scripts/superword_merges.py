"""Record SuperBPE's merges on a corpus (their count and sha256), to compare the merges of two versions of hf_bpe:

    python scripts/superword_merges.py CORPUS --vocab-size 32000 --superword-from 28000 --json OUT.json

Each record: the corpus (path and size), the settings, the number of merges, the sha256 of the merges (each merge's
two tokens' hex joined by a space, one merge a line) and of the vocab, the wall time, and the hf_bpe commit given by
`git describe` of the package's checkout when there is one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--superword-from", type=int, required=True)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--engine", default="local")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    import hf_bpe
    from hf_bpe import train_bpe

    checkout = Path(hf_bpe.__file__).resolve().parent.parent
    commit = subprocess.run(["git", "-C", str(checkout), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    start = time.perf_counter()
    vocab, merges = train_bpe(args.corpus, args.vocab_size, ["<|endoftext|>"], superword_from=args.superword_from,
                              num_workers=args.workers, engine=args.engine, progress=False)
    record = {
        "corpus": [os.path.basename(path) for path in args.corpus],
        "bytes": sum(os.path.getsize(path) for path in args.corpus),
        "vocab_size": args.vocab_size, "superword_from": args.superword_from, "num_merges": len(merges),
        "merges_sha256": merges_sha256(merges),
        "vocab_sha256": hashlib.sha256("\n".join(f"{i} {token.hex()}" for i, token in sorted(vocab.items()))
                                       .encode()).hexdigest(),
        "seconds": round(time.perf_counter() - start, 1), "commit": commit,
    }
    with open(args.json, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
    print(json.dumps(record))


def merges_sha256(merges: list[tuple[bytes, bytes]]) -> str:
    """The sha256 of the merges: each merge's two tokens' hex joined by a space, one merge a line."""
    return hashlib.sha256("\n".join(f"{left.hex()} {right.hex()}" for left, right in merges).encode()).hexdigest()


if __name__ == "__main__":
    main()
