"""IntTuple: an integer or a (nested) tuple of IntTuples, as in CuTe's ``cute/int_tuple.hpp``.

Static and dynamic integers
---------------------------
CuTe distinguishes integers known at compile time (``cute::Int<4>``, printed ``_4``) from
run-time integers (``int``, printed ``4``).  The algebra takes different branches on them, so the
mirror tracks the distinction:

* a plain Python ``int`` is **dynamic**;
* :class:`Int` (an ``int`` subclass, e.g. ``Int(4)``) is **static**.

Arithmetic keeps C++'s rules: an operation on two statics is static, anything touching a dynamic
is dynamic, except C++'s special cases (``_0 * x``, ``x * _0``, ``_0 & x``, ``_0 / x``,
``_0 % x`` and ``x % _1`` are the static ``_0``).  C++ integer division truncates toward zero:
the algebra uses :func:`div` / :func:`mod` for that, Python's ``//`` and ``%`` keep Python's meaning.

Also here: the wildcard :data:`_` (``cute::_``) for slicing, and the codomain types of identity
layouts, :class:`ScaledBasis` (``E<0>`` prints ``_1@0``) and :class:`ArithTuple`.
"""

import numbers

__all__ = [
    "Int", "Underscore", "_", "ScaledBasis", "ArithTuple", "E",
    "is_int", "is_tuple", "is_static", "is_constant", "has_underscore", "all_underscore",
    "as_int_tuple", "div", "mod", "cmin", "cmax", "gcd", "lcm", "cabs", "signum", "shiftl", "shiftr",
    "rank", "depth", "product", "size", "product_each", "product_like", "sum_", "inner_product",
    "ceil_div", "round_up", "shape_div", "elem_scale", "congruent", "weakly_congruent",
    "compatible", "evenly_divides", "filter_zeros", "flatten", "unflatten", "wrap", "unwrap",
    "get", "take", "select", "append", "prepend", "replace", "remove", "group", "zip_", "zip2_by",
    "repeat_like", "transform_leaf", "front", "back", "prefix_product", "suffix_product",
    "crd2idx", "idx2crd", "crd2crd", "compact_major", "compact_col_major", "compact_row_major",
    "compact_order", "LayoutLeft", "LayoutRight", "slice_", "dice", "make_basis_like",
    "as_arithmetic_tuple", "basis_get", "basis_value", "lex_less", "colex_less", "elem_less",
    "static_equal", "to_str",
]


class Int(int):
    """A static integer: C++ ``cute::Int<N>`` (``cute::C<N>``), printed ``_N``.

    Arithmetic with another :class:`Int` stays static; with a plain ``int`` it becomes dynamic,
    except where C++ keeps it static (``_0 * x`` is ``_0`` ...).
    """

    __slots__ = ()

    def __new__(cls, value):
        if isinstance(value, Int):
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"Int expects an integer, got {value!r}")
        return super().__new__(cls, int(value))

    def __repr__(self):
        return f"_{int(self)}"

    __str__ = __repr__

    def __neg__(self):
        return Int(-int(self))

    def __pos__(self):
        return self

    def __abs__(self):
        return Int(abs(int(self)))

    def __invert__(self):
        return Int(~int(self))

    def __reduce__(self):
        return (Int, (int(self),))


def _is_plain_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _make_op(fn, rule):
    """Build a binary operator of Int: ``rule(a, b)`` says whether the result is static."""

    def forward(a, b):
        if not _is_plain_int(b):
            return NotImplemented
        v = fn(int(a), int(b))
        return Int(v) if rule(a, b) else v

    def reflected(a, b):
        if not _is_plain_int(b):
            return NotImplemented
        v = fn(int(b), int(a))
        return Int(v) if rule(b, a) else v

    return forward, reflected


def _both(a, b):
    return isinstance(a, Int) and isinstance(b, Int)


def _both_or_zero(a, b):
    return _both(a, b) or is_constant(0, a) or is_constant(0, b)


