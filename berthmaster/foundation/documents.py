"""Reading the files users hand to the CLI: snapshots, pod lists, policies.

Design: one place decides how a user's file becomes Python objects, so every command refuses the
same bad input with the same one-line message and parses at the same speed:

* the file is read as bytes and must be text (UTF-8, no NUL bytes): a binary file given by
  mistake (an image, a gzip'd snapshot) is named as such instead of surfacing as a decoder error;
* JSON (``kubectl get ... -o json``) is parsed by the JSON decoder, about a hundred times faster
  than any YAML loader on the same data;
* YAML goes through libyaml's safe loader (``yaml.CSafeLoader``) when PyYAML was built with it,
  else PyYAML's pure-Python ``SafeLoader``: both construct only plain data (the semantics of
  ``yaml.safe_load``), never arbitrary Python objects.

Errors are :class:`DocumentError` (a ``ValueError``) whose message names the file and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

# libyaml's safe loader when present (several times faster), else the pure-Python one.
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DocumentError(ValueError):
    """A user's file that cannot be read or parsed; the message names the file and the fix."""


def read_text(path: str | Path) -> str:
    """The text of ``path``; DocumentError when it cannot be read or is not a text file."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise DocumentError(f"cannot read {path}: {error.strerror or error}") from None
    if b"\0" in raw:
        raise DocumentError(f"{path} is a binary file, not YAML or JSON; give the text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(f"{path} is not UTF-8 text (byte {error.start}); give a YAML or "
                            "JSON file saved as UTF-8") from None


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` on libyaml when present (JSON is YAML: it parses too). The safe
    loader is driven directly, so no call here can name an unsafe one."""
    loader = SAFE_LOADER(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _safe_load_all(text: str) -> list[Any]:
    """``yaml.safe_load_all`` on libyaml when present."""
    loader = SAFE_LOADER(text)
    try:
        documents = []
        while loader.check_data():
            documents.append(loader.get_data())
        return documents
    finally:
        loader.dispose()


def parse_documents(text: str, source: str) -> list[Any]:
    """Every document of ``text``: one for JSON, each ``---`` document for YAML (empty ones as
    ``None``). DocumentError names ``source`` when it is neither."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # YAML flow style, or several documents: the YAML loader decides
    try:
        return _safe_load_all(text)
    except yaml.YAMLError as error:
        raise DocumentError(f"{source}: not valid YAML or JSON: "
                            f"{' '.join(str(error).split())}") from None


def load_documents(path: str | Path) -> list[Any]:
    """Every document in the YAML or JSON file ``path`` (see :func:`parse_documents`)."""
    return parse_documents(read_text(path), str(path))
