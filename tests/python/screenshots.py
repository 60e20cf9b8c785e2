"""Screenshots by headless Chromium (Debian's, which scripts/test installs), and their pixels read
with the standard library."""

import shutil
import struct
import subprocess
import zlib

import pytest

needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Debian's chromium is not installed (scripts/test installs it)"
)


def screenshot(page, shot, width, height):
    """Chromium's screenshot of the file `page` into `shot`; its (width, height, rows of RGB)."""
    proc = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr
    return png_pixels(shot)


def png_pixels(path):
    """(width, height, rows of RGB tuples) of a non-interlaced 8-bit RGB/RGBA PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += n + 12
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1 : i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x : x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def measured(page, script, out):
    """What `script` (JavaScript ending in an expression's text put into document.title) finds in
    a copy of the HTML file `page` laid out by headless Chromium: the report itself runs no
    script, so the test adds its own to a copy, written to `out`."""
    text = page.read_text()
    out.write_text(text.replace("</body>", f"<script>document.title = (() => {{ {script} }})();</script></body>"))
    proc = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    start = proc.stdout.find("<title>")
    assert start >= 0, proc.stderr
    return proc.stdout[start + len("<title>") : proc.stdout.index("</title>", start)]
