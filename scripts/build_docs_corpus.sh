#!/bin/bash
# Two prose benchmark corpora in many languages, from Debian's documentation packages (text extracted, one document
# per chapter or page, separated by <|endoftext|>), beside the shared corpora (which hold man pages, not these):
#   debian_handbook.txt  The Debian Administrator's Handbook (package debian-handbook) in its 26 languages, from its
#                        HTML pages: the "multilingual manual".
#   debian_docs.txt      Debian Reference (debian-reference-{de,en,es,fr,id,it,ja,pt,pt-br,zh-cn,zh-tw}, its text
#                        edition), the Developer's Reference (developers-reference{,-de,-fr,-it,-ja,-ru}, its
#                        reStructuredText sources), the New Maintainers' Guide (maint-guide{,-ca,-de,-es,-fr,-it,-ja,
#                        -ru,-vi,-zh-cn,-zh-tw}, HTML) and the Debian FAQ (debian-faq{,-de,-fr,-it,-ja,-ko,-nl,-pt,
#                        -ru,-zh-cn}, text).
# Usage: build_docs_corpus.sh [OUT_DIR]   (default ~/.cache/hf_bpe_corpora); prints the two corpus paths.
# The packages are downloaded (apt-get download, nothing is installed) and unpacked in a temporary directory; a
# package ships a text edition (.txt, .txt.gz, .rst.txt) or else HTML, whose text is taken without scripts and styles.
# DOCS_PACKAGES="maint-guide-fr debian-faq-ja" builds debian_docs.txt from those packages alone (a quick check).
set -eu
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/hf_bpe_corpora}
handbook=$dir/debian_handbook.txt
docs=$dir/debian_docs.txt
docs_packages=(debian-reference-{de,en,es,fr,id,it,ja,pt,pt-br,zh-cn,zh-tw} developers-reference{,-de,-fr,-it,-ja,-ru}
               maint-guide{,-ca,-de,-es,-fr,-it,-ja,-ru,-vi,-zh-cn,-zh-tw} debian-faq{,-de,-fr,-it,-ja,-ko,-nl,-pt,-ru,-zh-cn})
if [ -n "${DOCS_PACKAGES:-}" ]; then
    read -r -a docs_packages <<< "$DOCS_PACKAGES"
    docs=$dir/debian_docs_sample.txt
    handbook=
fi
mkdir -p "$dir"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

build() {  # build OUT PACKAGE...: download and unpack the packages, then extract their text into OUT
    local out=$1; shift
    [ -s "$out" ] && { echo "$out"; return; }
    mkdir -p "$tmp/debs" "$tmp/root"
    ( cd "$tmp/debs" && { apt-get download -qq "$@" >/dev/null 2>&1 ||
                          { apt-get update -qq >/dev/null; apt-get download -qq "$@" >/dev/null 2>&1; }; } )
    for package in "$@"; do
        mkdir -p "$tmp/root/$package"
        dpkg-deb -x "$tmp"/debs/"${package}"_*.deb "$tmp/root/$package"
    done
    python3 - "$tmp/root" "$out.part" "$@" <<'PY'
import gzip, os, re, sys
from html.parser import HTMLParser

root, destination, packages = sys.argv[1], sys.argv[2], sys.argv[3:]
SKIP = re.compile(r"(^|/)(changelog|copyright|README\.Debian|NEWS)[^/]*$|/Common_Content/")
BLOCKS = {"p", "div", "br", "li", "tr", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "table", "section"}


class Text(HTMLParser):
    """The text of an HTML page: no script, style or head; a line break after each block."""

    def __init__(self):
        super().__init__()
        self.parts, self.hidden = [], 0

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style", "head")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style", "head") and self.hidden > 0
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def text_of(path):
    data = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    text = data.decode("utf-8", "replace")
    if re.search(r"\.x?html?(\.gz)?$", path):
        parser = Text()
        parser.feed(text)
        parser.close()
        text = re.sub(r"\n[ \t]*\n[\s]*", "\n\n", "".join(parser.parts))
    return text.replace("<|endoftext|>", "").strip()


documents = 0
with open(destination, "w", encoding="utf-8") as out:
    for package in packages:
        files = sorted(os.path.join(folder, name) for folder, _, names in os.walk(os.path.join(root, package))
                       for name in names if not SKIP.search(os.path.join(folder, name)))
        texts = [path for path in files if re.search(r"\.txt(\.gz)?$", path)]
        pages = [path for path in files if re.search(r"\.x?html?(\.gz)?$", path)]
        for path in texts or pages:  # a text edition when there is one, else the HTML pages
            text = text_of(path)
            if text:
                out.write(text + "<|endoftext|>")
                documents += 1
print(f"{destination[:-5]}: {documents:,} documents from {len(packages)} packages", file=sys.stderr)
PY
    mv "$out.part" "$out"
    rm -rf "$tmp/debs" "$tmp/root"
    echo "$out"
}

[ -n "$handbook" ] && build "$handbook" debian-handbook
build "$docs" "${docs_packages[@]}"
