"""The IOStack policy language.

``parse(text)`` turns policy text into statements (``iostack.dsl.ast``);
``check(statements, vocabulary)`` resolves them against the registries.
Both raise only ``DSLError``, whose diagnostics carry line and column.
"""

from iostack.dsl.checker import check, check_text
from iostack.dsl.errors import Diagnostic, DSLError
from iostack.dsl.parser import parse

__all__ = ["DSLError", "Diagnostic", "check", "check_text", "parse"]
