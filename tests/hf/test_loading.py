"""Every way of loading a saved directory gives the same ids, each loader in a fresh process.

The six loaders: (1) `AutoTokenizer.from_pretrained(dir)` with hf_bpe unimportable, (2)
`tokenizers.Tokenizer.from_file`, (3) `HFBPETokenizer.from_pretrained`, (4) `AutoTokenizer.from_pretrained(dir,
trust_remote_code=True)`, (5) `hf_bpe.Tokenizer.from_files` with the pattern the directory holds, (6) the tiktoken
twin (`hf_bpe.formats.tiktoken.tiktoken_encoding`) with that pattern. Each runs in its own long-lived subprocess that
answers encode requests over a pipe, so hypothesis can send many examples cheaply. The interpreter is
`$HF_BPE_PYTHON` if set (`.ci/transformers4.sh` points it at a transformers 4 venv), else this one. The directories:
GPT-2's pattern (trained, GPT-2's own files, many special tokens, one saved by hf_bpe 0.1), and one trained with
each preset, with two custom patterns, and a SuperBPE tokenizer (saved with the superword pattern).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import save_tokenizer_directory
from hf_bpe.train.api import train_bpe
from tests import FIXTURES, REPO, load_script
from tests.hf.test_tokenizer import adversarial_text
from tests.pretokenize.test_patterns import ONIGURUMA_TRAPS, QWEN2

PYTHON = os.environ.get("HF_BPE_PYTHON", sys.executable)
EOT = "<|endoftext|>"
LOADERS = ("auto", "tokenizers", "hf_bpe_class", "remote_code", "hf_bpe", "tiktoken")
# Directories trained with other patterns (tests/pretokenize/test_patterns.py has the custom ones).
PATTERN_DIRECTORIES = {"cl100k": "cl100k", "o200k": "o200k", "llama3": "llama3", "superword": "superword",
                       "qwen2": QWEN2, "oniguruma_traps": ONIGURUMA_TRAPS}
DIRECTORY_IDS = ["reference", "gpt2", "many_specials", "saved_by_0_1", *PATTERN_DIRECTORIES]

LOADER_SCRIPT = r'''
import json, sys, traceback
loader, directories, specials = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
if loader == "auto":
    sys.modules["hf_bpe"] = None  # proves AutoTokenizer needs no hf_bpe

def load(directory, special_tokens):
    if loader == "tokenizers":
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(directory + "/tokenizer.json")
        return tok, lambda texts: [encoding.ids for encoding in tok.encode_batch(texts)]
    if loader == "hf_bpe":
        from hf_bpe import Tokenizer
        from hf_bpe.formats.hf_directory import read_directory_ignore_merges, read_directory_pattern
        tok = Tokenizer.from_files(directory + "/vocab.json", directory + "/merges.txt", special_tokens,
                                   pattern=read_directory_pattern(directory),
                                   ignore_merges=read_directory_ignore_merges(directory))
        return tok, lambda texts: [tok.encode(text) for text in texts]
    if loader == "tiktoken":
        from hf_bpe.formats.hf_directory import load_tokenizer_directory
        from hf_bpe.formats.tiktoken import tiktoken_encoding
        loaded = load_tokenizer_directory(directory)
        tok = tiktoken_encoding(*loaded, pattern=loaded.pattern)
        return tok, lambda texts: tok.encode_batch(texts, allowed_special="all")
    if loader == "hf_bpe_class":
        from hf_bpe.hf.tokenizer import HFBPETokenizer
        tok = HFBPETokenizer.from_pretrained(directory)
    else:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(directory, trust_remote_code=loader == "remote_code")
    return tok, lambda texts: tok(texts)["input_ids"]

try:
    loaded = [load(directory, special_tokens) for directory, special_tokens in zip(directories, specials)]
    print(json.dumps({"classes": [type(tok).__name__ for tok, _ in loaded],
                      "hf_bpe_imported": sys.modules.get("hf_bpe") is not None}), flush=True)
except Exception:
    print(json.dumps({"error": traceback.format_exc()}), flush=True)
    sys.exit(1)
for line in sys.stdin:
    request = json.loads(line)
    try:
        print(json.dumps({"ids": loaded[request["directory"]][1](request["texts"])}), flush=True)
    except Exception:
        print(json.dumps({"error": traceback.format_exc()}), flush=True)
'''


def subprocess_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp / "modules"), TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false", PYTHONIOENCODING="utf-8")
    return env


class Loader:
    """One loader in a subprocess: `encode(directory_index, texts)` returns its ids."""

    def __init__(self, name: str, directories: list[Path], specials: list[list[str]], tmp: Path) -> None:
        self.name = name
        self.handshake_answer: dict = {}
        self.process = subprocess.Popen(
            [PYTHON, "-c", LOADER_SCRIPT, name, json.dumps([str(d) for d in directories]), json.dumps(specials)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8", cwd=tmp,
            env=subprocess_env(tmp))

    def handshake(self) -> dict:
        return self._answer()

    def encode(self, directory: int, texts: list[str]) -> list[list[int]]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"directory": directory, "texts": texts}) + "\n")
        self.process.stdin.flush()
        return self._answer()["ids"]

    def _answer(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"loader {self.name} exited with code {self.process.wait()}")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"loader {self.name} failed:\n{answer['error']}")
        return answer

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def ids_in_loaders(names: tuple[str, ...], directory: Path, special_tokens: list[str], texts: list[str],
                   tmp: Path) -> dict[str, list[list[int]]]:
    """The ids of `texts` in each named loader (each in a fresh process) for one saved directory."""
    loaders = {name: Loader(name, [directory], [special_tokens], tmp) for name in names}
    try:
        for loader in loaders.values():
            loader.handshake()
        return {name: loader.encode(0, texts) for name, loader in loaders.items()}
    finally:
        for loader in loaders.values():
            loader.close()


def assert_loaders_give_the_training_segmentation(names: tuple[str, ...], directory: Path, special_tokens: list[str],
                                                  documents: list[str], tmp: Path) -> np.ndarray:
    """Every named loader gives the same ids for the training documents, and their token counts are the directory's
    `token_counts.npy` (the merge loop's final segmentation of the corpus, as training recorded it); returns them."""
    ids = ids_in_loaders(names, directory, special_tokens, documents, tmp)
    for name, got in ids.items():
        assert got == ids["tokenizers"], f"{name} differs from tokenizers"
    trained = np.load(directory / "token_counts.npy")
    every_id = np.concatenate([np.array(document_ids, dtype=np.int64) for document_ids in ids["tokenizers"]])
    encoded = np.bincount(every_id, minlength=len(trained))
    assert encoded.tolist() == trained.tolist()
    return encoded


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf_loading")


@pytest.fixture(scope="module")
def directories(workdir: Path) -> list[tuple[Path, list[str]]]:
    """Four saved tokenizers: trained (500 tokens), GPT-2 (50k), trained with overlapping special tokens, and one
    saved by hf_bpe 0.1 (tests/fixtures/saved-v0.1, whose hf_bpe_tokenizer.py imports `hf_bpe.hf_tokenizer`)."""
    reference = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
    gpt2 = load_gpt2(FIXTURES / "gpt2_vocab.json", FIXTURES / "gpt2_merges.txt")
    many = ["<|endoftext|>", "<|end|>", "<pad>", "<|im_start|>"]
    many_vocab = {**reference[0], **{500 + i: token.encode() for i, token in enumerate(many[1:])}}
    result = []
    for name, (vocab, merges), specials in [("reference", reference, [EOT]), ("gpt2", gpt2, [EOT]),
                                            ("many_specials", (many_vocab, reference[1]), many)]:
        result.append((save_tokenizer_directory(workdir / name, vocab, merges, specials), specials))
    saved_by_0_1 = workdir / "saved-v0.1"
    shutil.copytree(FIXTURES / "saved-v0.1", saved_by_0_1)  # remote code is copied into the HF cache: use a copy
    result.append((saved_by_0_1, [EOT]))
    for name, pattern in PATTERN_DIRECTORIES.items():
        # SuperBPE trains with GPT-2's pattern up to 450 tokens, then with the superword pattern it is saved with.
        stages = {"superword_from": 450} if pattern == "superword" else {"pattern": pattern}
        vocab, merges = train_bpe(FIXTURES / "hf_corpora_sample.txt", 600, many[:2], num_workers=1, progress=False,
                                  **stages)
        result.append((save_tokenizer_directory(workdir / name, vocab, merges, many[:2], pattern=pattern), many[:2]))
    return result


@pytest.fixture(scope="module")
def loaders(directories, workdir: Path) -> Iterator[dict[str, Loader]]:
    paths = [path for path, _ in directories]
    specials = [special_tokens for _, special_tokens in directories]
    started = {name: Loader(name, paths, specials, workdir) for name in LOADERS}
    try:
        for loader in started.values():
            loader.handshake_answer = loader.handshake()
        yield started
    finally:
        for loader in started.values():
            loader.close()


def encode_everywhere(loaders: dict[str, Loader], directory: int, texts: list[str]) -> dict[str, list[list[int]]]:
    return {name: loader.encode(directory, texts) for name, loader in loaders.items()}


def assert_all_equal(results: dict[str, list[list[int]]], texts: list[str]) -> None:
    expected = results["tokenizers"]
    for name, ids in results.items():
        for index, (got, want) in enumerate(zip(ids, expected)):
            assert got == want, f"{name} differs from tokenizers on text {index}: {texts[index]!r}: {got} != {want}"
        assert len(ids) == len(expected)


def test_loaders_give_the_expected_classes(loaders) -> None:
    handshakes = {name: loader.handshake_answer for name, loader in loaders.items()}
    assert set(handshakes["auto"]["classes"]) <= {"PreTrainedTokenizerFast", "TokenizersBackend"}
    assert handshakes["auto"]["hf_bpe_imported"] is False
    assert set(handshakes["hf_bpe_class"]["classes"]) == {"HFBPETokenizer"}
    assert set(handshakes["remote_code"]["classes"]) == {"HFBPETokenizer"}
    assert set(handshakes["hf_bpe"]["classes"]) == {"Tokenizer"}
    assert set(handshakes["tiktoken"]["classes"]) == {"Encoding"}


def fixture_texts() -> list[str]:
    texts = [(FIXTURES / name).read_text(encoding="utf-8")
             for name in ("corpus.en", "address.txt", "german.txt", "tinystories_sample.txt")]
    texts += (FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8").split(EOT)
    texts.append((FIXTURES / "hf_corpora_sample.txt").read_text(encoding="utf-8")[:20000])  # with special tokens
    return texts


@pytest.mark.parametrize("directory", range(len(DIRECTORY_IDS)), ids=DIRECTORY_IDS)
def test_fixture_texts_give_the_same_ids_everywhere(loaders, directory: int) -> None:
    texts = fixture_texts() + ["I'M 1234567 we'Ll\r\n\r\n  x\t\tY aB  \n\n\n<|end|>12"]
    assert_all_equal(encode_everywhere(loaders, directory, texts), texts)


def test_each_directory_holds_its_pattern(directories) -> None:
    # A preset reads back as its owner's text; a custom pattern as it is spelled for tokenizers, which means the
    # same to tiktoken (QWEN2 is spelled alike for both, ONIGURUMA_TRAPS is not).
    from hf_bpe import PATTERNS
    from hf_bpe.formats.hf_directory import read_directory_pattern
    from hf_bpe.pretokenize import tokenizers_pattern
    from hf_bpe.pretokenize.patterns import OTHER_NAMED

    patterns = [read_directory_pattern(path) for path, _ in directories]
    assert patterns == [PATTERNS["gpt2"]] * 4 + [PATTERNS.get(pattern) or OTHER_NAMED.get(pattern)
                                                 or tokenizers_pattern(pattern)
                                                 for pattern in PATTERN_DIRECTORIES.values()]
    assert patterns[-2] == QWEN2 and patterns[-1] != ONIGURUMA_TRAPS


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=st.lists(adversarial_text(), min_size=1, max_size=20),
       directory=st.sampled_from(range(len(DIRECTORY_IDS))))
def test_adversarial_texts_give_the_same_ids_everywhere(loaders, texts: list[str], directory: int) -> None:
    assert_all_equal(encode_everywhere(loaders, directory, texts), texts)


def test_remote_code_without_hf_bpe_installed_explains_what_to_do(directories, workdir: Path) -> None:
    script = ("import sys; sys.modules['hf_bpe'] = None\n"
              "from transformers import AutoTokenizer\n"
              f"AutoTokenizer.from_pretrained({str(directories[0][0])!r}, trust_remote_code=True)\n")
    result = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, cwd=workdir,
                            env=subprocess_env(workdir), timeout=120)
    assert result.returncode != 0
    assert "ImportError: This tokenizer directory was written by hf_bpe" in result.stderr
    assert "pip install hf_bpe" in result.stderr


