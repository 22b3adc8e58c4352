#!/bin/bash
# The Debian Administrator's Handbook (package debian-handbook) as a parallel corpus in its 26 languages, split into
# train, dev and test by page, for parity-aware training and the per-language report (issue 35):
#   OUT_DIR/handbook/{train,dev,test}/LANG.txt   one document per HTML page (its text, without the banner and the
#                                                navigation links), documents separated by <|endoftext|>
#   OUT_DIR/handbook/manifest.json               the languages, the pages of each split, the sizes, and how much of
#                                                each language's prose is still English (untranslated)
# Usage: build_handbook_parallel.sh [OUT_DIR]   (default ${XDG_CACHE_HOME:-~/.cache}/hf_bpe_corpora); prints the
# languages and the sizes of their splits. A corpus already built is kept (remove OUT_DIR/handbook to build again).
#
# LANG is the language part of the handbook's code (en for en-US, fr for fr-FR, ...), or the whole code where two
# share a language (zh-CN, zh-TW). The split is parallel: a page goes to the same split in every language. It is
# decided on the English pages, deterministically: the pages that are present, with text, in every language are taken
# in the order of the SHA-256 of their file names, and each goes to test while that brings test closer to 10% of the
# English text's bytes, else to dev while that brings dev closer to 10%, else to train. Any other page (none in
# version 11 of the package, where all 26 languages have the same 127 pages) goes to train, in the languages that
# have it. The package is downloaded with apt-get download (nothing is installed) and unpacked in a temporary
# directory.
#
# Caveat: many translations are incomplete, and an untranslated paragraph is the English one. manifest.json gives,
# per language, the share of its prose (the book's paragraphs, code and screen output aside) identical to the
# English paragraph of the same page: in version 11.20220922, from about 3% (ca, nb) to about 65% (da, el, hr, ko,
# ro). The splits stay parallel (the same pages, the same content), but those languages are partly English text.
set -eu
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/hf_bpe_corpora}
out=$dir/handbook
if [ ! -s "$out/manifest.json" ]; then
    mkdir -p "$dir"
    tmp=$(mktemp -d); trap 'rm -rf "$tmp" "$out.part"' EXIT
    ( cd "$tmp" && { apt-get download -qq debian-handbook >/dev/null 2>&1 ||
                     { apt-get update -qq >/dev/null; apt-get download -qq debian-handbook >/dev/null 2>&1; }; } )
    dpkg-deb -x "$tmp"/debian-handbook_*.deb "$tmp/root"
    version=$(dpkg-deb -f "$tmp"/debian-handbook_*.deb Version)
    rm -rf "$out.part"
    python3 - "$tmp/root/usr/share/doc/debian-handbook/html" "$out.part" "$version" <<'PY'
import hashlib, json, os, re, sys
from html.parser import HTMLParser

html, destination, version = sys.argv[1], sys.argv[2], sys.argv[3]
SPLITS = {"test": 0.1, "dev": 0.1}  # the rest is train
BLOCKS = {"p", "div", "br", "li", "tr", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "table", "section"}
HIDDEN = {"script", "style", "head"}


class Page(HTMLParser):
    """A page's text (no script, style or head, no banner, title images or navigation links; a line break after each
    block) and its prose: the text of each paragraph (div class="para") outside code and screen output, spaces
    normalized."""

    def __init__(self):
        super().__init__()
        self.parts, self.paragraphs = [], []
        self.depth = 0  # of open elements
        self.skip_below = None  # the depth of the hidden element being skipped, if any
        self.paragraph_depth = self.code_depth = None
        self.paragraph = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.depth += 1
        classes = (attrs.get("class") or "").split()
        if self.skip_below is None and (tag in HIDDEN or attrs.get("id") in ("banner", "title") or "docnav" in classes):
            self.skip_below = self.depth
        if self.paragraph_depth is None and tag == "div" and "para" in classes:
            self.paragraph_depth, self.paragraph = self.depth, []
        if self.code_depth is None and (tag == "pre" or {"programlisting", "screen"} & set(classes)):
            self.code_depth = self.depth

    def handle_endtag(self, tag):
        if self.skip_below == self.depth:
            self.skip_below = None
        elif self.skip_below is None and tag in BLOCKS:
            self.parts.append("\n")
        if self.code_depth == self.depth:
            self.code_depth = None
        if self.paragraph_depth == self.depth:
            self.paragraphs.append(" ".join("".join(self.paragraph).split()))
            self.paragraph_depth = None
        self.depth -= 1

    def handle_data(self, data):
        if self.skip_below is None:
            self.parts.append(data)
            if self.paragraph_depth is not None and self.code_depth is None:
                self.paragraph.append(data)


