#!/usr/bin/env python3
"""Checks that a PNG screenshot is not blank: enough distinct colours and enough non-background pixels.

Standard library only (zlib), so the browser check needs nothing beyond python3 and chromium.
Usage: png_not_blank.py FILE.png [--min-colours N] [--min-ink FRACTION]
Exit status 0 when the picture has content, 1 when it looks blank, 2 when the file is not a PNG it can read.
"""
import argparse
import struct
import sys
import zlib
from collections import Counter

CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type -> samples per pixel


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or interlace or colour not in CHANNELS:
        raise ValueError(f"{path}: only 8-bit non-interlaced PNGs are supported (got depth {depth}, "
                         f"colour type {colour}, interlace {interlace})")
    bpp = CHANNELS[colour]
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            upleft = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                line[i] = (line[i] + paeth(left, up, upleft)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, bpp, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("png")
    parser.add_argument("--min-colours", type=int, default=8)
    parser.add_argument("--min-ink", type=float, default=0.02, help="fraction of pixels unlike the background")
    args = parser.parse_args()
    try:
        width, height, bpp, rows = read_png(args.png)
    except (OSError, ValueError, zlib.error, struct.error, TypeError) as e:
        print(f"png_not_blank: {e}", file=sys.stderr)
        return 2
    colours = Counter()
    for line in rows:
        for x in range(0, len(line), bpp):
            colours[line[x:x + bpp]] += 1
    background, count = colours.most_common(1)[0]
    ink = 1 - count / (width * height)
    print(f"{args.png}: {width}x{height} px, {len(colours)} distinct colours, {100 * ink:.1f}% not background")
    if len(colours) < args.min_colours or ink < args.min_ink:
        print(f"png_not_blank: {args.png} looks blank (need >= {args.min_colours} colours and "
              f">= {100 * args.min_ink:.1f}% ink)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
