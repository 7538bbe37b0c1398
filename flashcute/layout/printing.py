"""Text forms of layouts, identical to C++ CuTe's ``print`` / ``print_layout``, and a parser of them.

* :func:`to_str` is C++ ``cute::print`` of an IntTuple, Layout, Swizzle or ComposedLayout:
  ``(_4,(2,_4)):(_2,(_1,8))``, ``Sw<3,3,3> o _0 o (_64,_64):(_64,_1)``.
* :func:`print_layout` / :func:`layout_table` is C++ ``cute::print_layout`` of a rank-2 layout.
* :func:`parse_layout` reads those strings back (``_N`` static, ``N`` dynamic).
"""

import re

from .int_tuple import Int, ScaledBasis, _, size, to_str
from .layout import Layout, as_position_independent_swizzle_layout, cosize, make_composed_layout, rank
from .swizzle import SmemPtrFlag, Swizzle

__all__ = ["to_str", "print_layout", "layout_table", "parse_layout", "parse_int_tuple"]


def _num_digits(x):
    # C++ cute::num_digits: 1 for anything below 10 (negatives included), at most 10
    for n, bound in enumerate((10, 100, 1000, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7, 10 ** 8, 10 ** 9), 1):
        if x < bound:
            return n
    return 10


def layout_table(layout):
    """The text C++ ``print_layout(layout)`` prints, for a rank-2 (possibly composed) layout."""
    layout = as_position_independent_swizzle_layout(layout)  # as C++ does for smem_ptr_flag atoms
    if int(rank(layout)) != 2:
        raise ValueError(f"print_layout needs a rank-2 layout, got rank {int(rank(layout))}: {to_str(layout)}")
    idx_width = _num_digits(int(cosize(layout))) + 2
    delim = "+-----------------------"
    m_size, n_size = int(size(layout.shape, 0)), int(size(layout.shape, 1))
    values = layout.offsets().reshape(n_size, m_size).T  # offsets() is colexicographic: m fastest
    seg = delim[:idx_width + 1]
    rule = "    " + seg * n_size + "+\n"
    out = [to_str(layout), "\n", "    "]
    out.extend(f"  {n:{idx_width - 2}d} " for n in range(n_size))
    out.append("\n")
    for m in range(m_size):
        out.append(rule)
        out.append(f"{m:2d}  ")
        out.extend(f"| {int(v):{idx_width - 2}d} " for v in values[m])
        out.append("|\n")
    out.append(rule)
    return "".join(out)


def print_layout(layout, file=None):
    """Print ``layout`` as C++ ``cute::print_layout`` does (rank-2 table of offsets)."""
    print(layout_table(layout), end="", file=file)


_TOKEN = re.compile(r"\s*(?:(Sw<\s*-?\d+\s*,\s*-?\d+\s*,\s*-?\d+\s*>)|(smem_ptr\[\d+b\]\(unset\))|"
                    r"(_?-?\d+(?:@\d+)*)|(_)|([():,])|(o\b))")


def _tokenize(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"parse_layout: unexpected text at position {pos}: {text[pos:pos + 20]!r} in {text!r}")
        pos = m.end()
        swz, flag, num, under, punct, comp = m.groups()
        if swz:
            out.append(("sw", tuple(int(v) for v in re.findall(r"-?\d+", swz))))
        elif flag:
            out.append(("flag", int(re.findall(r"\d+", flag)[0])))
        elif num:
            out.append(("num", num))
        elif under:
            out.append(("under", "_"))
        elif punct:
            out.append((punct, punct))
        else:
            out.append(("o", "o"))
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def _number(tok):
    parts = tok.split("@")
    head = parts[0]
    value = Int(int(head[1:])) if head.startswith("_") else int(head)
    if len(parts) > 1:
        return ScaledBasis(value, tuple(int(m) for m in reversed(parts[1:])))
    return value


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i][0] if self.i < len(self.toks) else None

    def take(self, kind):
        if self.peek() != kind:
            found = self.toks[self.i][1] if self.i < len(self.toks) else "end of text"
            raise ValueError(f"parse_layout: expected {kind!r}, found {found!r} in {self.text!r}")
        tok = self.toks[self.i]
        self.i += 1
        return tok[1]

    def offset(self):
        if self.peek() == "flag":
            return SmemPtrFlag(self.take("flag"))
        return self.int_tuple()

    def int_tuple(self):
        kind = self.peek()
        if kind == "num":
            return _number(self.take("num"))
        if kind == "under":
            self.take("under")
            return _
        if kind == "(":
            self.take("(")
            items = []
            if self.peek() != ")":
                items.append(self.int_tuple())
                while self.peek() == ",":
                    self.take(",")
                    items.append(self.int_tuple())
            self.take(")")
            return tuple(items)
        found = self.toks[self.i][1] if self.i < len(self.toks) else "end of text"
        raise ValueError(f"parse_layout: expected an integer or '(', found {found!r} in {self.text!r}")

    def plain_layout(self):
        shape = self.int_tuple()
        self.take(":")
        stride = self.int_tuple()
        return Layout(shape, stride)

    def layout_term(self):
        if self.peek() == "sw":
            return Swizzle(*self.take("sw"))
        return self.plain_layout()

    def layout(self):
        first = self.layout_term()
        if self.peek() != "o":
            return first
        self.take("o")
        offset = self.offset()
        self.take("o")
        inner = self.layout()
        return make_composed_layout(first, offset, inner)

    def done(self):
        if self.i != len(self.toks):
            raise ValueError(f"parse_layout: trailing text {self.toks[self.i][1]!r} in {self.text!r}")


def parse_layout(text):
    """Read a layout from C++'s printed form.

    ``"(_4,(2,_4)):(_2,(_1,8))"`` -> Layout; ``"Sw<3,3,3> o _0 o (_64,_64):(_64,_1)"`` -> ComposedLayout
    (the offset may also be ``smem_ptr[16b](unset)``, as GMMA atoms print);
    a bare ``"Sw<2,3,3>"`` -> Swizzle.  ``_N`` parses as static ``Int(N)``, ``N`` as a dynamic int,
    ``_1@0`` as a basis element.  Malformed text raises ValueError saying where.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_layout expects a string, got {type(text).__name__}")
    p = _Parser(text)
    result = p.layout()
    p.done()
    return result


def parse_int_tuple(text):
    """Read an IntTuple from C++'s printed form, e.g. ``"(_4,(2,_8))"``."""
    p = _Parser(text)
    result = p.int_tuple()
    p.done()
    return result

