"""Saving an `HFBPETokenizer`: everything transformers saves, plus the files that let every loader read it.

transformers' own `save_pretrained` writes what the tokenizer keeps across a save (init settings such as
`padding_side`, chat templates as `chat_template.jinja` and `additional_chat_templates/`, named special tokens, added
tokens). `DirectorySaving.save_pretrained` lets it write those into a staging directory, then adds the files of
`hf_bpe.formats.hf_directory` (`tokenizer.json` with the added tokens, the remote-code module, a model card), points
`tokenizer_config.json` at the built-in fast class and at our class for `trust_remote_code`, and moves each file
into place atomically. A failure (a chat template name that leaves the directory, say) leaves the target untouched.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hf_bpe.common.files import write_text_atomically
from hf_bpe.formats.gpt2 import save_gpt2
from hf_bpe.formats.hf_directory import (
    AUTO_MAP,
    MODULE_NAME,
    MODULE_SOURCE,
    AddedTokenSpec,
    build_tokenizers_json,
    write_minimal_card,
)

HUB_REFUSAL = ("HFBPETokenizer does not push to the Hub itself: save it with save_pretrained(directory), then upload "
               "the directory with huggingface_hub (HfApi().upload_folder(folder_path=directory, repo_id=...))")


class DirectorySaving:
    """`save_pretrained`, `save_vocabulary` and the Hub refusal of `HFBPETokenizer` (a mixin: needs its tables)."""

    _base_vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write `vocab.json` and `merges.txt` (the base vocabulary, without tokens added later)."""
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        with tempfile.TemporaryDirectory(dir=save_directory) as scratch:
            save_gpt2(self._base_vocab, self.merges, scratch, self._special_tokens_in_base_vocab())
            paths = []
            for name in ("vocab.json", "merges.txt"):
                target = os.path.join(save_directory, prefix + name)
                os.replace(os.path.join(scratch, name), target)
                paths.append(target)
        return tuple(paths)

    def save_pretrained(self, save_directory: str | os.PathLike[str], legacy_format: bool | None = None,
                        filename_prefix: str | None = None, push_to_hub: bool = False,
                        **kwargs: Any) -> tuple[str, ...]:
        """Save everything transformers saves, readable by the fast class, by `trust_remote_code` and by us.

        The files (atomically each): transformers' `tokenizer_config.json`, `special_tokens_map.json`,
        `added_tokens.json` (if tokens were added) and chat templates, plus `vocab.json`, `merges.txt`,
        `tokenizer.json`, `hf_bpe_tokenizer.py` and a minimal `README.md` if there is none.
        """
        if push_to_hub:
            raise ValueError(HUB_REFUSAL)
        if filename_prefix:
            raise ValueError("HFBPETokenizer.save_pretrained does not support filename_prefix: the loaders look for "
                             "the standard file names")
        _check_chat_template_names(getattr(self, "chat_template", None))
        target = Path(save_directory)
        if target.exists() and not target.is_dir():
            raise NotADirectoryError(f"{target}: not a directory")
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target, prefix=".hf_bpe-save-") as scratch:
            staging = Path(scratch)
            super().save_pretrained(staging, legacy_format=legacy_format, **kwargs)  # type: ignore[misc]
            self._complete_directory(staging)
            saved = []
            for path in sorted(staging.rglob("*")):
                if path.is_file():
                    destination = target / path.relative_to(staging)
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(path, destination)
                    saved.append(str(destination))
        card_written = not (target / "README.md").exists()
        write_minimal_card(target, len(self), len(self.merges),  # type: ignore[arg-type]
                           self._special_tokens_in_base_vocab(), pattern=self.pattern)  # type: ignore[attr-defined]
        if card_written:
            saved.append(str(target / "README.md"))
        return tuple(saved)

    def push_to_hub(self, *args: Any, **kwargs: Any) -> Any:
        """Refused, as `save_pretrained(..., push_to_hub=True)` is: see the message for the way to upload."""
        raise ValueError(HUB_REFUSAL)

    def _complete_directory(self, staging: Path) -> None:
        """Add tokenizer.json and the module file; point tokenizer_config.json at the fast class and at ours."""
        added = self._added_tokens_beyond_base_vocab()
        specials = self._special_tokens_in_base_vocab()
        write_text_atomically(staging / "tokenizer.json",
                              build_tokenizers_json(self._base_vocab, self.merges, specials, added,
                                                    pattern=self.pattern,  # type: ignore[attr-defined]
                                                    ignore_merges=self._ordinary.ignore_merges))
        write_text_atomically(staging / f"{MODULE_NAME}.py", MODULE_SOURCE)
        config_path = staging / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        # The built-in class loads it without hf_bpe; auto_map loads ours with trust_remote_code=True.
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        config["auto_map"] = AUTO_MAP
        config.pop("backend", None)
        config.pop("pattern", None)  # tokenizer.json holds it, for every loader
        write_text_atomically(config_path, json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        # transformers 5 no longer writes special_tokens_map.json; older readers (and hf_bpe's checks) use it.
        special_map = staging / "special_tokens_map.json"
        if not special_map.exists():
            named = {name: [str(token) for token in value] if isinstance(value, (list, tuple)) else str(value)
                     for name, value in self.special_tokens_map.items()}  # type: ignore[attr-defined]
            write_text_atomically(special_map, json.dumps(named, indent=2, ensure_ascii=False) + "\n")

    def _special_tokens_in_base_vocab(self) -> list[str]:
        return [token.content for token_id, token in sorted(self._added_tokens_decoder.items())  # type: ignore
                if token_id in self._base_vocab]

    def _added_tokens_beyond_base_vocab(self) -> list[AddedTokenSpec]:
        return self._added_token_specs(token_id for token_id in self._added_tokens_decoder  # type: ignore
                                       if token_id not in self._base_vocab)

    def _added_token_specs(self, token_ids: Iterable[int]) -> list[AddedTokenSpec]:
        """The added tokens of these ids (transformers' AddedToken objects) as AddedTokenSpec, in id order."""
        decoder = self._added_tokens_decoder  # type: ignore[attr-defined]
        return [AddedTokenSpec(token_id, token.content, special=token.special, single_word=token.single_word,
                               lstrip=token.lstrip, rstrip=token.rstrip, normalized=token.normalized)
                for token_id, token in sorted((token_id, decoder[token_id]) for token_id in token_ids)]


def _check_chat_template_names(templates: Any) -> None:
    """Refuse template names that would write outside `additional_chat_templates/` (transformers 5 checks this
    too, transformers 4 does not), before anything is written."""
    if not isinstance(templates, dict):
        return
    for name in templates:
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name \
                or Path(name).is_absolute():
            raise ValueError(f"Invalid chat template name: {name!r}")


__all__ = ["DirectorySaving", "HUB_REFUSAL"]
