"""The one error type of the policy language.

Everything that can go wrong between policy text and a checked policy (a bad
character, a syntax error, an unknown filter, a parameter out of range) is
reported as a ``Diagnostic`` that names the line and the column it concerns.
``DSLError`` carries one or more of them, so a submission of many policies
reports every broken line at once; callers catch ``DSLError`` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Diagnostic:
    """A message about one place in the policy text (lines and columns start at 1)."""

    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "column": self.column, "message": self.message}


class DSLError(ValueError):
    """Policy text that cannot be accepted, with every diagnostic found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        if not diagnostics:
            raise ValueError("DSLError needs at least one diagnostic")
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))

    @classmethod
    def at(cls, line: int, column: int, message: str) -> DSLError:
        return cls([Diagnostic(line, column, message)])
