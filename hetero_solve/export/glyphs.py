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

    def draw(self, pixels: np.ndarray, lines: list[str], cx: float, cy: float) -> None:
        """Write ``lines`` centred on pixel ``(cx, cy)`` (column, row from the top) into
        ``pixels`` (rows, columns, 3 or 4 channels of uint8), black over what is there."""
        rows, cols = pixels.shape[:2]
        top = cy - self.line_height * len(lines) / 2
        for k, line in enumerate(lines):
            baseline = top + k * self.line_height + (self.line_height + self._ascent) / 2 \
                - self.line_height * 0.12
            x = cx - self.width(line) / 2
            for char in line:
                keep, x_offset, below, advance = self._glyph(char)
                h, w = keep.shape[:2]
                if h and w:
                    r1 = int(baseline + 0.5) + below
                    r0, c0 = r1 - h, int(x + x_offset + 0.5)
                    if r0 >= 0 and c0 >= 0 and r1 <= rows and c0 + w <= cols:
                        region = pixels[r0:r1, c0:c0 + w, :3]
                        region[...] = region * keep // 255
                x += advance
