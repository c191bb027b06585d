"""String predicates of Dataset.filter(expr="..."), as Ray 2.x's: parsed with Python's ast (never
evaluated as Python) into a small tree that pyarrow.compute evaluates over a block's columns.

    x > 3 and label == 'cat'        comparisons (chained ones too: 1 < x <= 5), and, or, not
    (a + b) * 2 >= c / 3 - d % 2    arithmetic: + - * / // % and unary -, Python's meanings
                                    (/ is true division, // and % floor), + joins strings
    kind in ['a', 'b']              in / not in a literal list, tuple or set, and is_in(x, [...])
    is_null(x), is_valid(x), is_not_null(x), is_nan(x), x is None, x is not None

Names are columns (a dotted name, user.age, is the column of that name, as Ray's); constants are
numbers, strings, booleans and bytes. Anything else (calls of other functions, attributes of
values, subscripts, lambdas, comprehensions, ...) is a ValueError naming it, raised by parse().
A row whose predicate is null is dropped, as Arrow's filter (and Ray's) does.
"""

import ast

import pyarrow as pa
import pyarrow.compute as pc

_COMPARE = {ast.Eq: (pc.equal, "=="), ast.NotEq: (pc.not_equal, "!="),
            ast.Lt: (pc.less, "<"), ast.LtE: (pc.less_equal, "<="),
            ast.Gt: (pc.greater, ">"), ast.GtE: (pc.greater_equal, ">=")}
_ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
               ast.Mod: "%"}
_CALLS = ("is_null", "is_valid", "is_not_null", "is_nan", "is_in")
SUPPORTED = ("comparisons (== != < <= > >=), and/or/not, arithmetic (+ - * / // %), "
             "in/not in a literal list, is None/is not None, and the functions "
             + ", ".join(f"{name}()" for name in _CALLS))