for _name, _fn, _rule in [
    ("add", lambda a, b: a + b, _both),
    ("sub", lambda a, b: a - b, _both),
    ("mul", lambda a, b: a * b, _both_or_zero),
    ("and", lambda a, b: a & b, _both_or_zero),
    ("or", lambda a, b: a | b, _both),
    ("xor", lambda a, b: a ^ b, _both),
    ("lshift", lambda a, b: a << b, _both),
    ("rshift", lambda a, b: a >> b, _both),
    ("floordiv", lambda a, b: a // b, _both),
    ("mod", lambda a, b: a % b, _both),
]:
    _f, _r = _make_op(_fn, _rule)
    setattr(Int, f"__{_name}__", _f)
    setattr(Int, f"__r{_name}__", _r)
del _name, _fn, _rule, _f, _r


class Underscore:
    """The slicing wildcard ``cute::_``: keeps a mode when slicing a layout or a tensor."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "_"

    def __reduce__(self):
        return (Underscore, ())


_ = Underscore()


def is_int(x):
    """True for a (static or dynamic) integer leaf; the wildcard ``_`` and bases count too (C++ is_integral)."""
    return _is_plain_int(x) or isinstance(x, (Underscore, ScaledBasis))


def is_tuple(x):
    return isinstance(x, tuple)


def is_static(x):
    """C++ ``is_static``: every leaf is known at compile time."""
    if isinstance(x, tuple):
        return all(is_static(a) for a in x)
    if isinstance(x, ScaledBasis):
        return is_static(x.value)
    return isinstance(x, (Int, Underscore))


def is_constant(n, x):
    """C++ ``is_constant<n, X>``: ``x`` is a static integer equal to ``n``."""
    return isinstance(x, Int) and int(x) == n


def static_equal(a, b):
    """True when ``a == b`` is statically known to be true (C++ ``is_constant<true, decltype(a == b)>``)."""
    if isinstance(a, ScaledBasis) or isinstance(b, ScaledBasis):
        if not (isinstance(a, ScaledBasis) and isinstance(b, ScaledBasis)):
            return False
        return a.modes == b.modes and static_equal(a.value, b.value)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(static_equal(x, y) for x, y in zip(a, b)))
    return isinstance(a, Int) and isinstance(b, Int) and int(a) == int(b)


def has_underscore(x):
    if isinstance(x, tuple):
        return any(has_underscore(a) for a in x)
    return isinstance(x, Underscore)


def all_underscore(x):
    if isinstance(x, tuple):
        return all(all_underscore(a) for a in x)
    return isinstance(x, Underscore)


def as_int_tuple(x, what="int-tuple"):
    """Normalise user input to an IntTuple: lists become tuples, numpy integers become ``int``.

    Raises TypeError naming ``what`` for anything that is not an integer or a nested tuple of them,
    and ValueError for nesting deeper than :data:`MAX_DEPTH` (instead of a RecursionError).
    """
    _check_depth(x, what)
    return _as_int_tuple(x, what)


MAX_DEPTH = 64


def _check_depth(x, what):
    level, depth = [x], 0
    while level:
        level = [a for t in level if isinstance(t, (tuple, list)) for a in t]
        depth += 1
        if depth > MAX_DEPTH:
            raise ValueError(f"{what}: nested deeper than {MAX_DEPTH} levels")


def _as_int_tuple(x, what):
    if isinstance(x, (tuple, list)):
        return tuple(_as_int_tuple(a, what) for a in x)
    if isinstance(x, (Int, Underscore, ScaledBasis)):
        return x
    if _is_plain_int(x):
        return int(x)
    raise TypeError(f"{what}: expected an integer or a tuple of integers, got {x!r} ({type(x).__name__})")


# ---------------------------------------------------------------------------------------------
# Integer arithmetic with C++ semantics (truncating division) and C++ static-ness.
# ---------------------------------------------------------------------------------------------

def _wrap(v, static):
    return Int(v) if static else v


class DivisionByZero(ValueError, ZeroDivisionError):
    """An integer division by zero inside the algebra (where C++ would fault at run time)."""


def _cdiv_value(a, b):
    if b == 0:
        raise DivisionByZero(f"integer division {a} / 0 (C++ CuTe would fault here)")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def div(a, b):
    """C++ ``a / b`` on integers (truncates toward zero); static as in C++ (``_0 / x`` is ``_0``)."""
    if isinstance(a, ScaledBasis):
        return ScaledBasis(div(a.value, b), a.modes)
    return _wrap(_cdiv_value(int(a), int(b)), _both(a, b) or is_constant(0, a))


def mod(a, b):
    """C++ ``a % b`` on integers (sign of ``a``); static as in C++ (``x % _1`` and ``_0 % x`` are ``_0``)."""
    a_, b_ = int(a), int(b)
    if b_ == 0:
        raise DivisionByZero(f"integer modulo {a_} % 0 (C++ CuTe would fault here)")
    v = a_ - _cdiv_value(a_, b_) * b_
    return _wrap(v, _both(a, b) or is_constant(0, a) or is_constant(1, b) or is_constant(-1, b))


def cmin(a, b):
    """``cute::min`` of two integers: static only if both are."""
    return _wrap(min(int(a), int(b)), _both(a, b))


def cmax(a, b):
    return _wrap(max(int(a), int(b)), _both(a, b))


def _gcd_value(t, u):
    # C++ cute::gcd loop with C remainders (keeps C++'s sign behaviour)
    while True:
        if t == 0:
            return u
        u = u - _cdiv_value(u, t) * t
        if u == 0:
            return t
        t = t - _cdiv_value(t, u) * u


def gcd(a, b):
    return _wrap(_gcd_value(int(a), int(b)), _both(a, b))


def lcm(a, b):
    g = _gcd_value(int(a), int(b))
    return _wrap(_cdiv_value(int(a), g) * int(b), _both(a, b))


def cabs(a):
    if isinstance(a, ScaledBasis):
        return ScaledBasis(cabs(a.value), a.modes)
    return _wrap(abs(int(a)), isinstance(a, Int))


def signum(a):
    v = int(a)
    return _wrap((v > 0) - (v < 0), isinstance(a, Int))


def shiftr(x, s):
    """C++ ``shiftr``: right shift for ``s >= 0``, left shift by ``-s`` otherwise."""
    v = int(x) >> int(s) if int(s) >= 0 else int(x) << -int(s)
    return _wrap(v, _both(x, s))


def shiftl(x, s):
    v = int(x) << int(s) if int(s) >= 0 else int(x) >> -int(s)
    return _wrap(v, _both(x, s))


# ---------------------------------------------------------------------------------------------
# Basis elements and arithmetic tuples (codomain of identity layouts).
# ---------------------------------------------------------------------------------------------

class ArithTuple(tuple):
    """C++ ``ArithmeticTuple``: a tuple with element-wise ``+``/``-`` (shorter operand padded with ``_0``)."""

    __slots__ = ()

    def __add__(self, other):
        if isinstance(other, ScaledBasis):
            other = as_arithmetic_tuple(other)
        if is_constant(0, other):
            return self
        if not isinstance(other, tuple):
            return NotImplemented
        n = max(len(self), len(other))
        a = tuple(self) + (Int(0),) * (n - len(self))
        b = tuple(other) + (Int(0),) * (n - len(other))
        return ArithTuple(_add(x, y) for x, y in zip(a, b))

    def __radd__(self, other):
        if isinstance(other, ScaledBasis):
            other = as_arithmetic_tuple(other)  # C++ has ScaledBasis + ArithmeticTuple too
        if is_constant(0, other):
            return self
        if not isinstance(other, tuple):
            return NotImplemented
        return ArithTuple(other) + self

    def __sub__(self, other):
        if is_constant(0, other):
            return self
        return self + _neg(ArithTuple(other))

    def __neg__(self):
        return _neg(self)

    def __repr__(self):
        return "(" + ",".join(repr(a) for a in self) + ")"


def _neg(x):
    if isinstance(x, tuple):
        return ArithTuple(_neg(a) for a in x)
    return -x


def _add(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        return ArithTuple(a) + b if isinstance(a, tuple) else ArithTuple(b).__radd__(a)
    return a + b


class ScaledBasis:
    """C++ ``ScaledBasis<T, Ns...>``: ``value`` in the mode addressed by ``modes`` (``E<0>`` prints ``_1@0``).

    ``modes`` is the hierarchical index of the basis direction, outermost first:
    ``ScaledBasis(Int(1), (1, 0))`` is C++ ``E<1,0>`` (printed ``_1@0@1``).
    """

    __slots__ = ("value", "modes")

    def __init__(self, value, modes):
        if isinstance(value, ScaledBasis):
            modes = tuple(modes) + value.modes
            value = value.value
        self.value = value
        self.modes = tuple(int(m) for m in modes)

    def __mul__(self, other):
        if isinstance(other, (ScaledBasis, tuple)):
            return NotImplemented
        return ScaledBasis(self.value * other, self.modes)

    def __rmul__(self, other):
        if isinstance(other, (ScaledBasis, tuple)):
            return NotImplemented
        return ScaledBasis(other * self.value, self.modes)

    def __add__(self, other):
        if isinstance(other, (ScaledBasis, tuple)):
            return as_arithmetic_tuple(self) + other
        if isinstance(other, Int):
            if not self.modes:
                return self.value + other
            if int(other) != 0:
                raise TypeError(f"cannot add the integer {other!r} to the basis element {self!r}")
            return self
        raise TypeError(f"cannot add the dynamic integer {other!r} to the basis element {self!r} "
                        "(C++ has no such operator)")

    def __radd__(self, other):
        if isinstance(other, tuple):
            return ArithTuple(other) + as_arithmetic_tuple(self)
        if isinstance(other, Int):
            if not self.modes:
                return other + self.value
            if int(other) != 0:
                raise TypeError(f"cannot add the integer {other!r} to the basis element {self!r}")
            return self
        raise TypeError(f"cannot add the dynamic integer {other!r} to the basis element {self!r} "
                        "(C++ has no such operator)")

    def __neg__(self):
        return ScaledBasis(-self.value, self.modes)

    def __eq__(self, other):
        return isinstance(other, ScaledBasis) and self.modes == other.modes and self.value == other.value

    def __hash__(self):
        return hash((self.value, self.modes))

    def __repr__(self):
        return repr(self.value) + "".join(f"@{m}" for m in reversed(self.modes))


def E(*modes):
    """C++ ``E<modes...>``: the unit basis element ``_1`` in the given hierarchical mode."""
    return ScaledBasis(Int(1), modes)


def as_arithmetic_tuple(x):
    if isinstance(x, ScaledBasis):
        v = x.value
        for m in reversed(x.modes):
            v = ArithTuple((Int(0),) * m + (v,))
        return v
    if isinstance(x, tuple):
        return ArithTuple(as_arithmetic_tuple(a) for a in x)
    return x


def basis_get(b, t):
    """Apply the modes of basis ``b`` as nested indices into ``t`` (identity for a plain integer)."""
    if isinstance(b, ScaledBasis):
        for m in b.modes:
            t = get(t, m)
    return t


def basis_value(b):
    return b.value if isinstance(b, ScaledBasis) else b


def make_basis_like(shape, _modes=()):
    if isinstance(shape, tuple):
        return tuple(make_basis_like(s, _modes + (i,)) for i, s in enumerate(shape))
    return ScaledBasis(Int(1), _modes)


def to_str(x):
    """C++ ``cute::print`` text of ``x``: an int-tuple here; layouts, swizzles, tensors ... print through
    their ``cute_str`` method, so every module can print without importing the others."""
    if isinstance(x, tuple):
        return "(" + ",".join(to_str(a) for a in x) + ")"
    if isinstance(x, (Int, Underscore, ScaledBasis)):
        return repr(x)
    if isinstance(x, bool):
        raise TypeError("to_str: bool is not an IntTuple")
    if isinstance(x, int):
        return str(int(x))
    text = getattr(x, "cute_str", None)
    if text is None:
        raise TypeError(f"to_str: cannot print {type(x).__name__}")
    return text()


# ---------------------------------------------------------------------------------------------
# Tuple structure
# ---------------------------------------------------------------------------------------------

def rank(t):
    """Number of top-level modes (a non-tuple has rank 1). Static, as in C++."""
    return Int(len(t)) if isinstance(t, tuple) else Int(1)


def depth(t):
    if isinstance(t, tuple):
        return Int(1 + max((int(depth(a)) for a in t), default=0))
    return Int(0)


def _add_all(values, init):
    r = init
    for v in values:
        r = _add(r, v) if r is not None else v
    return r


def product(t):
    """Product of all leaves (``_1`` for the empty tuple), with C++ static-ness."""
    if isinstance(t, tuple):
        if not t:
            return Int(1)
        r = product(t[0])
        for a in t[1:]:
            r = r * product(a)
        return r
    if isinstance(t, Underscore):
        raise TypeError("product of '_' is undefined")
    return t


def size(t, *modes):
    """``size<modes...>(t)``: product of the leaves of ``get(t, *modes)``."""
    return product(get(t, *modes))


def product_each(t):
    return tuple(product(a) for a in wrap(t))


def product_like(t, guide):
    """Products of ``t`` at the leaves of ``guide``."""
    if isinstance(guide, tuple):
        if not isinstance(t, tuple) or len(t) != len(guide):
            raise ValueError(f"product_like: {t!r} does not match the profile of {guide!r}")
        return tuple(product_like(a, g) for a, g in zip(t, guide))
    return product(t)


def sum_(t):
    """``cute::sum``: ``_0 + ... + leaves``."""
    if isinstance(t, tuple):
        r = Int(0)
        for a in t:
            r = _add(r, sum_(a))
        return r
    return t


def inner_product(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            raise ValueError(f"inner_product: mismatched ranks {a!r} and {b!r}")
        r = Int(0)
        for x, y in zip(a, b):
            r = _add(r, inner_product(x, y))
        return r
    if isinstance(a, tuple) or isinstance(b, tuple):
        raise ValueError(f"inner_product: mismatched profiles {a!r} and {b!r}")
    return a * b


def _ceil_div_int(a, b):
    return div(a + b - Int(1), b)


def ceil_div(a, b):
    """C++ ``ceil_div``: tuple/tuple by mode (missing modes of ``b`` are 1), tuple/int folds ``b`` across ``a``."""
    if isinstance(a, tuple):
        if isinstance(b, tuple):
            if len(a) < len(b):
                raise ValueError(f"ceil_div: {b!r} has more modes than {a!r}")
            b = b + (Int(1),) * (len(a) - len(b))
            return tuple(ceil_div(x, y) for x, y in zip(a, b))
        result = []
        rest = b
        for ai in a:
            result.append(ceil_div(ai, rest))
            rest = ceil_div(rest, ai)
        return tuple(result)
    if isinstance(b, tuple):
        return ceil_div(a, product(b))
    return _ceil_div_int(a, b)


def round_up(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) < len(b):
            raise ValueError(f"round_up: {b!r} has more modes than {a!r}")
        b = b + (Int(1),) * (len(a) - len(b))
        return tuple(round_up(x, y) for x, y in zip(a, b))
    return div(a + b - Int(1), b) * b


def shape_div(a, b):
    """C++ ``shape_div``: like ceil_div, but static operands must satisfy ``a % b == 0 or b % a == 0``."""
    if isinstance(a, tuple):
        if isinstance(b, tuple):
            if len(a) != len(b):
                raise ValueError(f"shape_div: mismatched ranks {a!r} and {b!r}")
            return tuple(shape_div(x, y) for x, y in zip(a, b))
        result = []
        rest = b
        for ai in a:
            result.append(shape_div(ai, rest))
            rest = shape_div(rest, ai)
        return tuple(result)
    if isinstance(b, tuple):
        return shape_div(a, product(b))
    if _both(a, b) and int(a) % int(b) != 0 and int(b) % int(a) != 0:
        raise ValueError(f"shape_div: divisibility condition violated, neither of {a!r} and {b!r} divides the other")
    return _ceil_div_int(a, b)


def elem_scale(a, b):
    if isinstance(a, tuple):
        if not isinstance(b, tuple) or len(a) != len(b):
            raise ValueError(f"elem_scale: mismatched profiles {a!r} and {b!r}")
        return tuple(elem_scale(x, y) for x, y in zip(a, b))
    return a * product(b)


def congruent(a, b):
    """Same hierarchical profile."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not isinstance(a, tuple) and not isinstance(b, tuple)


def weakly_congruent(a, b):
    """Partial order ``a <= b`` on profiles: every leaf of ``a`` covers a subtree of ``b``."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(weakly_congruent(x, y) for x, y in zip(a, b))
    if not isinstance(a, tuple):
        return True
    return False


def compatible(a, b):
    """Shape ``a`` is compatible with shape ``b``: same size, and coordinates of ``a`` are coordinates of ``b``."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))
    if not isinstance(a, tuple):
        return int(a) == int(product(b))
    return False


def evenly_divides(a, b):
    if isinstance(b, tuple):
        if len(b) > int(rank(a)):
            return False
        return all(evenly_divides(get(a, i), bi) for i, bi in enumerate(b))
    return int(size(a)) == int(size(b)) * int(product(ceil_div(a, b)))


def filter_zeros(a, b=None):
    """Replace the elements of ``b`` paired with a static ``_0`` in ``a`` by ``_1`` (``b`` defaults to ``a``)."""
    if b is None:
        b = a
    if isinstance(a, tuple):
        if not isinstance(b, tuple) or len(a) != len(b):
            raise ValueError(f"filter_zeros: mismatched profiles {a!r} and {b!r}")
        return tuple(filter_zeros(x, y) for x, y in zip(a, b))
    if is_constant(0, a):
        return repeat_like(b, Int(1))
    return b


def flatten(t):
    """Depth-1 tuple of the leaves (a non-tuple is returned as is)."""
    if isinstance(t, tuple):
        out = []
        for a in t:
            if isinstance(a, tuple):
                out.extend(flatten(a))
            else:
                out.append(a)
        return tuple(out)
    return t


def _flatten_to_tuple(t):
    return flatten(t) if isinstance(t, tuple) else (t,)


def unflatten(flat, profile):
    """Fold the flat tuple ``flat`` into the profile of ``profile``."""
    flat = _flatten_to_tuple(flat)

    def rec(items, prof):
        if isinstance(prof, tuple):
            out = []
            for p in prof:
                sub, items = rec(items, p)
                out.append(sub)
            return tuple(out), items
        if not items:
            raise ValueError("unflatten: not enough elements for the target profile")
        return items[0], items[1:]

    result, rest = rec(flat, profile)
    if rest:
        raise ValueError(f"unflatten: {len(rest)} elements left over for the target profile {profile!r}")
    return result


def wrap(t):
    return t if isinstance(t, tuple) else (t,)


def unwrap(t):
    while isinstance(t, tuple) and len(t) == 1:
        t = t[0]
    return t


def get(t, *modes):
    """``get<modes...>(t)``; ``get<0>`` of a non-tuple is the value itself, as in C++."""
    for m in modes:
        m = int(m)
        if isinstance(t, tuple):
            if not 0 <= m < len(t):
                raise IndexError(f"mode {m} out of range for rank-{len(t)} {t!r}")
            t = t[m]
        elif m != 0:
            raise IndexError(f"mode {m} out of range for the rank-1 {t!r}")
    return t


def take(t, b, e):
    """Modes ``[b, e)`` as a tuple (C++ ``take<B,E>``)."""
    t = wrap(t)
    if not 0 <= b <= e <= len(t):
        raise IndexError(f"take<{b},{e}>: range out of bounds for rank {len(t)}")
    return tuple(t[b:e])


def select(t, *idx):
    t = wrap(t)
    return tuple(get(t, i) for i in idx)


def append(t, x, n=None):
    """Append ``x`` (C++ ``append``); with ``n``, pad ``t`` with ``x`` up to rank ``n`` (C++ ``append<N>``)."""
    if n is None:
        return wrap(t) + (x,)
    if not isinstance(t, tuple):
        if n == 1:
            return t
        t = (t,)
    if n < len(t):
        raise ValueError(f"append<{n}>: {t!r} already has rank {len(t)}")
    return t + (x,) * (n - len(t))


def prepend(t, x, n=None):
    if n is None:
        return (x,) + wrap(t)
    if not isinstance(t, tuple):
        if n == 1:
            return t
        t = (t,)
    if n < len(t):
        raise ValueError(f"prepend<{n}>: {t!r} already has rank {len(t)}")
    return (x,) * (n - len(t)) + t


def replace(t, n, x):
    t = wrap(t)
    return t[:n] + (x,) + t[n + 1:]


def remove(t, n):
    t = wrap(t)
    return t[:n] + t[n + 1:]


def group(t, b, e=None):
    """Group modes ``[b, e)`` into one mode (C++ ``group<B,E>``; ``e=None`` means to the end)."""
    t = wrap(t)
    if e is None or e == -1:
        e = len(t)
    if not 0 <= b <= e <= len(t):
        raise IndexError(f"group<{b},{e}>: range out of bounds for rank {len(t)}")
    return t[:b] + (t[b:e],) + t[e:]


def zip_(*ts):
    """C++ ``zip``: transpose ``((a,b,...),(x,y,...))`` into ``((a,x),(b,y),...)``."""
    t = ts if len(ts) > 1 else ts[0]
    if not isinstance(t, tuple):
        return t
    if not isinstance(t[0], tuple):
        return (t,)
    n = len(t[0])
    for x in t:
        if not isinstance(x, tuple) or len(x) != n:
            raise ValueError(f"zip: mismatched ranks in {t!r}")
    return tuple(tuple(x[j] for x in t) for j in range(n))


def zip2_by(t, guide):
    """C++ ``zip2_by``: gather the rank-2 modes at the leaves of ``guide`` into ((A,B,..),(a,b,..,rest))."""
    if isinstance(guide, tuple):
        if not isinstance(t, tuple) or len(t) < len(guide):
            raise ValueError(f"zip2_by: {t!r} has fewer modes than the guide {guide!r}")
        split = [zip2_by(t[i], g) for i, g in enumerate(guide)]
        return (tuple(s[0] for s in split), tuple(s[1] for s in split) + tuple(t[len(guide):]))
    if not isinstance(t, tuple) or len(t) != 2:
        raise ValueError(f"zip2_by: expected a rank-2 mode at a tiler leaf, got {t!r}")
    return t


def repeat_like(t, x):
    if isinstance(t, tuple):
        return tuple(repeat_like(a, x) for a in t)
    return x


def transform_leaf(t, f):
    if isinstance(t, tuple):
        return tuple(transform_leaf(a, f) for a in t)
    return f(t)


def front(t):
    while isinstance(t, tuple):
        t = t[0]
    return t


def back(t):
    while isinstance(t, tuple):
        t = t[-1]
    return t


def prefix_product(a, init=Int(1)):
    """Exclusive prefix product, congruent to ``a`` (pycute's ``prefix_product``)."""
    if isinstance(a, tuple):
        out = []
        for v in a:
            out.append(prefix_product(v, init))
            init = init * product(v)
        return tuple(out)
    return init


def suffix_product(a, init=Int(1)):
    if isinstance(a, tuple):
        out = []
        for v in reversed(a):
            out.append(suffix_product(v, init))
            init = init * product(v)
        return tuple(reversed(out))
    return init


# ---------------------------------------------------------------------------------------------
# Coordinates
# ---------------------------------------------------------------------------------------------

def crd2idx(coord, shape, stride=None):
    """Map a coordinate to an index.

    With ``stride``: the inner product of the (hierarchical) coordinate with the strides, where
    an integer coordinate is split colexicographically over a tuple shape (C++ ``crd2idx(c,s,d)``).
    Without: the colexicographic index of ``coord`` in ``shape`` (C++ ``crd2idx(c,s)``).
    No range checks (C++ has none; the last mode extends): :class:`Layout` checks its calls.
    """
    if stride is None:
        return _crd2idx_colex(coord, shape)
    if isinstance(coord, tuple):
        if not isinstance(shape, tuple):
            raise ValueError(f"crd2idx: coordinate {coord!r} has more modes than the shape {shape!r}")
        if len(coord) != len(shape) or len(shape) != len(stride):
            raise ValueError(f"crd2idx: coordinate {coord!r} does not match the rank of the shape {shape!r}")
        r = None
        for c, s, d in zip(coord, shape, stride):
            v = crd2idx(c, s, d)
            r = v if r is None else _add(r, v)
        return Int(0) if r is None else r
    if isinstance(shape, tuple):
        if not isinstance(stride, tuple) or len(shape) != len(stride):
            raise ValueError(f"crd2idx: shape {shape!r} and stride {stride!r} are not congruent")
        if not shape:
            return Int(0)
        if isinstance(coord, Underscore):
            coord = Int(0)
        if is_constant(0, coord):
            r = Int(0)
            for s, d in zip(shape, stride):
                r = _add(r, crd2idx(Int(0), s, d))
            # C++: crd2idx(_0,s0,d0) + (_0 + ... + crd2idx(_0,si,di)); the sum's static-ness is the same
            return r
        r = None
        for s, d in zip(shape[:-1], stride[:-1]):
            p = product(s)
            q, m = div(coord, p), mod(coord, p)
            v = crd2idx(m, s, d)
            r = v if r is None else _add(r, v)
            coord = q
        v = crd2idx(coord, shape[-1], stride[-1])
        return v if r is None else _add(r, v)
    if isinstance(coord, Underscore):
        coord = Int(0)  # C++'s Underscore is an Int<0>: slice_and_offset's offset ignores sliced modes
    return coord * stride


def _crd2idx_colex(coord, shape):
    if not isinstance(coord, tuple):
        return coord
    if not isinstance(shape, tuple) or len(coord) != len(shape):
        raise ValueError(f"crd2idx: coordinate {coord!r} does not match the rank of the shape {shape!r}")
    flat_c = flatten(coord)
    flat_s = flatten(product_like(shape, coord))
    r = flat_c[-1]
    for c, s in zip(reversed(flat_c[:-1]), reversed(flat_s[:-1])):
        r = c + s * r
    return r


def idx2crd(idx, shape, stride=None):
    """Split an index into a coordinate of ``shape`` (colexicographic; C++ ``idx2crd``).

    With ``stride`` (C++ ``idx2crd(i,s,d)``, valid for compact layouts): ``(i / d) % s`` per leaf.
    """
    if stride is not None:
        if isinstance(idx, tuple):
            if not isinstance(shape, tuple) or len(idx) != len(shape) or len(shape) != len(stride):
                raise ValueError(f"idx2crd: mismatched ranks {idx!r}, {shape!r}, {stride!r}")
            return tuple(idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride))
        if isinstance(shape, tuple):
            if not isinstance(stride, tuple):
                stride = compact_col_major(shape, stride)
            if len(shape) != len(stride):
                raise ValueError(f"idx2crd: shape {shape!r} and stride {stride!r} are not congruent")
            return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride))
        if is_constant(1, shape):
            return Int(0)
        return mod(div(idx, stride), shape)
    if isinstance(idx, tuple):
        if not isinstance(shape, tuple) or len(idx) != len(shape):
            raise ValueError(f"idx2crd: coordinate {idx!r} does not match the rank of the shape {shape!r}")
        return tuple(idx2crd(i, s) for i, s in zip(idx, shape))
    if not isinstance(shape, tuple):
        return idx
    # C++ computes crd2idx(idx, shape, make_basis_like(shape)); this is the same with leaves kept apart
    if is_constant(0, idx):
        return repeat_like(shape, Int(0))
    out = []
    for s in shape[:-1]:
        p = product(s)
        out.append(idx2crd(mod(idx, p), s))
        idx = div(idx, p)
    out.append(idx2crd(idx, shape[-1]))
    return tuple(out)


