#!/usr/bin/python3
"""Checks that every long option a tool's --help lists appears in its man page.

usage: check_help_in_man.py TOOL MANPAGE
Exit 1 and name the missing options if any are absent.
"""
import re
import subprocess
import sys


def main():
    tool, page = sys.argv[1], sys.argv[2]
    help_text = subprocess.run([tool, "--help"], capture_output=True, text=True, check=True).stdout
    options = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text)))
    # groff escapes '-' as '\-'; compare on the unescaped text.
    man = open(page, encoding="utf-8").read().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
    missing = [o for o in options if o not in man]
    if missing:
        print(f"{page}: options in --help but not in the man page: {' '.join(missing)}")
        return 1
    print(f"{len(options)} options checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
