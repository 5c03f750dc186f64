"""The lowest module: the project's one error type, reading user files at the door (text, bytes,
strict YAML) and writing outputs atomically.  Every failure is one line.

Everything else may import this module; it imports nothing of the project.  The hardware,
workload, dataflow and MAESTRO-file loaders refuse bad files in the same words, and every output
file (reports, design points, checkpoints) is written to a temporary name and renamed into place,
so none is ever half written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

__all__ = ["AccelgenError", "CONFIGS", "read_text", "read_bytes", "load_yaml", "write_atomically"]

#: The built-in hardware, dataflows, workloads and design spaces, shipped as package data (the
#: checkout's top-level ``configs`` is a link to this folder).
CONFIGS = Path(__file__).resolve().parent / "configs"


class AccelgenError(ValueError):
    """A user-facing error, always one line.

    ``where`` names the input (a file, a directive, a layer) and is prefixed to the message.
    """

    def __init__(self, message: str, *, where: str | None = None) -> None:
        text = " ".join(str(message).split())  # never more than one line
        if where:
            where = " ".join(str(where).split())
            text = f"{where}: {text}"
        super().__init__(text)
        self.where = where


def read_bytes(path: str | os.PathLike[str], kind: str) -> bytes:
    """The bytes of ``path``; ``kind`` names what the file should be ("an ONNX model")."""
    where = os.fspath(path)
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise AccelgenError("no such file", where=where) from None
    except IsADirectoryError:
        raise AccelgenError(f"is a directory, not {kind}", where=where) from None
    except OSError as exc:
        raise AccelgenError(f"cannot be read ({exc.strerror or exc})", where=where) from None


def read_text(path: str | os.PathLike[str], kind: str) -> str:
    """The UTF-8 text of ``path`` (newlines as text mode reads them); failures as in
    :func:`read_bytes`."""
    data = read_bytes(path, kind)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AccelgenError(f"not UTF-8 text (byte {exc.start})", where=os.fspath(path)) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: PyYAML would silently keep the
    last one, which hides exactly the kind of edit mistake the door is for."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    ident = (key_node.tag, key_node.value)
                    if ident in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
                    seen.add(ident)
        return super().construct_mapping(node, deep)  # type: ignore[arg-type]


def _problem(exc: BaseException, text: str) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        if exc.context and exc.problem and exc.problem.startswith("but "):   # "expected X but found Y"
            problem = f"{exc.context} {exc.problem}"
        return f"line {mark.line + 1}: {problem}" if mark is not None else problem
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"line {text.count(chr(10), 0, exc.position) + 1}: unacceptable character #x{code:04x}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc) or type(exc).__name__


def load_yaml(text: str, where: str, *, empty: str) -> Any:
    """Parse YAML text strictly; ``empty`` says what was expected if the document is empty."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except Exception as exc:  # noqa: BLE001 - PyYAML also raises ValueError/OverflowError on bad scalars
        raise AccelgenError(f"not valid YAML ({_problem(exc, text)})", where=where) from None
    if data is None:
        raise AccelgenError(f"empty file; expected {empty}", where=where)
    return data


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place."""
    target = Path(path)
    where = os.fspath(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise AccelgenError(f"cannot write ({exc.strerror or exc})", where=where) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise AccelgenError(f"cannot write ({exc.strerror or exc})", where=where) from None
        raise