def crd2crd(coord, src_shape, dst_shape):
    if isinstance(coord, tuple) and isinstance(src_shape, tuple) and isinstance(dst_shape, tuple):
        if not len(coord) == len(src_shape) == len(dst_shape):
            raise ValueError(f"crd2crd: mismatched ranks {coord!r}, {src_shape!r}, {dst_shape!r}")
        return tuple(crd2crd(c, s, d) for c, s, d in zip(coord, src_shape, dst_shape))
    return idx2crd(crd2idx(coord, src_shape), dst_shape)


class _MajorTag:
    """Tag for compact strides: :data:`LayoutLeft` (column-major) or :data:`LayoutRight` (row-major)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


LayoutLeft = _MajorTag("LayoutLeft")
LayoutRight = _MajorTag("LayoutRight")


def _compact(shape, current, major):
    if isinstance(shape, tuple):
        out = [None] * len(shape)
        order = range(len(shape)) if major is LayoutLeft else reversed(range(len(shape)))
        for i in order:
            out[i], current = _compact(shape[i], current, major)
        return tuple(out), current
    if is_constant(1, shape):
        return Int(0), current
    return current, current * shape


def compact_major(shape, major=LayoutLeft, current=Int(1)):
    """Compact strides for ``shape``: column-major (:data:`LayoutLeft`) or hierarchical row-major."""
    if isinstance(current, tuple):
        if not isinstance(shape, tuple) or len(shape) != len(current):
            raise ValueError(f"compact_major: mismatched ranks {shape!r} and {current!r}")
        return tuple(compact_major(s, major, c) for s, c in zip(shape, current))
    return _compact(shape, current, major)[0]


def compact_col_major(shape, current=Int(1)):
    return compact_major(shape, LayoutLeft, current)


def compact_row_major(shape, current=Int(1)):
    return compact_major(shape, LayoutRight, current)


def compact_order(shape, order):
    """Compact strides following ``order`` (smaller order = smaller stride), C++ ``compact_order``.

    Dynamic elements of ``order`` count as larger than every static one, ordered left to right.
    ``order`` may also be :data:`LayoutLeft` / :data:`LayoutRight`.
    """
    if order is LayoutLeft or order is LayoutRight:
        return compact_major(shape, order)
    if not weakly_congruent(order, shape):
        raise ValueError(f"compact_order: order {order!r} is not weakly congruent with shape {shape!r}")
    ref_shape = _flatten_to_tuple(product_like(shape, order))
    flat_order = _flatten_to_tuple(order)
    max_order = Int(0)
    for o in flat_order:
        if isinstance(o, Int) and int(max_order) < int(o):
            max_order = o
    ref_order = tuple(o if isinstance(o, Int) else Int(int(max_order) + 1 + i) for i, o in enumerate(flat_order))
    new_order = unflatten(ref_order, order)

    def rec(s, o):
        if isinstance(o, tuple):
            return tuple(rec(si, oi) for si, oi in zip(s, o))
        start = Int(1)
        for rs, ro in zip(ref_shape, ref_order):
            start = start * (rs if int(ro) < int(o) else Int(1))
        return compact_col_major(s, start)

    return rec(shape, new_order)


# ---------------------------------------------------------------------------------------------
# Slicing
# ---------------------------------------------------------------------------------------------

def _lift_slice(a, b):
    if isinstance(a, tuple):
        if not isinstance(b, tuple) or len(a) != len(b):
            raise ValueError(f"slice: coordinate {a!r} does not match the profile of {b!r}")
        return tuple(x for ai, bi in zip(a, b) for x in _lift_slice(ai, bi))
    if isinstance(a, Underscore):
        return (b,)
    return ()


def slice_(crd, t):
    """Keep the elements of ``t`` paired with ``_`` in ``crd`` (C++ ``slice``)."""
    if isinstance(crd, tuple):
        if not isinstance(t, tuple) or len(crd) != len(t):
            raise ValueError(f"slice: coordinate {crd!r} does not match the profile of {t!r}")
        return tuple(x for ai, bi in zip(crd, t) for x in _lift_slice(ai, bi))
    if isinstance(crd, Underscore):
        return t
    return ()


def _lift_dice(a, b):
    if isinstance(a, tuple):
        if not isinstance(b, tuple) or len(a) != len(b):
            raise ValueError(f"dice: coordinate {a!r} does not match the profile of {b!r}")
        return tuple(x for ai, bi in zip(a, b) for x in _lift_dice(ai, bi))
    if isinstance(a, Underscore):
        return ()
    return (b,)


def dice(crd, t):
    """Keep the elements of ``t`` paired with integers in ``crd`` (C++ ``dice``)."""
    if isinstance(crd, tuple):
        if not isinstance(t, tuple) or len(crd) != len(t):
            raise ValueError(f"dice: coordinate {crd!r} does not match the profile of {t!r}")
        return tuple(x for ai, bi in zip(crd, t) for x in _lift_dice(ai, bi))
    if isinstance(crd, Underscore):
        return ()
    return t


# ---------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------

def lex_less(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        for x, y in zip(a, b):
            if lex_less(x, y):
                return True
            if x != y:
                return False
        return len(a) < len(b)
    return a < b


def colex_less(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        for x, y in zip(reversed(a), reversed(b)):
            if colex_less(x, y):
                return True
            if x != y:
                return False
        return len(a) < len(b)
    return a < b


def elem_less(a, b):
    """Element-wise ``a < b`` for every mode of ``a`` (C++ ``elem_less``; used as a bounds predicate)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) > len(b):
            return False
        return all(elem_less(x, y) for x, y in zip(a, b))
    return a < b
