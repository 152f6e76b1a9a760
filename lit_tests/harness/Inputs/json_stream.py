#!/usr/bin/python3
"""Reads standard input as a stream of JSON values separated by white space
and prints 'all json' and the count; fails on anything else."""
import json
import sys

text = sys.stdin.read()
decoder = json.JSONDecoder()
pos, count = 0, 0
while True:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos == len(text):
        break
    _, pos = decoder.raw_decode(text, pos)
    count += 1
if count == 0:
    sys.exit("no JSON value")
print(f"all json ({count} values)")
