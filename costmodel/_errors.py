"""The project's one error type: a single line that names the input, the field, the value and what
was expected. The CLI prints it without a traceback."""

from __future__ import annotations

__all__ = ["AccelgenError"]


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
