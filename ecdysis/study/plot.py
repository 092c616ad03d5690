"""The study's plot: held-out accuracy per configuration with its 95% interval, as a dependency-free SVG."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ecdysis.study.results import StudyRow

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 40, 60
BAR, WHISKER = "#4e79a7", "#222222"


def accuracy_svg(rows: Sequence[StudyRow], *, title: str) -> str:
    """One bar per row (its accuracy), with the interval as a whisker; rows without a score get an empty slot."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(1, len(rows))

    def y(value: float) -> float:
        return TOP + plot_h * (1.0 - max(0.0, min(1.0, value)))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
                     'stroke="#dddddd"/>')
        parts.append(f'<text x="{LEFT - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    parts.append(f'<text x="16" y="{TOP + plot_h / 2}" transform="rotate(-90 16 {TOP + plot_h / 2})" '
                 'text-anchor="middle">held-out accuracy (95% interval)</text>')
    for i, row in enumerate(rows):
        center = LEFT + slot * (i + 0.5)
        parts.append(f'<text x="{center:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">'
                     f'{escape(row.configuration)}</text>')
        if row.accuracy is None:
            parts.append(f'<text x="{center:.1f}" y="{y(0.05):.1f}" text-anchor="middle" fill="#888888">not run'
                         '</text>')
            continue
        a = row.accuracy
        parts.append(f'<rect x="{center - slot * 0.3:.1f}" y="{y(a.mean):.1f}" width="{slot * 0.6:.1f}" '
                     f'height="{y(0.0) - y(a.mean):.1f}" fill="{BAR}"><title>{escape(row.configuration)}: '
                     f'{a.describe()}</title></rect>')
        parts.append(f'<line x1="{center:.1f}" x2="{center:.1f}" y1="{y(a.low):.1f}" y2="{y(a.high):.1f}" '
                     f'stroke="{WHISKER}" stroke-width="1.5"/>')
        for end in (a.low, a.high):
            parts.append(f'<line x1="{center - 8:.1f}" x2="{center + 8:.1f}" y1="{y(end):.1f}" y2="{y(end):.1f}" '
                         f'stroke="{WHISKER}" stroke-width="1.5"/>')
        parts.append(f'<text x="{center:.1f}" y="{y(a.high) - 6:.1f}" text-anchor="middle">{a.mean:.2f}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
