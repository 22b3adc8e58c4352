#!/bin/bash
# A multi-GB benchmark corpus of distinct text for SuperBPE at scale (issue 34): the sources that Debian ships in
# packages — Linux 6.1, GCC 12 and 11, glibc, GDB, newlib, OpenJDK 17's class library, Bazel, Rust's standard library,
# Free Pascal, ACL2 and CMUCL, with the HTML documentation of Qt 5 and Python 3.11 — one document
# per source or documentation file, separated by <|endoftext|>. A file whose bytes were seen already (the same file in
# two source trees) is left out, so every document is distinct; files that are not UTF-8 are left out too.
# Usage: build_multi_gb_corpus.sh [OUT_DIR]   (default ~/.cache/hf_bpe_corpora); prints the corpus path and its size.
# Needs root for apt-get (as on the project's machines), about 700 MB of downloads and 16 GB of free disk while
# building; takes a few minutes.
set -eu
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/hf_bpe_corpora}
out=$dir/multi_gb_code.txt
[ -s "$out" ] && { echo "$out"; du -b "$out" | cut -f1; exit 0; }
packages="linux-source-6.1 gcc-12-source gcc-11-source glibc-source gdb-source newlib-source openjdk-17-source
          bazel-bootstrap-source rust-src fpc-source-3.2.2 acl2-books-source acl2-source cmucl-source binutils-source
          gcc-arm-none-eabi-source qtbase5-doc-html python3.11-doc"
mkdir -p "$dir"; tmp=$(mktemp -d "$dir/build.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# shellcheck disable=SC2086
apt-get download -qq $packages >/dev/null 2>&1 || { apt-get update -qq >/dev/null; apt-get download -qq $packages >/dev/null; }
mkdir trees
for deb in ./*.deb; do
    name=$(basename "$deb" .deb)
    mkdir -p "pkg/$name" "trees/$name"
    dpkg-deb -x "$deb" "pkg/$name"
    # The sources come as tarballs (Linux, GCC, glibc, GDB), a zip (OpenJDK) or plain files (Rust).
    find "pkg/$name" -name '*.tar.*' -size +1M -print0 | xargs -0 -r -n1 tar -x -C "trees/$name" -f
    find "pkg/$name" -name 'src.zip' -print0 | xargs -0 -r -I{} python3 -m zipfile -e {} "trees/$name/src"
    [ -n "$(ls -A "trees/$name")" ] || mv "pkg/$name" "trees/$name/files"
    rm -rf "pkg/$name" "$deb"
done
python3 - trees "$out.part" <<'PY'
import hashlib, os, sys
src, dst = sys.argv[1:]
suffixes = (".c", ".h", ".cc", ".cpp", ".hpp", ".S", ".s", ".rs", ".java", ".py", ".sh", ".rst", ".txt", ".md",
            ".texi", ".go", ".d", ".f90", ".ads", ".adb", ".def", ".m4", ".ac", ".am", ".in", ".exp", ".tcl",
            ".lisp", ".lsp", ".pas", ".pp", ".inc", ".html")
seen = set()
with open(dst, "w", encoding="utf-8") as out:
    for root, dirs, files in sorted(os.walk(src)):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(suffixes):
                continue
            try:
                data = open(os.path.join(root, name), "rb").read()
                text = data.decode("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            digest = hashlib.sha1(data).digest()
            if digest in seen or not text or "<|endoftext|>" in text:
                continue
            seen.add(digest)
            out.write(text)
            out.write("<|endoftext|>")
PY
mv "$out.part" "$out"
echo "$out"
du -b "$out" | cut -f1
