"""Runs a command with the flags of an explain note's suggested fix added.

usage: apply_fix.py ERRORS.txt COMMAND ARG...

ERRORS.txt holds loomc's diagnostics with a note "it fits with FLAGS: ...";
the command runs with FLAGS appended, and its exit status is returned.
"""

import re
import subprocess
import sys

text = open(sys.argv[1]).read()
match = re.search(r"note: it fits with (.*?): ", text)
if not match:
    sys.exit("no 'it fits with' note in " + sys.argv[1])
sys.exit(subprocess.call(sys.argv[2:] + match.group(1).split()))
