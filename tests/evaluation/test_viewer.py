"""The token viewer (hf_bpe.evaluation.viewer): readable tokens for every code point and every byte, the plain and
ANSI views, the HTML page's structure, and the page in a real browser (headless Chromium)."""

from __future__ import annotations

import html.parser
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.encode.tokenizer import Tokenizer
from hf_bpe.evaluation.baselines import gpt2_tokenizer
from hf_bpe.evaluation.viewer import (
    ANSI_BACKGROUNDS,
    HTML_BACKGROUNDS,
    readable_token,
    render_ansi,
    render_html,
    render_plain,
    show_tokens,
    split_characters,
    token_spans,
)

SAMPLE = "Hello, wörld! 東京は雨です。 😀 emoji\n\tdef f(x):\n        return x<|endoftext|>end"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def is_safe(shown: str) -> bool:
    """No control character (C0, DEL, C1) and no surrogate: nothing a terminal or a page would act on."""
    return not any(unicodedata.category(char) in ("Cc", "Cs") for char in shown)


def test_every_code_point_reads_as_itself_or_a_visible_mark() -> None:
    marks = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        shown = readable_token(char.encode())
        if char in marks:
            assert shown == marks[char]
        elif unicodedata.category(char) == "Cc":
            assert shown == "".join(f"<{byte:02x}>" for byte in char.encode()), hex(code)
        else:
            assert shown == char, hex(code)


def test_every_part_of_every_multibyte_character_is_shown_as_bytes() -> None:
    for code in [*range(0x80, 0xD800, 7), *range(0xE000, 0x110000, 61), 0x10FFFF]:
        data = chr(code).encode()
        for cut in range(1, len(data)):
            for part in (data[:cut], data[cut:]):
                assert readable_token(part) == "".join(f"<{byte:02x}>" for byte in part)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=12))
def test_any_bytes_are_shown_safely(token: bytes) -> None:
    shown = readable_token(token)
    assert is_safe(shown)
    # Reading the marks back gives the bytes again (a literal "<xx>" in a token is the only ambiguity).
    if b"<" not in token:
        back = re.sub(r"<([0-9a-f]{2})>", lambda match: chr(0xDC00 + int(match.group(1), 16))
                      if int(match.group(1), 16) >= 0x80 else chr(int(match.group(1), 16)), shown)
        back = back.translate(str.maketrans({"␣": " ", "↵": "\n", "⇥": "\t", "␍": "\r"}))
        if not {"␣", "↵", "⇥", "␍"} & set(token.decode("utf-8", "replace")):
            assert back.encode("utf-8", "surrogateescape") == token


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20))
def test_split_characters_name_the_character_each_byte_token_belongs_to(text: str) -> None:
    bytes_only = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    spans = token_spans(bytes_only, text)
    notes = split_characters(spans)
    expected = [[char] for char in text.encode("utf-8", "replace").decode() for _ in char.encode()
                if len(char.encode()) > 1]
    assert [note for note, span in zip(notes, spans) if span.token[0] >= 0x80] == expected
    assert all(note == [] for note, span in zip(notes, spans) if span.token[0] < 0x80)


def test_plain_and_ansi_views_show_every_token() -> None:
    tokenizer = gpt2_tokenizer()
    spans = token_spans(tokenizer, SAMPLE)
    assert [span.id for span in spans] == tokenizer.encode(SAMPLE)
    assert show_tokens(tokenizer, SAMPLE) == "|".join(span.text for span in spans)
    plain = render_plain(spans)
    assert plain.replace("|\n", "|") == "|".join(span.text for span in spans)  # "|" may be inside a token too
    assert len(plain.splitlines()) == 1 + sum(b"\n" in span.token for span in spans)
    with_ids = render_plain(spans, show_ids=True).replace("|\n", "|")
    assert with_ids == "|".join(f"{span.text}[{span.id}]" for span in spans)
    ansi = render_ansi(spans)
    backgrounds = re.findall(r"\x1b\[48;5;(\d+);38;5;16m", ansi)
    assert [int(colour) for colour in backgrounds] == [ANSI_BACKGROUNDS[index % len(ANSI_BACKGROUNDS)]
                                                       for index in range(len(spans))]
    assert ANSI_ESCAPE.sub("", ansi).replace("\n", "") == "".join(span.text for span in spans)
    assert "<e6>" in plain or "<e4>" in plain or "<e9>" in plain  # a character split across tokens, as bytes


class PageParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[tuple[str, str, str]] = []  # (class, title, text)
        self.open: list[str] = []
        self.counts = ""
        self.tags: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        attributes = dict(attrs)
        self.links += [value or "" for name, value in attrs if name in ("src", "href")]
        if tag == "span" and "t" in (attributes.get("class") or "").split():
            self.tokens.append((attributes["class"] or "", attributes.get("title") or "", ""))
        if tag == "p" and attributes.get("class") == "counts":
            self.counts = "\0"
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open[-1:] == ["span"] and self.tokens:
            kind, title, text = self.tokens[-1]
            self.tokens[-1] = (kind, title, text + data)
        elif self.counts == "\0":
            self.counts = data


def test_html_page_structure() -> None:
    tokenizer = gpt2_tokenizer()
    spans = token_spans(tokenizer, SAMPLE)
    page = render_html(spans, SAMPLE, "sample <b>")
    parser = PageParser()
    parser.feed(page)
    assert page.startswith("<!DOCTYPE html>") and "<title>sample &lt;b&gt;</title>" in page
    assert parser.tags <= {"html", "head", "meta", "title", "style", "body", "h1", "p", "div", "span"}  # no script
    assert parser.links == []  # nothing loaded from anywhere
    assert len(parser.tokens) == len(spans)
    for index, ((kind, title, text), span) in enumerate(zip(parser.tokens, spans)):
        assert kind == f"t c{index % len(HTML_BACKGROUNDS)}"
        assert title.startswith(f"id {span.id} · bytes {span.token.hex(' ')}")
        assert text == span.text
    split = [title for _, title, _ in parser.tokens if "part of 東" in title]
    assert split and all("(U+6771: e6 9d b1)" in title for title in split)
    assert parser.counts == f"{len(spans)} tokens ({len(set(tokenizer.encode(SAMPLE)))} distinct), {len(SAMPLE)} " \
                            f"characters, {len(SAMPLE.encode())} bytes: {len(SAMPLE.encode()) / len(spans):.2f} " \
                            "bytes per token"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="needs headless Chromium (apt-get install chromium; .ci/run does)")
def test_the_page_shows_coloured_tokens_in_a_real_browser(tmp_path: Path) -> None:
    from PIL import Image

    tokenizer = gpt2_tokenizer()
    text = "The quick brown fox jumps over the lazy dog. " * 6 + "東京"
    spans = token_spans(tokenizer, text)
    page = tmp_path / "tokens.html"
    page.write_text(render_html(spans, text, "browser test"), encoding="utf-8")
    screenshot = tmp_path / "shot.png"
    done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={screenshot}", "--window-size=900,700", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert screenshot.is_file(), done.stderr[-2000:]
    with Image.open(screenshot) as image:
        pixels = image.convert("RGB").getcolors(maxcolors=1 << 24)
    assert pixels is not None
    counts = {colour: count for count, colour in pixels}
    shown = [counts.get(tuple(bytes.fromhex(colour[1:])), 0) for colour in HTML_BACKGROUNDS]
    # Every colour in use covers a visible area, in proportion to its tokens (each token about the same size).
    assert all(count > 400 for count in shown), shown
    assert sum(shown) > 0.03 * 900 * 700
