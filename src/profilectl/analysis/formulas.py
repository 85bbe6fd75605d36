"""The language of the formulas kept as data (profiling/operator_flops.yaml, profiling/collectives.yaml):
Python's arithmetic over numbers and shapes, walked node by node from its syntax tree, never
evaluated; a name it does not know, or any other construct, is a FormulaError."""

from __future__ import annotations

import ast
import functools
import math
import operator
from typing import Any, Callable, Iterable, Mapping

class Tensor(tuple):
    """A tensor argument: its shape as a tuple, with its element size."""
    itemsize: float

    def __new__(cls, shape: Iterable[int], itemsize: float) -> "Tensor":
        made = super().__new__(cls, shape)
        made.itemsize = itemsize
        return made


class FormulaError(Exception):
    """A formula that cannot be evaluated for these arguments (a shape it does not expect, a value
    the trace did not record): the operator is shown without FLOPs, with this reason."""


def _prod(values: Any) -> float:
    return math.prod(_vector(values)) if values is not None else _missing("prod of nothing")


def _vector(value: Any) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        return value
    raise FormulaError(f"expected a shape or a list, got {value!r}")


def _missing(what: str) -> Any:
    raise FormulaError(what)


def _numel(x: Any) -> float:
    if x is None:
        return 0
    if isinstance(x, tuple):  # a tensor's shape, or a shape made by broadcast()
        return math.prod(x)
    if isinstance(x, (int, float)):
        return 1
    raise FormulaError(f"numel of {x!r}")


def _nbytes(x: Any) -> float:
    """A tensor's bytes; an absent one, or a Python number, moves none."""
    if isinstance(x, Tensor):
        return math.prod(x) * x.itemsize
    if x is None or isinstance(x, (int, float)):
        return 0
    raise FormulaError(f"nbytes of {x!r}")


def _size(x: Any) -> float:
    if isinstance(x, Tensor):
        return x.itemsize
    raise FormulaError(f"element size of {x!r} (not a tensor)")


def _broadcast(*shapes: Any) -> tuple[int, ...]:
    """NumPy's (and PyTorch's) broadcasting of shapes; a Python number is a 0-dim shape."""
    dims: list[int] = []
    for shape in shapes:
        if shape is None:
            continue
        shape = shape if isinstance(shape, tuple) else ()
        for i, d in enumerate(reversed(shape)):
            if i == len(dims):
                dims.append(d)
            elif dims[i] == 1 or d == dims[i]:
                dims[i] = d
            elif d != 1:
                raise FormulaError(f"shapes do not broadcast: {shapes}")
    return tuple(reversed(dims))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "prod": _prod, "numel": _numel, "nbytes": _nbytes, "size": _size, "broadcast": _broadcast,
    "present": lambda x: 0 if x is None else 1, "len": lambda v: len(_vector(v)),
    "sum": lambda v: sum(_vector(v)), "min": min, "max": max}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge}


def _arith(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """Numbers as numbers; a tuple meets a number element by element, two tuples of one length too."""
    if a is None or b is None:
        raise FormulaError("an argument the trace did not record (torch writes scalar and list arguments in "
                           "\"Concrete Inputs\" from 2.1 on)")
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            raise FormulaError(f"shapes of different lengths: {a} and {b}")
        return tuple(op(x, y) for x, y in zip(a, b))
    if isinstance(a, tuple):
        return tuple(op(x, b) for x in a)
    if isinstance(b, tuple):
        return tuple(op(a, y) for y in b)
    return op(a, b)


@functools.lru_cache(maxsize=None)
def parse(expression: str) -> ast.Expression:
    try:
        return ast.parse(str(expression).strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"not an expression: {expression!r} ({exc.msg})") from None


def evaluate(expression: str | int | float, names: Mapping[str, Any]) -> Any:
    """The value of a formula of profiling/operator_flops.yaml, walked node by node (never eval):
    arithmetic, comparisons, `a if c else b`, subscripts and slices of shapes, the FUNCTIONS."""
    if isinstance(expression, (int, float)) and not isinstance(expression, bool):
        return expression

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise FormulaError(f"unknown name {node.id!r}")
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            try:
                return _arith(_BINARY[type(node.op)], walk(node.left), walk(node.right))
            except (ZeroDivisionError, TypeError, OverflowError) as exc:
                raise FormulaError(str(exc)) from None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return _arith(operator.mul, -1 if isinstance(node.op, ast.USub) else 1, value)
        if isinstance(node, ast.IfExp):
            return walk(node.body) if walk(node.test) else walk(node.orelse)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return int(_COMPARE[type(node.ops[0])](walk(node.left), walk(node.comparators[0])))
        if isinstance(node, ast.Subscript):
            value = walk(node.value)
            if not isinstance(value, tuple):
                raise FormulaError(f"{ast.unparse(node.value)} is not a shape or a list (got {value!r})")
            where = node.slice
            try:
                if isinstance(where, ast.Slice):
                    bounds = [walk(part) if part is not None else None for part in (where.lower, where.upper, where.step)]
                    return tuple(value[slice(*bounds)])
                return value[walk(where)]
            except (IndexError, TypeError):
                raise FormulaError(f"{ast.unparse(node)} of {tuple(value)}") from None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
                and not node.keywords:
            try:
                return FUNCTIONS[node.func.id](*(walk(arg) for arg in node.args))
            except (TypeError, ValueError) as exc:
                raise FormulaError(f"{node.func.id}: {exc}") from None
        raise FormulaError(f"not allowed in a formula: {ast.unparse(node)}")
    return walk(parse(str(expression)))
