"""Server-rendered SVG charts (no JavaScript, no build step).

Two shapes cover the drift page: :func:`line_chart` (values over an ordered
axis, several series, optional horizontal threshold lines) and
:func:`bar_chart`. Values outside the axis range are clipped to it; ``None``
values leave a gap. Every label is XML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

__all__ = ["bar_chart", "line_chart"]

_W, _H = 640, 220
_L, _R, _T, _B = 48, 12, 16, 40
_COLORS = ("#2463eb", "#d97706", "#059669", "#9333ea")


def _y(v: float, lo: float, hi: float) -> float:
    v = min(max(v, lo), hi)
    return _T + (_H - _T - _B) * (1 - (v - lo) / ((hi - lo) or 1))


def _frame(title: str, lo: float, hi: float, thresholds: Sequence[tuple[float, str]]) -> list[str]:
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" class="chart" role="img"'
        f' aria-label="{escape(title, {chr(34): "&quot;"})}">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{_L}" y1="{_H - _B}" x2="{_W - _R}" y2="{_H - _B}" stroke="#888"/>',
        f'<line x1="{_L}" y1="{_T}" x2="{_L}" y2="{_H - _B}" stroke="#888"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        v = lo + (hi - lo) * frac
        y = _y(v, lo, hi)
        out.append(f'<text x="{_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{v:.2g}</text>')
    for v, label in thresholds:
        y = _y(v, lo, hi)
        out.append(
            f'<line x1="{_L}" y1="{y:.1f}" x2="{_W - _R}" y2="{y:.1f}" stroke="#dc2626" stroke-dasharray="4 3"/>'
        )
        out.append(
            f'<text x="{_W - _R}" y="{y - 3:.1f}" text-anchor="end" font-size="10" fill="#dc2626">'
            f"{escape(label)}</text>"
        )
    return out


def _x_labels(labels: Sequence[str], xs: Sequence[float]) -> list[str]:
    step = max(1, len(labels) // 8)
    return [
        f'<text x="{x:.1f}" y="{_H - _B + 14}" text-anchor="middle" font-size="10">{escape(lab)}</text>'
        for i, (lab, x) in enumerate(zip(labels, xs, strict=True))
        if i % step == 0
    ]


def line_chart(
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[float | None]],
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    thresholds: Sequence[tuple[float, str]] = (),
) -> str:
    """Lines of ``series`` (name → values, one per label) over ``labels``."""
    out = _frame(title, lo, hi, thresholds)
    n = len(labels)
    xs = [_L + (_W - _L - _R) * ((i + 0.5) / n) for i in range(n)] if n else []
    out += _x_labels(labels, xs)
    for k, (name, values) in enumerate(series.items()):
        color = _COLORS[k % len(_COLORS)]
        runs: list[list[str]] = [[]]
        for x, v in zip(xs, values, strict=True):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{x:.1f},{_y(v, lo, hi):.1f}")
            out.append(f'<circle cx="{x:.1f}" cy="{_y(v, lo, hi):.1f}" r="3" fill="{color}"/>')
        for pts in runs:
            if len(pts) > 1:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(pts)}"/>')
        out.append(f'<text x="{_L + 8 + 110 * k}" y="{_H - 6}" font-size="11" fill="{color}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    thresholds: Sequence[tuple[float, str]] = (),
) -> str:
    """One bar per label."""
    out = _frame(title, lo, hi, thresholds)
    n = len(labels)
    width = (_W - _L - _R) / max(n, 1)
    xs = [_L + width * (i + 0.5) for i in range(n)]
    out += _x_labels(labels, xs)
    base = _y(lo, lo, hi)
    for x, v in zip(xs, values, strict=True):
        if v is None:
            continue
        y = _y(v, lo, hi)
        out.append(
            f'<rect x="{x - width * 0.35:.1f}" y="{min(y, base):.1f}" width="{width * 0.7:.1f}"'
            f' height="{abs(base - y):.1f}" fill="{_COLORS[0]}"><title>{v:.3f}</title></rect>'
        )
    out.append("</svg>")
    return "\n".join(out)
