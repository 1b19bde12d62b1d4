"""Parser of the policy language (PLY, LALR).

Grammar (keywords case-insensitive; ``[]`` optional, ``{}`` repeated)::

    program   := statement { (NEWLINE | ";") statement }
    statement := policy | DEFINE CLASS name AS actions
    policy    := FOR targets [WHEN condition] DO actions [TO object_conds]
               | FOR targets TO object_conds [WHEN condition] DO actions
    targets   := target {"," target}
    target    := ALL | TENANT[:]name | CONTAINER[:]acct/cont | OBJECT[:]acct/cont/obj
               | GROUP[:]name | G:name | VOLUME[:]name | STORAGE_GROUP[:]name
    condition := metric op value | condition AND condition | condition OR condition
               | "(" condition ")"                  (AND binds tighter than OR)
    actions   := action {"," action}
    action    := SET name [WITH param {"," param}] {modifier} | DELETE name
    modifier  := ON PROXY | ON OBJECT | ON GET|PUT|HEAD|POST | ORDER n | TRANSIENT
               | SANDBOXED | NATIVE   (run in the Storlets sandbox, or in-process)
    param     := name "=" value          value: number[unit], hex, name, "string"
    object_conds := object_cond {"," object_cond}
    object_cond  := OBJECT_TYPE=name | OBJECT_SIZE op size | OBJECT_AGE op duration
                  | OBJECT_TAG=key:value
                  | OBJECT_NAME=~regex  (regex bare up to a blank or ",", or quoted)

Statements are parsed one by one so that every broken line is reported, each
error with its line and column and what was expected. ``parse`` raises only
``DSLError``: a grammar bug that raised anything else would be a bug here,
and the fuzz tests look for exactly that.

``WITH a=1, b=2`` and ``SET x, SET y`` share the comma, which a one-token
lookahead cannot tell apart; the grammar therefore reads a flat list of
action items (``SET ...``, ``DELETE ...`` or a further ``param``) and folds
continuation parameters into the preceding ``SET``.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import ply.yacc as yacc

from iostack.dsl import lexer as _lexer
from iostack.dsl.ast import (
    Action,
    BoolOp,
    ClassDef,
    Comparison,
    ObjectCond,
    Param,
    Policy,
    Statement,
    Target,
    Value,
)
from iostack.dsl.errors import Diagnostic, DSLError
from iostack.dsl.units import UnitError, parse_unit
from iostack.filters.regex import RegexError, compile_regex

tokens = _lexer.tokens

precedence = (
    ("left", "OR"),
    ("left", "AND"),
)

MAX_COMPARISONS = 64
STAGE_WORDS = {"PROXY": "proxy", "OBJECT": "object"}
METHOD_WORDS = ("GET", "PUT", "HEAD", "POST")
_QUANTITY = re.compile(r"(?P<num>\d+(?:\.\d+)?)(?P<unit>.*)")


def _tok(p, i):
    """The terminal at position ``i`` of a production (for its line/column)."""
    return p.slice[i]


def _error(tok, message):
    return DSLError.at(tok.line, tok.column, message)


# -- statements -------------------------------------------------------------


def p_statement(p):
    """statement : policy
                 | classdef"""
    p[0] = p[1]


def p_policy(p):
    """policy : FOR targets when DO actions to"""
    p[0] = Policy(
        targets=tuple(p[2]), condition=p[3], actions=_fold_actions(p[5]),
        object_conds=tuple(p[6]), line=_tok(p, 1).line, text="", column=_tok(p, 1).column,
    )


def p_policy_to_first(p):
    """policy : FOR targets TO object_conds when DO actions"""
    p[0] = Policy(
        targets=tuple(p[2]), condition=p[5], actions=_fold_actions(p[7]),
        object_conds=tuple(p[4]), line=_tok(p, 1).line, text="", column=_tok(p, 1).column,
    )


def p_classdef(p):
    """classdef : DEFINE CLASS NAME AS actions"""
    name = _tok(p, 3)
    p[0] = ClassDef(
        name=p[3].upper(), actions=_fold_actions(p[5]), line=name.line, column=name.column, text=""
    )


def p_when(p):
    """when : WHEN condition
            | empty"""
    p[0] = p[2] if len(p) == 3 else None


def p_to(p):
    """to : TO object_conds
          | empty"""
    p[0] = p[2] if len(p) == 3 else []


def p_empty(p):
    """empty :"""
    p[0] = None


# -- targets ----------------------------------------------------------------


def p_targets(p):
    """targets : targets COMMA target
               | target"""
    p[0] = p[1] + [p[3]] if len(p) == 4 else [p[1]]


def p_target_all(p):
    """target : ALL"""
    tok = _tok(p, 1)
    p[0] = Target("global", "*", tok.line, tok.column)


def p_target(p):
    """target : TENANT opt_colon target_name
              | CONTAINER opt_colon target_name
              | OBJECT opt_colon target_name
              | GROUP opt_colon target_name
              | VOLUME opt_colon target_name
              | STORAGE_GROUP opt_colon target_name"""
    kw = _tok(p, 1)
    kind = kw.type.lower()
    name, name_tok = p[3]
    if kind == "container" and "/" not in name:
        # The paper's ``FOR CONTAINER C1``: a container of that name in any account.
        name = f"*/{name}"
    parts = name.split("/")
    expected = {"container": 2, "object": 3}.get(kind, 1)
    if len(parts) < expected or (kind != "object" and len(parts) > expected) or "" in parts[:2]:
        shape = {1: "a name without '/'", 2: "account/container", 3: "account/container/object"}
        raise _error(name_tok, f"{kw.value.upper()} needs {shape[expected]}, got {name!r}")
    p[0] = Target(kind, name, kw.line, kw.column)


def p_opt_colon(p):
    """opt_colon : COLON
                 | empty"""


def p_target_name(p):
    """target_name : NAME
                   | PATH
                   | STRING"""
    p[0] = (p[1], _tok(p, 1))


# -- WHEN conditions --------------------------------------------------------


def p_condition_binary(p):
    """condition : condition OR condition
                 | condition AND condition"""
    p[0] = BoolOp(p[2].upper(), p[1], p[3])


def p_condition_group(p):
    """condition : LPAREN condition RPAREN"""
    p[0] = p[2]


def p_condition_comparison(p):
    """condition : NAME cmp_op value"""
    ctx = p.parser.ctx
    ctx["comparisons"] += 1
    metric = _tok(p, 1)
    if ctx["comparisons"] > MAX_COMPARISONS:
        raise _error(metric, f"condition too long (more than {MAX_COMPARISONS} comparisons)")
    p[0] = Comparison(p[1].upper(), p[2], p[3], metric.line, metric.column)


def p_cmp_op(p):
    """cmp_op : GT
              | GE
              | LT
              | LE
              | EQEQ
              | NE
              | EQ"""
    p[0] = "==" if p[1] == "=" else p[1]


# -- actions ----------------------------------------------------------------


def p_actions(p):
    """actions : actions COMMA action_item
               | action_item"""
    p[0] = p[1] + [p[3]] if len(p) == 4 else [p[1]]


def p_action_set(p):
    """action_item : SET NAME modifiers
                   | SET NAME WITH param modifiers"""
    name = _tok(p, 2)
    params, mods = ([p[4]], p[5]) if len(p) == 6 else ([], p[3])
    p[0] = ("set", Action("SET", p[2], name.line, name.column), params, mods)


def p_action_delete(p):
    """action_item : DELETE NAME"""
    name = _tok(p, 2)
    p[0] = ("delete", Action("DELETE", p[2], name.line, name.column), [], [])


def p_action_param(p):
    """action_item : param modifiers"""
    p[0] = ("param", None, [p[1]], p[2])


def p_param(p):
    """param : NAME EQ value"""
    name = _tok(p, 1)
    p[0] = Param(p[1].lower(), p[3], name.line, name.column)


def p_value(p):
    """value : QUANTITY
             | HEX
             | NAME
             | PATH
             | STRING"""
    tok = _tok(p, 1)
    p[0] = make_value(tok)


def p_modifiers(p):
    """modifiers : modifiers modifier
                 | empty"""
    p[0] = p[1] + [p[2]] if len(p) == 3 else []


def p_modifier_on(p):
    """modifier : ON NAME
                | ON OBJECT"""
    tok = _tok(p, 2)
    word = p[2].upper()
    if word in STAGE_WORDS:
        p[0] = ("stage", STAGE_WORDS[word], tok)
    elif word in METHOD_WORDS:
        p[0] = ("method", word, tok)
    else:
        raise _error(tok, f"ON takes PROXY, OBJECT or a method ({', '.join(METHOD_WORDS)}), "
                          f"got {p[2]!r}")


def p_modifier_order(p):
    """modifier : ORDER QUANTITY"""
    tok = _tok(p, 2)
    if not tok.value.isdigit():
        raise _error(tok, f"ORDER takes a whole number, got {tok.value!r}")
    p[0] = ("order", int(tok.value), tok)


def p_modifier_transient(p):
    """modifier : TRANSIENT"""
    p[0] = ("transient", True, _tok(p, 1))


def p_modifier_runtime(p):
    """modifier : SANDBOXED
                | NATIVE"""
    p[0] = ("runtime", "storlet" if p[1].upper() == "SANDBOXED" else "native", _tok(p, 1))


# -- TO object conditions ---------------------------------------------------


def p_object_conds(p):
    """object_conds : object_conds COMMA object_cond
                    | object_cond"""
    p[0] = p[1] + [p[3]] if len(p) == 4 else [p[1]]


def p_object_cond_type(p):
    """object_cond : OBJECT_TYPE EQ NAME
                   | OBJECT_TYPE EQ STRING"""
    kw = _tok(p, 1)
    p[0] = ObjectCond("type", "==", make_value(_tok(p, 3)), kw.line, kw.column)


def p_object_cond_size(p):
    """object_cond : OBJECT_SIZE cmp_op QUANTITY"""
    kw = _tok(p, 1)
    p[0] = ObjectCond("size", p[2], make_value(_tok(p, 3)), kw.line, kw.column)


def p_object_cond_age(p):
    """object_cond : OBJECT_AGE cmp_op QUANTITY"""
    kw = _tok(p, 1)
    p[0] = ObjectCond("age", p[2], make_value(_tok(p, 3)), kw.line, kw.column)


def p_object_cond_tag(p):
    """object_cond : OBJECT_TAG EQ tag_key COLON value"""
    kw = _tok(p, 1)
    p[0] = ObjectCond("tag", "==", p[5], kw.line, kw.column, key=p[3].lower())


def p_tag_key(p):
    # Tag keys are free-form: a keyword such as ``class`` is a fine key here.
    p[0] = p[1]


p_tag_key.__doc__ = "tag_key : NAME\n | STRING\n | " + "\n | ".join(sorted(_lexer.KEYWORDS))


def p_object_cond_name(p):
    """object_cond : OBJECT_NAME MATCH"""
    kw, match = _tok(p, 1), _tok(p, 2)
    value = Value(match.value, "string", match.value, match.line, match.column + 2)
    try:
        compile_regex(match.value)  # the data path matches with RE2: refuse what it cannot run
    except RegexError as exc:
        raise DSLError.at(value.line, value.column,
                          f"bad regular expression {match.value!r}: {exc}") from None
    p[0] = ObjectCond("name", "=~", value, kw.line, kw.column)


_NAMES = {
    "$end": "end of policy", "NAME": "a name", "PATH": "a path", "QUANTITY": "a number",
    "HEX": "a hex number", "STRING": "a quoted string", "MATCH": "=~regex", "GE": "'>='",
    "LE": "'<='", "NE": "'!='", "EQEQ": "'=='", "GT": "'>'", "LT": "'<'", "EQ": "'='",
    "COMMA": "','", "COLON": "':'", "LPAREN": "'('", "RPAREN": "')'",
}


# "columns=user_id,status": a list written without quotes reads as a second parameter.
_UNQUOTED_LIST = re.compile(
    r"(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<items>[A-Za-z_][\w.\-]*(?:\s*,\s*[A-Za-z_][\w.\-]*)+)\s*$")


def p_error(tok):
    parser = _PARSER
    expected = sorted(_NAMES.get(t, t) for t in parser.action[parser.statestack[-1]])
    hint = f" (expected {', '.join(expected)})" if expected else ""
    before = parser.ctx["text"][:parser.ctx["end_pos"] if tok is None else tok.lexpos]
    listed = _UNQUOTED_LIST.search(before)
    if listed:
        items = re.sub(r"\s+", "", listed.group("items"))
        hint += f"; a list is one quoted value: {listed.group('name')}=\"{items}\""
    if tok is None:
        line, column = parser.ctx["end"]
        raise DSLError.at(line, column, f"unexpected end of policy{hint}")
    raise _error(tok, f"unexpected {_describe(tok)}{hint}")


def _describe(tok):
    if tok.type in _lexer.KEYWORDS:
        return f"keyword {tok.value.upper()}"
    return repr(tok.value)


# -- helpers ----------------------------------------------------------------


def make_value(tok) -> Value:
    """A ``Value`` for a value token; numbers get their unit converted."""
    if tok.type == "QUANTITY":
        m = _QUANTITY.fullmatch(tok.value)
        number = float(m.group("num"))
        try:
            quantity = parse_unit(number, m.group("unit") or None)
        except UnitError as exc:
            raise _error(tok, str(exc)) from None
        return Value(tok.value, "quantity", quantity, tok.line, tok.column)
    if tok.type == "HEX":
        return Value(tok.value, "hex", int(tok.value, 16), tok.line, tok.column)
    kind = "string" if tok.type == "STRING" else "name"
    return Value(tok.value, kind, tok.value, tok.line, tok.column)


def _fold_actions(items) -> tuple[Action, ...]:
    """Turn the flat action items into ``Action`` nodes (see the module docstring)."""
    actions: list[Action] = []
    for kind, action, params, mods in items:
        if kind == "param":
            if not actions or actions[-1].verb != "SET":
                param = params[0]
                raise DSLError.at(param.line, param.column,
                                  f"parameter {param.name!r} outside a SET ... WITH clause")
            action = actions.pop()
            params = list(action.params) + params
        fields = {"params": tuple(params)} if params else {}
        for mod, value, tok in mods:
            field = {"stage": "stage", "method": "methods", "order": "order",
                     "transient": "transient", "runtime": "runtime"}[mod]
            if field == "methods":
                if value in (action.methods + fields.get("methods", ())):
                    raise _error(tok, f"method {value} given twice")
                fields["methods"] = fields.get("methods", action.methods) + (value,)
                continue
            if field in fields or getattr(action, field) not in (None, False):
                keyword = {"stage": "ON", "runtime": "SANDBOXED/NATIVE"}.get(mod, mod.upper())
                raise _error(tok, f"{keyword} given twice for {action.name!r}")
            fields[field] = value
        actions.append(_replace(action, fields))
    return tuple(actions)


def _replace(action: Action, fields: dict) -> Action:
    return replace(action, **fields) if fields else action


_PARSER = yacc.yacc(debug=False, write_tables=False, errorlog=yacc.NullLogger())
_LOCK = threading.Lock()  # a PLY parser keeps its state on the instance


def parse(text: str) -> list[Statement]:
    """Parse policy text into statements; raise ``DSLError`` with every problem found."""
    statements: list[Statement] = []
    diagnostics: list[Diagnostic] = []
    for chunk in _split(_lexer.tokenize(text)):
        try:
            statements.append(_parse_statement(text, chunk))
        except DSLError as exc:
            diagnostics.extend(exc.diagnostics)
    if diagnostics:
        raise DSLError(diagnostics)
    return statements


def _split(toks):
    chunk = []
    for tok in toks:
        if tok.type == "SEP":
            if chunk:
                yield chunk
            chunk = []
        else:
            chunk.append(tok)
    if chunk:
        yield chunk


def _parse_statement(text, chunk) -> Statement:
    last = chunk[-1]
    source = text[chunk[0].lexpos:last.end]
    feed = iter(chunk)
    with _LOCK:
        _PARSER.ctx = {"comparisons": 0, "end": (last.line, last.column + last.end - last.lexpos),
                       "text": text, "end_pos": last.end}
        node = _PARSER.parse(tokenfunc=lambda: next(feed, None))
    return replace(node, text=source)
