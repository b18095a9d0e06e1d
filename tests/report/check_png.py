#!/usr/bin/env python3
"""Exit 0 when a PNG screenshot is not blank: enough non-background pixels and colours.

  check_png.py FILE [--min-ink 0.01] [--min-colours 8]
"""
import argparse
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
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
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--min-ink", type=float, default=0.01)
    ap.add_argument("--min-colours", type=int, default=8)
    args = ap.parse_args()
    width, height, bpp, rows = decode(args.file)
    background = rows[0][:3]
    ink, colours = 0, set()
    for r in rows[::2]:
        for x in range(0, width * bpp, bpp * 2):
            px = r[x:x + 3]
            colours.add(px)
            ink += px != background
    samples = len(rows[::2]) * len(range(0, width * bpp, bpp * 2))
    frac = ink / samples
    print(f"{args.file}: {width}x{height}, {100 * frac:.1f}% non-background pixels, {len(colours)} colours")
    return 0 if frac >= args.min_ink and len(colours) >= args.min_colours else 1


if __name__ == "__main__":
    sys.exit(main())