def read_page(path):
    """(text, prose paragraphs) of an HTML page."""
    page = Page()
    with open(path, encoding="utf-8") as file:
        page.feed(file.read())
    page.close()
    text = re.sub(r"\n[ \t]*\n[\s]*", "\n\n", "".join(page.parts)).replace("<|endoftext|>", "").strip()
    return text, [paragraph for paragraph in page.paragraphs if paragraph]


codes = sorted(name for name in os.listdir(html) if re.fullmatch(r"[a-z]{2,3}-[A-Z]{2}", name))
languages = {}  # our name -> the handbook's code
for code in codes:
    short = code.split("-")[0]
    languages[short if sum(other.split("-")[0] == short for other in codes) == 1 else code] = code
english = next(name for name, code in languages.items() if code.startswith("en-"))
pages = {}  # language -> page file name -> (text, prose)
for name, code in languages.items():
    folder = os.path.join(html, code)
    pages[name] = {page: read_page(os.path.join(folder, page))
                   for page in sorted(os.listdir(folder)) if page.endswith(".html")}
    pages[name] = {page: content for page, content in pages[name].items() if content[0]}

# The split, decided on the English text's bytes.
sizes = {page: len(text.encode()) for page, (text, _) in pages[english].items()}
total = sum(sizes.values())
everywhere = [page for page in sizes if all(page in pages[name] for name in languages)]
split_of = {page: "train" for name in languages for page in pages[name]}
held = dict.fromkeys(SPLITS, 0)
for page in sorted(everywhere, key=lambda page: hashlib.sha256(page.encode()).hexdigest()):
    for split, share in SPLITS.items():
        if held[split] + sizes[page] / 2 <= share * total:
            split_of[page], held[split] = split, held[split] + sizes[page]
            break

manifest = {"source": f"debian-handbook {version} (HTML pages)", "separator": "<|endoftext|>",
            "languages": {}, "splits": {split: sorted(page for page, chosen in split_of.items() if chosen == split)
                                        for split in ("train", "dev", "test")}}
for split in ("train", "dev", "test"):
    os.makedirs(os.path.join(destination, split))
for name, code in languages.items():
    english_prose = {page: set(prose) for page, (_, prose) in pages[english].items()}
    prose = untranslated = 0
    record = {"code": code}
    for split in ("train", "dev", "test"):
        chosen = [page for page in pages[name] if split_of[page] == split]
        data = "".join(pages[name][page][0] + "<|endoftext|>" for page in chosen).encode()
        with open(os.path.join(destination, split, f"{name}.txt"), "wb") as file:
            file.write(data)
        record[split] = {"bytes": len(data), "documents": len(chosen)}
    for page, (_, paragraphs) in pages[name].items():
        for paragraph in paragraphs:
            prose += len(paragraph)
            untranslated += len(paragraph) * (paragraph in english_prose.get(page, ()))
    record["prose_identical_to_english"] = round(untranslated / max(prose, 1), 4)
    manifest["languages"][name] = record
with open(os.path.join(destination, "manifest.json"), "w", encoding="utf-8") as file:
    json.dump(manifest, file, indent=1)
    file.write("\n")
PY
    mv "$out.part" "$out"
fi
python3 - "$out" <<'PY'
import json, os, sys

out = sys.argv[1]
manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
print(f"{out}: {manifest['source']}, {len(manifest['languages'])} languages; pages per split: "
      + ", ".join(f"{split} {len(pages)}" for split, pages in manifest["splits"].items()))
print(f"{'language':9} {'code':6} {'train':>11} {'dev':>9} {'test':>9}  prose identical to English")
for name, record in manifest["languages"].items():
    print(f"{name:9} {record['code']:6} " + " ".join(f"{record[split]['bytes']:>{width},}" for split, width in
                                                   (("train", 11), ("dev", 9), ("test", 9)))
          + f"  {record['prose_identical_to_english']:.1%}")
print("languages: " + " ".join(manifest["languages"]))
PY
