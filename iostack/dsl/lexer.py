"""Tokens of the policy language (PLY lexer).

Keywords are case-insensitive; everything that is not a keyword (filter,
class, metric, tenant and parameter names) is a ``NAME`` and is judged by the
checker against the registries, so new filters need no grammar change.
``G`` is a keyword only in ``G:name``, so a tenant may still be called ``G``.
Newlines and ``;`` separate statements; ``#`` starts a comment.

Strings are ``"..."`` or ``'...'`` on one line. Inside them ``\\"``, ``\\'`` and
``\\\\`` stand for the character after the backslash; every other backslash is
kept as written, so ``OBJECT_NAME=~"^\\d+$"`` is the regex ``^\\d+$``.
"""

from __future__ import annotations

import re

import ply.lex as lex

from iostack.dsl.errors import Diagnostic, DSLError

KEYWORDS = {
    "FOR", "WHEN", "DO", "TO", "SET", "DELETE", "WITH", "ON", "TRANSIENT", "ORDER",
    "SANDBOXED", "NATIVE",
    "AND", "OR", "ALL", "TENANT", "CONTAINER", "OBJECT", "GROUP", "VOLUME", "STORAGE_GROUP",
    "DEFINE", "CLASS", "AS", "OBJECT_TYPE", "OBJECT_SIZE", "OBJECT_TAG", "OBJECT_NAME",
    "OBJECT_AGE",
}

tokens = (
    *sorted(KEYWORDS),
    "NAME", "PATH", "QUANTITY", "HEX", "STRING", "MATCH",
    "GE", "LE", "NE", "EQEQ", "GT", "LT", "EQ", "COMMA", "COLON", "LPAREN", "RPAREN", "SEP",
)

t_ignore = " \t\r"
t_ignore_COMMENT = r"\#[^\n]*"

# Function rules are tried in the order they are defined: longer, more
# specific shapes first (a path before a name, hex before a plain number).

def t_MATCH(t):
    r"""=~[ \t]*(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^\s,;]+)"""
    body = t.value[2:].lstrip(" \t")
    t.value = _unquote(body) if body[:1] in "\"'" else body
    return t


def t_STRING(t):
    r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
    t.value = _unquote(t.value)
    return t


def t_QUANTITY(t):
    r"\d+(?:\.\d+)?(?:[A-Za-z]+(?:/[sS])?)?(?![\w/])"
    # Not followed by a word character or "/": "2024/logs" is a path, "1MiB/s" a rate.
    return t


def t_PATH(t):
    r"[A-Za-z0-9_][A-Za-z0-9_.@~+%\-]*(?:/[A-Za-z0-9_.@~+%\-]+)+"
    return t


def t_HEX(t):
    r"0[xX][0-9a-fA-F]+\b"
    return t


def t_NAME(t):
    r"[0-9a-fA-F]{32}(?![\w.\-])|[A-Za-z_][A-Za-z0-9_.\-]*"
    # A Keystone project id (32 hex digits; it may start with a digit) names a tenant.
    upper = t.value.upper()
    if upper in KEYWORDS:
        t.type = upper
    elif upper == "G" and t.lexer.lexdata.startswith(":", t.lexpos + 1):
        t.type = "GROUP"
    return t


def t_SEP(t):
    r"[\n;]"
    if t.value == "\n":
        t.lexer.lineno += 1
    return t


t_GE = r">="
t_LE = r"<="
t_NE = r"!="
t_EQEQ = r"=="
t_GT = r">"
t_LT = r"<"
t_EQ = r"="
t_COMMA = r","
t_COLON = r":"
t_LPAREN = r"\("
t_RPAREN = r"\)"


def t_error(t):
    # Record and go on, so one submission reports every bad character at once.
    line, column = t.lexer.lineno, column_of(t.lexer.lexdata, t.lexpos)
    t.lexer.diagnostics.append(Diagnostic(line, column, f"unexpected character {t.value[0]!r}"))
    t.lexer.skip(1)


_ESCAPE = re.compile(r"""\\(["'\\])""")


def _unquote(text: str) -> str:
    """Strip the quotes of a string literal; ``\\"``, ``\\'`` and ``\\\\`` stand for the character.

    Any other backslash is kept with the character after it, so a quoted
    regular expression means what it says: ``"^\\d+$"`` is ``^\\d+$``.
    """
    return _ESCAPE.sub(r"\1", text[1:-1])



def column_of(data: str, lexpos: int) -> int:
    """Column (from 1) of offset ``lexpos`` in ``data``; lines are short, so this is cheap."""
    return lexpos - (data.rfind("\n", 0, lexpos) + 1) + 1


_LEXER = lex.lex(debug=False, optimize=False, errorlog=lex.NullLogger())


def tokenize(text: str) -> list[lex.LexToken]:
    """All tokens of ``text``, each with ``line``, ``column`` and ``end`` (offset after it).

    Raises ``DSLError`` listing every character that starts no token.
    """
    lexer = _LEXER.clone()
    lexer.lineno = 1
    lexer.diagnostics = []
    lexer.input(text)
    result = []
    for tok in iter(lexer.token, None):
        tok.line, tok.column = tok.lineno, column_of(text, tok.lexpos)
        tok.end = lexer.lexpos
        result.append(tok)
    if lexer.diagnostics:
        raise DSLError(lexer.diagnostics)
    return result
