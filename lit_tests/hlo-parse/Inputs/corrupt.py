"""Writes a corrupted copy of a .hlob file: corrupt.py MODE IN OUT.

Modes: truncate-header, truncate-payload, flip-payload, flip-header,
older-major, newer-major, bad-magic, repack-garbage (valid checksums, garbage payload).
"""
import struct
import sys
import zlib

mode, src, dst = sys.argv[1:4]
data = bytearray(open(src, "rb").read())

# The source file's own format version: repacked files keep it unless told.
CURRENT_MAJOR, CURRENT_MINOR = struct.unpack_from("<HH", data, 8)

def repack(payload, major=CURRENT_MAJOR, minor=CURRENT_MINOR, flags=0):
    head = bytes(data[:8]) + struct.pack("<HHIQQI", major, minor, flags, len(payload), len(payload),
                                         zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload

if mode == "truncate-header":
    out = data[:20]
elif mode == "truncate-payload":
    out = data[:-5]
elif mode == "flip-payload":
    data[-3] ^= 0x10
    out = data
elif mode == "flip-header":
    data[17] ^= 0x01
    out = data
elif mode == "older-major":
    out = repack(b"", major=CURRENT_MAJOR - 1, minor=0)
elif mode == "newer-major":
    out = repack(b"", major=CURRENT_MAJOR + 1, minor=0)
elif mode == "bad-magic":
    data[1:5] = b"XXXX"
    out = data
elif mode == "repack-garbage":
    out = repack(b"\x05small\xff\xff\xff\xff\x0f")
else:
    sys.exit("unknown mode " + mode)
open(dst, "wb").write(bytes(out))
