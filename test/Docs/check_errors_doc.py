#!/usr/bin/env python3
"""Checks docs/errors.md's test references: each `FILE:LINE` a row cites
must show a piece of the row's message within a few lines of LINE.

    check_errors_doc.py ERRORS_MD TEST_ROOT [--fix]

A message's pieces are its literal runs between placeholders (capital
words such as NAME, PATH, N); a reference holds when lines LINE-2 ..
LINE+2 of the cited file show 12 characters of a piece from one of its
word starts (a whole piece, if shorter), with C++ string literals split
over lines joined and escapes undone. With --fix, a reference that does
not hold moves to the line that shows the longest stretch of the message
(the nearest of equals), where one shows a piece. Prints one line per
stale reference, then a summary; exits 1 when any is stale (after --fix:
any left).
"""
import difflib
import re
import sys

PLACEHOLDER = re.compile(r"\b(?:[A-Z][A-Z0-9_]*[A-Z0-9]|[A-Z])\b")
LINK = re.compile(r"\[([^\]]+?):(\d+)\]\(\.\./test/([^)#]+)#L(\d+)\)")
WINDOW = 2
SPAN = 12


def normalize(text):
    """Text as a test writes it: adjacent string literals joined, escapes
    and quoting undone."""
    text = re.sub(r'"\s*\n\s*"', "", text)
    text = text.replace('\\"', '"').replace("\\'", "'").replace("\\\\", "\\")
    return text.replace("\\n", " ")


def pieces(message):
    """What a test must show of a message: 12 characters from each word
    start of its literal runs (a shorter run whole)."""
    message = normalize(message)
    runs = []
    for part in PLACEHOLDER.split(message):
        # Quotes and brackets around a placeholder are not distinctive.
        part = part.strip(" '\"`()[],:;=")
        if part:
            runs.append(part)
    wanted = set()
    for run in runs:
        if len(run) <= SPAN:
            wanted.add(run)
            continue
        for start in range(len(run) - SPAN + 1):
            if start == 0 or run[start - 1] == " ":
                wanted.add(run[start:start + SPAN])
    long_ones = {w for w in wanted if len(w) >= 6}
    return long_ones or wanted, runs


def shows(text, wanted):
    return any(piece in text for piece in wanted)


def holds(lines, line, wanted):
    low = max(0, line - 1 - WINDOW)
    high = min(len(lines), line + WINDOW)
    return shows(normalize("\n".join(lines[low:high])), wanted)


def starts(lines, number, wanted):
    """Whether line `number` shows a piece, or begins one that a string
    literal continues on the next line."""
    here = normalize(lines[number - 1])
    if shows(here, wanted):
        return True
    return number < len(lines) and not shows(normalize(lines[number]), wanted) and shows(
        normalize("\n".join(lines[number - 1:number + 1])), wanted)


def overlap(text, runs):
    """The longest stretch of a message's literal runs found in `text`."""
    best = 0
    for run in runs:
        match = difflib.SequenceMatcher(None, run, text, autojunk=False).find_longest_match(
            0, len(run), 0, len(text))
        best = max(best, match.size)
    return best


def nearest(lines, line, wanted, runs):
    """The line that starts the longest stretch of the message (the
    nearest of equals), among those that show a piece."""
    best, best_size = None, 0
    for number in range(1, len(lines) + 1):
        if not starts(lines, number, wanted):
            continue
        size = overlap(normalize("\n".join(lines[number - 1:number + 1])), runs)
        if size > best_size or (size == best_size and abs(number - line) < abs(best - line)):
            best, best_size = number, size
    return best


def main():
    args = [a for a in sys.argv[1:] if a != "--fix"]
    fix = "--fix" in sys.argv[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    doc_path, test_root = args
    doc = open(doc_path, encoding="utf-8").read().split("\n")
    files = {}
    checked = stale = moved = 0
    for index, row in enumerate(doc):
        if not row.startswith("| `"):
            continue
        message = row[3:row.index("` |")] if "` |" in row else row[3:].split("`")[0]
        wanted, runs = pieces(message)
        if not wanted:
            continue

        def check(match):
            nonlocal checked, stale, moved
            label, line, path, anchor = match.groups()
            checked += 1
            if path not in files:
                try:
                    files[path] = open(f"{test_root}/{path}", encoding="utf-8").read().split("\n")
                except OSError:
                    files[path] = None
            lines = files[path]
            line = int(anchor)
            if lines is not None and holds(lines, line, wanted):
                return match.group(0)
            target = nearest(lines, line, wanted, runs) if lines is not None else None
            if fix and target is not None:
                moved += 1
                return f"[{label}:{target}](../test/{path}#L{target})"
            stale += 1
            where = "missing file" if lines is None else f"nearest {target}" if target else "message not found"
            print(f"{doc_path}:{index + 1}: {path}:{line} does not show `{message}` ({where})")
            return match.group(0)

        doc[index] = LINK.sub(check, row)
    if fix:
        open(doc_path, "w", encoding="utf-8").write("\n".join(doc))
    print(f"errors.md references: {checked} checked, {stale} stale" + (f", {moved} moved" if fix else ""))
    sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
