"""Showing what a tokenizer does to a text: token by token, readably, in plain text, in a terminal, or as a web page.

A token is a byte string and need not be whole UTF-8: a character may be split across tokens. `readable_token`
shows the whole characters of a token as text and every other byte as `<e6>`; whitespace is made visible (`␣` a
space, `↵` a newline, `⇥` a tab, `␍` a carriage return) and control characters are shown as bytes too, so that a
token can never move the cursor or start a terminal escape sequence.

>>> readable_token(" wor".encode()), readable_token("é".encode()[:1]), readable_token(b"\\x1b[")
('␣wor', '<c3>', '<1b>[')

Views of the same tokens (`token_spans`): `show_tokens` and `render_plain` (plain, `|`-separated: the card's examples,
and `hf-bpe show` without a terminal), `render_ansi` (each token on an alternating background colour) and `render_html`
(one self-contained page: coloured tokens, the id and bytes of each on hover, and the counts).
Not handled: right-to-left scripts and combining marks are shown in token order, which may not be the order or the
shape a text renderer gives the whole text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Whitespace made visible. A newline stays a line break after its mark in the terminal and HTML views.
VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
# Bytes that are not part of a whole UTF-8 character decode (surrogateescape) to U+DC80-U+DCFF; show them as <xx>,
# and C0/C1 control characters likewise (as their UTF-8 bytes), so that no token reaches a terminal raw.
_READABLE = str.maketrans({
    **VISIBLE_WHITESPACE,
    **{0xDC00 + byte: f"<{byte:02x}>" for byte in range(0x80, 0x100)},
    **{code: "".join(f"<{byte:02x}>" for byte in chr(code).encode()) for code in [*range(0x20), *range(0x7F, 0xA0)]
       if chr(code) not in VISIBLE_WHITESPACE},
})
#: Background colours of consecutive tokens (xterm 256-colour numbers and the same colours as CSS hex), light enough
#: for black text: light blue, peach, light green, pink, light yellow.
ANSI_BACKGROUNDS = (153, 223, 194, 225, 229)
HTML_BACKGROUNDS = ("#afd7ff", "#ffd7af", "#d7ffd7", "#ffd7ff", "#ffffaf")
_ANSI_RESET = "\x1b[0m"
# Byte marks in escaped HTML, shown smaller and in red on the page.
_BYTE_MARKS = re.compile(r"(?:&lt;[0-9a-f]{2}&gt;)+")


def readable_token(token: bytes) -> str:
    """A token's bytes as text: whole UTF-8 characters as themselves, whitespace visible, other bytes as `<xx>`.

    >>> readable_token(b"a\\tb\\r\\n"), readable_token("日".encode()[1:]), readable_token(" \\u00e9".encode())
    ('a⇥b␍↵', '<97><a5>', '␣é')
    """
    return token.decode("utf-8", "surrogateescape").translate(_READABLE)


@dataclass(frozen=True)
class TokenSpan:
    """One token of an encoded text: its id, its bytes, and how it is shown (`readable_token`)."""

    id: int
    token: bytes

    @property
    def text(self) -> str:
        return readable_token(self.token)


def token_spans(tokenizer: Any, text: str) -> list[TokenSpan]:
    """The tokens of `text` as `tokenizer` (an `hf_bpe.Tokenizer`) encodes it, special tokens included."""
    return [TokenSpan(token_id, tokenizer.id_to_token(token_id)) for token_id in tokenizer.encode(text)]


def show_tokens(tokenizer: Any, text: str) -> str:
    """`text` token by token, separated by `|`, whitespace made visible, partial UTF-8 shown as hex bytes.

    >>> from hf_bpe.encode.tokenizer import Tokenizer
    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b" w", 257: b" wo"}
    >>> show_tokens(Tokenizer(vocab, [(b" ", b"w"), (b" w", b"o")]), "a wow é")
    'a|␣wo|w|␣|<c3>|<a9>'
    """
    return "|".join(span.text for span in token_spans(tokenizer, text))


def render_plain(spans: Sequence[TokenSpan], show_ids: bool = False) -> str:
    """Tokens separated by `|` (a line break after the `|` that follows a token holding a newline), each id in
    brackets after its token with `show_ids`.

    >>> spans = [TokenSpan(72, b"Hi"), TokenSpan(198, b"\\n"), TokenSpan(256, b" there")]
    >>> print(render_plain(spans, show_ids=True))
    Hi[72]|↵[198]|
    ␣there[256]
    """
    out = []
    for index, span in enumerate(spans):
        if index:
            out.append("|\n" if b"\n" in spans[index - 1].token else "|")
        out.append(span.text + (f"[{span.id}]" if show_ids else ""))
    return "".join(out)


def render_ansi(spans: Sequence[TokenSpan], show_ids: bool = False) -> str:
    """Each token on the next background colour of `ANSI_BACKGROUNDS` in black text (ids in grey with `show_ids`),
    with a line break after each token that holds a newline.

    >>> render_ansi([TokenSpan(72, b"Hi"), TokenSpan(0, b"!")]) == ("\\x1b[48;5;153;38;5;16mHi\\x1b[0m"
    ...                                                             "\\x1b[48;5;223;38;5;16m!\\x1b[0m")
    True
    """
    out = []
    for index, span in enumerate(spans):
        colour = ANSI_BACKGROUNDS[index % len(ANSI_BACKGROUNDS)]
        out.append(f"\x1b[48;5;{colour};38;5;16m{span.text}")
        if show_ids:
            out.append(f"\x1b[38;5;242m{span.id}")
        out.append(_ANSI_RESET + ("\n" if b"\n" in span.token else ""))
    return "".join(out)


def describe_counts(spans: Sequence[TokenSpan], text: str) -> str:
    """'12 tokens (9 distinct), 40 characters, 41 bytes: 3.42 bytes per token'.

    >>> describe_counts([TokenSpan(72, b"Hi"), TokenSpan(72, b"Hi")], "HiHi")
    '2 tokens (1 distinct), 4 characters, 4 bytes: 2.00 bytes per token'
    """
    num_bytes = len(text.encode("utf-8", "replace"))
    per_token = f"{num_bytes / len(spans):.2f}" if spans else "no"
    return (f"{len(spans):,} token{'s' if len(spans) != 1 else ''} ({len({span.id for span in spans}):,} distinct), "
            f"{len(text):,} characters, {num_bytes:,} bytes: {per_token} bytes per token")


def split_characters(spans: Sequence[TokenSpan]) -> list[list[str]]:
    """For each token, the characters of the text that it holds only part of (split across tokens), in order.

    >>> split_characters([TokenSpan(1, b"a\\xe6"), TokenSpan(2, b"\\x9d"), TokenSpan(3, b"\\xb1")])
    [['東'], ['東'], ['東']]
    """
    data = b"".join(span.token for span in spans)
    notes: list[list[str]] = []
    end = 0
    for span in spans:
        start, end = end, end + len(span.token)
        chars = [_character_at(data, position) for position in (start, end)
                 if position < len(data) and 0x80 <= data[position] < 0xC0]
        notes.append(list(dict.fromkeys(char for char in chars if char)))
    return notes


def _character_at(data: bytes, position: int) -> str:
    """The character whose UTF-8 bytes cover `position` (a continuation byte), or "" for invalid UTF-8."""
    start = position
    while start > 0 and 0x80 <= data[start] < 0xC0 and position - start < 3:
        start -= 1
    for length in (2, 3, 4):
        try:
            char = data[start:start + length].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return char if len(char) == 1 and start + length > position else ""
    return ""


def render_html(spans: Sequence[TokenSpan], text: str, title: str, show_ids: bool = False) -> str:
    """One self-contained HTML page (inline style, no script, no network resource): the counts, then the tokens on
    alternating background colours (`HTML_BACKGROUNDS`), each with its id and bytes in its `title` (shown on hover).

    >>> page = render_html([TokenSpan(72, b"Hi")], "Hi", "demo")
    >>> '<span class="t c0" title="id 72 · bytes 48 69">Hi</span>' in page
    True
    """
    notes = split_characters(spans)
    colours = "\n".join(f".c{index} {{ background: {colour}; }}" for index, colour in enumerate(HTML_BACKGROUNDS))
    tokens = []
    for index, span in enumerate(spans):
        hover = f"id {span.id} · bytes {span.token.hex(' ')}" + "".join(
            f" · part of {html.escape(char)} (U+{ord(char):04X}: {char.encode().hex(' ')})" for char in notes[index])
        shown = _BYTE_MARKS.sub(r'<span class="b">\g<0></span>', html.escape(span.text, quote=False)) \
            + (f"<sub>{span.id}</sub>" if show_ids else "")
        tokens.append(f'<span class="t c{index % len(HTML_BACKGROUNDS)}" title="{hover}">{shown}</span>'
                      + ("\n" if b"\n" in span.token else ""))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #000; background: #fff; }}
.tokens {{ font-family: monospace; font-size: 18px; line-height: 1.9; white-space: pre-wrap; overflow-wrap: anywhere; }}
.t {{ padding: 1px 0; }}
.t:hover {{ outline: 2px solid #333; }}
sub {{ color: #555; font-size: 60%; }}
.b {{ color: #a0302a; font-size: 85%; }}
{colours}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="counts">{html.escape(describe_counts(spans, text))}</p>
<p class="legend">Each coloured box is one token; hover over it for its id and bytes. ␣ is a space, ↵ a newline,
⇥ a tab, &lt;e6&gt; one byte of a character split across tokens.</p>
<div class="tokens">{"".join(tokens)}</div>
</body>
</html>
"""