class Predicate:
    """A parsed filter expression: its columns, and its evaluation over a table (a boolean
    mask). Picklable: it travels to the data tasks as its text and is parsed again there."""

    def __init__(self, text):
        if not isinstance(text, str):
            raise TypeError(f"filter(expr=) takes a string, got {type(text).__name__}")
        self.text = text
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as error:
            raise ValueError(f"filter(expr={text!r}): invalid syntax at column "
                             f"{error.offset}: {error.msg}") from None
        except (RecursionError, MemoryError):
            raise ValueError(f"filter(expr={text[:80]!r}...): the expression is too deeply "
                             f"nested") from None
        self.tree = _check(tree.body, text)
        self.columns = sorted(_columns(self.tree))

    def __reduce__(self):
        return Predicate, (self.text,)

    def check_columns(self, names):
        """ValueError naming the first column of the expression not among `names`."""
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise ValueError(f"filter(expr={self.text!r}): no column {missing[0]!r} in the "
                             f"dataset (columns: {list(names)})")

    def mask(self, table):
        """The boolean mask of `table`'s rows that satisfy the expression (nulls: dropped)."""
        self.check_columns(table.column_names)
        try:
            value = _evaluate(self.tree, table)
        except (ValueError, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            # (pa.ArrowInvalid is a ValueError)
            raise ValueError(f"filter(expr={self.text!r}): {error}") from None
        if isinstance(value, pa.Scalar):
            if not pa.types.is_boolean(value.type) and value.is_valid:
                raise ValueError(f"filter(expr={self.text!r}) gives {value.type}, not booleans")
            keep = value.is_valid and value.as_py()
            return pa.array([bool(keep)] * table.num_rows, type=pa.bool_())
        if not pa.types.is_boolean(value.type):
            raise ValueError(f"filter(expr={self.text!r}) gives {value.type} values, not "
                             f"booleans: compare them (e.g. `... > 0`)")
        return value


def parse(text):
    return Predicate(text)


# ---- checking the tree (parse time)
def _unsupported(node, text, what=None):
    return ValueError(f"filter(expr={text!r}): {what or type(node).__name__} "
                      f"({ast.unparse(node)!r}) is not supported; supported: {SUPPORTED}")


def _column_name(node):
    """The column a Name or a dotted Attribute names (user.age), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _column_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node, text):
    if isinstance(node, ast.Constant):
        if node.value is None:
            raise ValueError(f"filter(expr={text!r}): None is not a value to compare with: "
                             f"use is_null(x) or `x is None`")
        if not isinstance(node.value, (bool, int, float, str, bytes)):
            raise _unsupported(node, text, f"the constant {node.value!r}")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and \
            isinstance(node.operand, ast.Constant) and \
            isinstance(node.operand.value, (int, float)) and \
            not isinstance(node.operand.value, bool):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    raise _unsupported(node, text, "a list of anything but constants")


def _values(node, text):
    """The constants of a literal list, tuple or set (the right side of `in`)."""
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        raise _unsupported(node, text, "`in` anything but a literal list")
    return ("values", [_literal(e, text) for e in node.elts])


def _check(node, text):
    """The tree evaluate() runs: tuples of (kind, ...)."""
    name = _column_name(node)
    if name is not None:
        return ("column", name)
    if isinstance(node, ast.Constant):
        return ("constant", _literal(node, text))
    if isinstance(node, ast.BoolOp):
        return ("and" if isinstance(node.op, ast.And) else "or",
                [_check(v, text) for v in node.values])
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return ("not", _check(node.operand, text))
        if isinstance(node.op, ast.USub):
            return ("neg", _check(node.operand, text))
        if isinstance(node.op, ast.UAdd):
            return _check(node.operand, text)
        raise _unsupported(node, text, f"the operator {type(node.op).__name__}")
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _ARITHMETIC:
            raise _unsupported(node, text, f"the operator {type(node.op).__name__}")
        return ("arith", _ARITHMETIC[type(node.op)], _check(node.left, text),
                _check(node.right, text))
    if isinstance(node, ast.Compare):
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(_comparison(op, left, right, node, text))
            left = right
        return parts[0] if len(parts) == 1 else ("and", parts)
    if isinstance(node, ast.Call):
        return _call(node, text)
    raise _unsupported(node, text)


def _comparison(op, left, right, node, text):
    if isinstance(op, (ast.In, ast.NotIn)):
        test = ("in", _check(left, text), _values(right, text))
        return test if isinstance(op, ast.In) else ("not", test)
    if isinstance(op, (ast.Is, ast.IsNot)):
        if not (isinstance(right, ast.Constant) and right.value is None):
            raise _unsupported(node, text, "`is` with anything but None")
        operand = _check(left, text)
        return ("is_null", operand, False) if isinstance(op, ast.Is) else ("is_valid", operand)
    if type(op) not in _COMPARE:
        raise _unsupported(node, text, f"the comparison {type(op).__name__}")
    return ("compare", type(op), _check(left, text), _check(right, text))


def _call(node, text):
    fn = node.func.id if isinstance(node.func, ast.Name) else None
    if fn not in _CALLS:
        raise _unsupported(node, text, f"the function {ast.unparse(node.func)}()")
    keywords = {k.arg: k.value for k in node.keywords}
    if fn == "is_in":
        if len(node.args) != 2 or keywords:
            raise ValueError(f"filter(expr={text!r}): is_in() takes a column and a list")
        return ("in", _check(node.args[0], text), _values(node.args[1], text))
    nan_is_null = False
    if fn == "is_null" and (len(node.args) == 2 or "nan_is_null" in keywords):
        flag = node.args[1] if len(node.args) == 2 else keywords.pop("nan_is_null")
        if not (isinstance(flag, ast.Constant) and isinstance(flag.value, bool)):
            raise ValueError(f"filter(expr={text!r}): is_null()'s nan_is_null is True or False")
        nan_is_null = flag.value
        node_args = node.args[:1]
    else:
        node_args = node.args
    if len(node_args) != 1 or keywords:
        raise ValueError(f"filter(expr={text!r}): {fn}() takes one column")
    operand = _check(node_args[0], text)
    if fn == "is_null":
        return ("is_null", operand, nan_is_null)
    return ("is_nan" if fn == "is_nan" else "is_valid", operand)


def _columns(tree):
    kind = tree[0]
    if kind == "column":
        return {tree[1]}
    out = set()
    for part in tree[1:]:
        if isinstance(part, tuple):
            out |= _columns(part)
        elif isinstance(part, list):
            for p in part:
                if isinstance(p, tuple):
                    out |= _columns(p)
    return out


# ---- evaluation (in the data task, per block)
def _evaluate(tree, table):
    kind = tree[0]
    if kind == "column":
        return table.column(tree[1])
    if kind == "constant":
        return pa.scalar(tree[1])
    if kind in ("and", "or"):
        fn = pc.and_kleene if kind == "and" else pc.or_kleene
        out = _boolean(_evaluate(tree[1][0], table), kind)
        for part in tree[1][1:]:
            out = fn(out, _boolean(_evaluate(part, table), kind))
        return out
    if kind == "not":
        return pc.invert(_boolean(_evaluate(tree[1], table), "not"))
    if kind == "neg":
        return pc.negate(_evaluate(tree[1], table))
    if kind == "compare":
        return _COMPARE[tree[1]][0](_evaluate(tree[2], table), _evaluate(tree[3], table))
    if kind == "arith":
        return _arithmetic(tree[1], _evaluate(tree[2], table), _evaluate(tree[3], table))
    if kind == "in":
        values = _evaluate(tree[1], table)
        value_set = pa.array(tree[2][1])
        if value_set.type != values.type and len(value_set):
            value_set = value_set.cast(values.type)
        return pc.is_in(values, value_set=value_set)
    if kind == "is_null":
        return pc.is_null(_evaluate(tree[1], table), nan_is_null=tree[2])
    if kind == "is_valid":
        return pc.is_valid(_evaluate(tree[1], table))
    if kind == "is_nan":
        return pc.is_nan(_evaluate(tree[1], table))
    raise AssertionError(f"unknown expression node {kind}")


def _boolean(value, op):
    if not pa.types.is_boolean(value.type) and not pa.types.is_null(value.type):
        raise ValueError(f"`{op}` takes booleans, got {value.type} (compare it first, "
                         f"e.g. `x > 0 {op} ...`)")
    return value


def _is_int(value):
    return pa.types.is_integer(value.type)


def _arithmetic(op, a, b):
    strings = any(pa.types.is_string(v.type) or pa.types.is_large_string(v.type)
                  for v in (a, b))
    if op == "+" and strings:
        return pc.binary_join_element_wise(a, b, "")
    if op == "+":
        return pc.add_checked(a, b)
    if op == "-":
        return pc.subtract_checked(a, b)
    if op == "*":
        return pc.multiply_checked(a, b)
    if op == "/":  # Python's true division, also of integers
        if _is_int(a) and _is_int(b):
            a, b = pc.cast(a, pa.float64()), pc.cast(b, pa.float64())
        return pc.divide(a, b)
    quotient = _floor_divide(a, b)
    if op == "//":
        return quotient
    return pc.subtract(a, pc.multiply(quotient, b))  # %: the sign of the divisor, as Python's


def _floor_divide(a, b):
    if not (_is_int(a) and _is_int(b)):
        return pc.floor(pc.divide(pc.cast(a, pa.float64()) if _is_int(a) else a, b))
    truncated = pc.divide_checked(a, b)  # integer division rounds toward zero
    exact = pc.equal(pc.multiply(truncated, b), a)
    signs_differ = pc.not_equal(pc.less(a, 0), pc.less(b, 0))
    return pc.if_else(pc.and_(pc.invert(exact), signs_differ), pc.subtract(truncated, 1),
                      truncated)
