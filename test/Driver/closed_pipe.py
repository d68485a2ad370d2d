#!/usr/bin/env python3
"""Runs a command with its standard output a pipe already closed.

usage: closed_pipe.py COMMAND...

What `| head -1` leaves once head has exited: every write to the standard
output fails (EPIPE, or SIGPIPE where it is not ignored). Prints the
command's exit status (negative: the signal that killed it) and its
standard error.
"""
import os
import subprocess
import sys

r, w = os.pipe()
os.close(r)
run = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
print("status", run.returncode)
sys.stdout.write(run.stderr.decode())
