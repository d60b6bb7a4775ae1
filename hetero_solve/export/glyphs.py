"""Text drawn into a picture's pixels from glyphs rendered once per character (PNG only).

matplotlib renders every glyph of every text again (FreeType, then Agg): on an affinity
picture of a thousand boxes that was three quarters of the drawing's time.  Box labels repeat
few characters, so here each character is rendered once, at the picture's size, and pasted
where it goes (no kerning: the boxes' text is names and op types in a sans-serif font).
"""

from __future__ import annotations

import numpy as np

#: matplotlib's default line spacing, as a multiple of the font's size.
LINE_SPACING = 1.1 * 1.17


class GlyphText:
    """Black text of one size in matplotlib's default font, written into an RGB(A) array.

    Parameters
    ----------
    points : float
        Font size in points.
    dpi : float
        Pixels per inch of the array.
    """

    def __init__(self, points: float, dpi: float):
        from matplotlib import font_manager
        from matplotlib.ft2font import FT2Font
        self._font = FT2Font(font_manager.findfont(font_manager.FontProperties()))
        self._font.set_size(points, dpi)
        self._cache: dict[str, tuple[np.ndarray, float, int, float]] = {}
        self._widths: dict[str, float] = {}
        self._lines: dict[str, tuple[np.ndarray, int, int]] = {}
        self.line_height = points * dpi / 72 * LINE_SPACING
        self._ascent = self._font.ascender / self._font.units_per_EM * points * dpi / 72

    def _glyph(self, char: str) -> tuple[np.ndarray, float, int, float]:
        """(what the glyph leaves of the background, 255 = all, as uint16; left offset; rows
        below the baseline; advance) of ``char``."""
        found = self._cache.get(char)
        if found is None:
            font = self._font
            font.set_text(char, 0.0)
            font.draw_glyphs_to_bitmap(antialiased=True)
            bitmap = 255 - np.asarray(font.get_image()).astype(np.uint16)[:, :, None]
            x_offset = font.get_bitmap_offset()[0] / 64
            below = int(round(font.get_descent() / 64))
            advance = font.load_char(ord(char)).linearHoriAdvance / 65536
            found = self._cache[char] = (bitmap, x_offset, below, advance)
        return found

    def width(self, line: str) -> float:
        """The advance of ``line`` in pixels."""
        found = self._widths.get(line)
        if found is None:
            found = self._widths[line] = sum(self._glyph(c)[3] for c in line)
        return found

    def _line(self, line: str) -> tuple[np.ndarray, int, int]:
        """``line`` composed once (what it leaves of the background, uint16), with the rows
        it spans above the baseline and its pixel width (lines such as ``Conv | part 3``
        repeat across a picture)."""
        found = self._lines.get(line)
        if found is None:
            glyphs = [self._glyph(c) for c in line]
            up = max((g[0].shape[0] - g[2] for g in glyphs if g[0].size), default=0)
            down = max((g[2] for g in glyphs if g[0].size), default=0)
            width = int(sum(g[3] for g in glyphs) + 0.5) + 2 + max(
                (max(0, int(g[1] + 0.5)) + g[0].shape[1] for g in glyphs if g[0].size), default=0)
            keep = np.full((up + down, width, 1), 255, np.uint16)
            x = 0.0
            for bitmap, x_offset, below, advance in glyphs:
                h, w = bitmap.shape[:2]
                if h and w:
                    r0, c0 = up + below - h, max(int(x + x_offset + 0.5), 0)
                    region = keep[r0:r0 + h, c0:c0 + w]
                    np.minimum(region, bitmap[:region.shape[0], :region.shape[1]], out=region)
                x += advance
            found = self._lines[line] = (keep, up, int(x + 0.5))
        return found

    def draw(self, pixels: np.ndarray, lines: list[str], cx: float, cy: float) -> None:
        """Write ``lines`` centred on pixel ``(cx, cy)`` (column, row from the top) into
        ``pixels`` (rows, columns, 3 or 4 channels of uint8), black over what is there."""
        rows, cols = pixels.shape[:2]
        top = cy - self.line_height * len(lines) / 2
        for k, line in enumerate(lines):
            baseline = top + k * self.line_height + (self.line_height + self._ascent) / 2 \
                - self.line_height * 0.12
            keep, up, advance = self._line(line)
            r0 = int(baseline + 0.5) - up
            c0 = int(cx - advance / 2 + 0.5)
            h, w = keep.shape[:2]
            rr0, cc0, rr1, cc1 = max(r0, 0), max(c0, 0), min(r0 + h, rows), min(c0 + w, cols)
            if rr0 < rr1 and cc0 < cc1:
                region = pixels[rr0:rr1, cc0:cc1, :3]
                region[...] = region * keep[rr0 - r0:rr1 - r0, cc0 - c0:cc1 - c0] // 255
