#!/usr/bin/python3
"""Runs a command with its standard output on a terminal, a closed pipe or a
file, and reports what the shell cannot show lit: the exit status, and what
was printed on each stream.

usage: run.py [--stdout=tty|closed-pipe|capture] [--memory-limit=BYTES] -- COMMAND ARG...

Prints 'exit: N' (or 'signal: NAME'), then 'stderr:' and the standard error
lines, then (for tty and capture) 'stdout: N bytes' and, when it is text,
the lines of standard output.
"""
import argparse
import os
import pty
import resource
import signal
import subprocess
import sys


def limit_memory(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply if limit else None


def run_on_tty(command, preexec):
    # The child's stdout is the slave side of a pseudo-terminal; what it
    # writes there is read back from the master side.
    master, slave = pty.openpty()
    proc = subprocess.Popen(command, stdout=slave, stderr=subprocess.PIPE, preexec_fn=preexec)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    err = proc.stderr.read()
    proc.wait()
    os.close(master)
    return proc.returncode, out, err


def run_on_closed_pipe(command, preexec):
    # The reading end is closed before the child starts: its first write to
    # stdout fails with EPIPE (as `tool | head -1` does once head has exited).
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, preexec_fn=preexec)
    os.close(write_end)
    err = proc.stderr.read()
    proc.wait()
    return proc.returncode, None, err


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdout", choices=["tty", "closed-pipe", "capture"], default="capture")
    parser.add_argument("--memory-limit", type=int, default=0)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    preexec = limit_memory(args.memory_limit)
    if args.stdout == "tty":
        code, out, err = run_on_tty(args.command, preexec)
    elif args.stdout == "closed-pipe":
        code, out, err = run_on_closed_pipe(args.command, preexec)
    else:
        proc = subprocess.run(args.command, capture_output=True, preexec_fn=preexec)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    if code < 0:
        print(f"signal: {signal.Signals(-code).name}")
    else:
        print(f"exit: {code}")
    print("stderr:")
    sys.stdout.write(err.decode("utf-8", "replace"))
    if out is not None:
        print(f"stdout: {len(out)} bytes")
        if b"\0" not in out:
            sys.stdout.write(out.decode("utf-8", "replace").replace("\r\n", "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
