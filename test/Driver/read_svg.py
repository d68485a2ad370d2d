"""Prints what loomc --mesh-svg drew: its title, the rank numbers in its
boxes, how many colors the boxes have, and each param row's text.

usage: read_svg.py FILE.svg
"""

import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
texts = [(float(t.get("x")), float(t.get("y")), t.text or "") for t in root.iter(NS + "text")]
boxes = [r for r in root.iter(NS + "rect") if r.get("rx")]
print("title:", texts[0][2])
ranks = [t for t in texts if t[2].isdigit()]
print("ranks:", " ".join(str(n) for n in sorted(int(t[2]) for t in ranks)))
print("colors:", len({b.get("fill") for b in boxes}))
# A param row: its name, then on the same line its shape and split.
rows = {}
for x, y, text in texts:
    rows.setdefault(y, []).append((x, text))
for y in sorted(rows):
    cells = [text for x, text in sorted(rows[y])]
    if len(cells) == 2 and " shard " in cells[1]:
        print(f"{cells[0]}: {cells[1]}")