def test_crosscheck_script_agrees_and_reports_a_mismatch(directories, workdir: Path, capsys) -> None:
    crosscheck = load_script("crosscheck")
    directory = directories[0][0]
    corpora = [FIXTURES / "hf_corpora_sample.txt", FIXTURES / "german.txt"]
    assert crosscheck.main([str(directory), *map(str, corpora)]) == 0
    documents = [part for path in corpora for part in path.read_text(encoding="utf-8").split(EOT) if part]
    assert f"all 4 encoders agree on {len(documents)} documents" in capsys.readouterr().out

    # A tokenizer.json with its merges reversed encodes differently from vocab.json + merges.txt.
    broken = workdir / "broken"
    broken.mkdir()
    for path in directory.iterdir():
        (broken / path.name).write_bytes(path.read_bytes())
    content = json.loads((broken / "tokenizer.json").read_text(encoding="utf-8"))
    content["model"]["merges"].reverse()
    (broken / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
    assert crosscheck.main([str(broken), *map(str, corpora), "--max-docs", "3"]) == 1
    output = capsys.readouterr().out
    assert "tokenizers: 4 of 4 documents differ from hf_bpe" in output
    assert "AutoTokenizer: 4 of 4 documents differ from hf_bpe" in output
    assert "MISMATCH in document 0 (" in output
    assert "at character 8 (token 7): text ' open (a lock) as by a wire." in output
    assert output.count("tiktoken:") == 1  # only its count: it reads merges.txt, so it still agrees


def test_crosscheck_script_names_a_missing_corpus(directories, capsys) -> None:
    crosscheck = load_script("crosscheck")
    assert crosscheck.main([str(directories[0][0]), "missing.txt"]) == 2
    assert "crosscheck: missing.txt: no such file" in capsys.readouterr().err


# ------------------------------------------------------- what save_pretrained keeps, read back by each loader

STATE_SCRIPT = r'''
import json, sys
from transformers import AddedToken, AutoTokenizer
mode, directory, target = sys.argv[1], sys.argv[2], sys.argv[3]
TEXTS = ["Hello world<|endoftext|> again", "say bim bambam [NEW_EOS] <new> ok", "x (bim) xbimx", ""]

def state(tok):
    return {"class": type(tok).__name__, "eos_token": str(tok.eos_token), "pad_token": str(tok.pad_token),
            "padding_side": tok.padding_side, "truncation_side": tok.truncation_side,
            "model_max_length": tok.model_max_length, "chat_template": tok.chat_template,
            "added": {str(i): [t.content, t.special, t.lstrip, t.rstrip, t.single_word]
                      for i, t in sorted(tok.added_tokens_decoder.items())},
            "ids": tok(TEXTS)["input_ids"],
            "padded": tok(TEXTS, padding=True)["input_ids"] if tok.pad_token is not None else None}

if mode == "save":
    from hf_bpe.hf.tokenizer import HFBPETokenizer
    tok = HFBPETokenizer.from_pretrained(directory, padding_side="left", truncation_side="left",
                                         model_max_length=42, eos_token=AddedToken("[NEW_EOS]", lstrip=True))
    tok.pad_token = tok.eos_token
    tok.add_tokens(["bim", AddedToken("<new>", rstrip=True)])
    tok.add_tokens([AddedToken("bambam", single_word=True)])
    tok.chat_template = {"default": "{{ messages[0]['content'] }}", "tools": "{{ tools }}"}
    tok.save_pretrained(target)
    print(json.dumps(state(tok)))
elif mode == "hf_bpe_class":
    from hf_bpe.hf.tokenizer import HFBPETokenizer
    print(json.dumps(state(HFBPETokenizer.from_pretrained(directory))))
elif mode == "fast_resave":
    AutoTokenizer.from_pretrained(directory).save_pretrained(target)
    from hf_bpe.hf.tokenizer import HFBPETokenizer
    print(json.dumps(state(HFBPETokenizer.from_pretrained(target))))
elif mode == "repair":  # our save_pretrained writes back what a fast re-save dropped
    from hf_bpe.hf.tokenizer import HFBPETokenizer
    HFBPETokenizer.from_pretrained(directory).save_pretrained(directory)
    print(json.dumps({}))
else:
    print(json.dumps(state(AutoTokenizer.from_pretrained(directory, trust_remote_code=mode == "remote_code"))))
'''


def run_state_script(workdir: Path, *args: str) -> dict:
    result = subprocess.run([PYTHON, "-c", STATE_SCRIPT, *args], capture_output=True, text=True, cwd=workdir,
                            env=subprocess_env(workdir), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_everything_saved_is_read_back_by_every_loader(directories, workdir: Path) -> None:
    source, target = directories[0][0], workdir / "saved_state"
    saved = run_state_script(workdir, "save", str(source), str(target))
    assert saved["eos_token"] == "[NEW_EOS]" and saved["padding_side"] == "left"
    assert (target / "chat_template.jinja").is_file()
    assert (target / "additional_chat_templates" / "tools.jinja").is_file()
    expected = {key: value for key, value in saved.items() if key != "class"}
    for loader in ("auto", "remote_code", "hf_bpe_class"):
        loaded = run_state_script(workdir, loader, str(target), "")
        loaded_class = loaded.pop("class")
        assert (loaded_class == "HFBPETokenizer") is (loader != "auto"), loader
        assert loaded == expected, loader


def test_a_directory_resaved_by_the_fast_class_still_loads_with_hf_bpe(directories, workdir: Path) -> None:
    source = directories[0][0]
    first = run_state_script(workdir, "auto", str(source), "")
    resaved = run_state_script(workdir, "fast_resave", str(source), str(workdir / "fast_resaved"))
    assert not (workdir / "fast_resaved" / "vocab.json").exists()
    assert resaved.pop("class") == "HFBPETokenizer"
    first.pop("class")
    assert resaved == first
    # trust_remote_code needs hf_bpe_tokenizer.py, which transformers does not copy; re-saving with hf_bpe restores it.
    result = subprocess.run([PYTHON, "-c", STATE_SCRIPT, "remote_code", str(workdir / "fast_resaved"), ""],
                            capture_output=True, text=True, cwd=workdir, env=subprocess_env(workdir), timeout=300)
    assert result.returncode != 0 and "hf_bpe_tokenizer.py" in result.stderr
    run_state_script(workdir, "repair", str(workdir / "fast_resaved"), "")
    repaired = run_state_script(workdir, "remote_code", str(workdir / "fast_resaved"), "")
    assert repaired.pop("class") == "HFBPETokenizer"
    assert repaired == first


# ------------------------------------------- the pattern, kept by HFBPETokenizer and read by tokenize-dataset


@pytest.mark.parametrize("index", [4, len(DIRECTORY_IDS) - 1], ids=["cl100k", "oniguruma_traps"])
def test_hf_bpe_tokenizer_keeps_the_pattern_through_pickles_saves_and_training(directories, workdir: Path,
                                                                               index: int) -> None:
    import pickle

    from hf_bpe.formats.hf_directory import read_directory_pattern
    from hf_bpe.hf.tokenizer import HFBPETokenizer

    source = directories[index][0]
    pattern = read_directory_pattern(source)
    tok = HFBPETokenizer.from_pretrained(source)
    text = "I'M 1234567 we'Ll\r\n\r\n  x\t\tY aB Straße ß 'ßt  \n\n"
    ids = tok(text)["input_ids"]
    assert tok.pattern == pattern
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.pattern == pattern and copy(text)["input_ids"] == ids
    tok.add_tokens(["Straße"])  # the encoder of the added tokens keeps the pattern too
    saved = workdir / f"resaved_{index}"
    tok.save_pretrained(saved)
    assert read_directory_pattern(saved) == pattern
    assert "pattern" not in json.loads((saved / "tokenizer_config.json").read_text(encoding="utf-8"))
    from transformers import AutoTokenizer

    with_added = tok(text)["input_ids"]
    assert with_added != ids and with_added == AutoTokenizer.from_pretrained(saved)(text)["input_ids"]
    assert HFBPETokenizer.from_pretrained(saved)(text)["input_ids"] == with_added
    new = HFBPETokenizer.from_pretrained(source).train_new_from_iterator(
        [(FIXTURES / "tinystories_sample.txt").read_text(encoding="utf-8")], 300)
    assert new.pattern == pattern


def test_tokenize_dataset_encodes_with_the_directory_pattern(directories, tmp_path: Path) -> None:
    from hf_bpe.data.encoders import tokenizer_directory_hash
    from hf_bpe.data.load import load_tokens
    from hf_bpe.data.pipeline import tokenize_dataset
    from hf_bpe.encode.tokenizer import Tokenizer
    from hf_bpe.formats.hf_directory import load_tokenizer_directory

    documents = [text for text in fixture_texts()[:8] if text]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents), encoding="utf-8")
    path = directories[4][0]
    vocab, merges, specials = loaded = load_tokenizer_directory(path)
    tokenize_dataset(path, "json", tmp_path / "out", data_files=[str(data)], num_proc=2, batch_size=2,
                     cache_dir=str(tmp_path / "cache"), progress=False)
    ordinary = Tokenizer(vocab, merges, pattern=loaded.pattern)
    eot = vocab_id(vocab, EOT)
    expected = [token for text in documents for token in [*ordinary.encode(text), eot]]
    assert load_tokens(tmp_path / "out", "train").tolist() == expected
    # The hash of a directory covers its pattern; GPT-2 directories hash the three files only, as before.
    copy = tmp_path / "gpt2_copy"
    shutil.copytree(path, copy)
    gpt2_json = json.loads((directories[0][0] / "tokenizer.json").read_text(encoding="utf-8"))["pre_tokenizer"]
    content = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    content["pre_tokenizer"] = gpt2_json
    (copy / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
    assert tokenizer_directory_hash(copy) != tokenizer_directory_hash(path)
    files_only = hashlib.sha256()
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        content_bytes = (copy / name).read_bytes()
        files_only.update(f"{name}\0{len(content_bytes)}\0".encode() + content_bytes)
    assert tokenizer_directory_hash(copy) == files_only.hexdigest()


def vocab_id(vocab: dict[int, bytes], token: str) -> int:
    return next(token_id for token_id, value in vocab.items() if value == token.encode())
