#!/usr/bin/env python3
"""Checks a swift-trace-analyze HTML report: well-formed, self-contained, every SVG parses as
XML, no raw microsecond columns, no empty sections. Prints the problems; exit 1 if any.
With --count-chart, prints the number of stacked step-chart rects with a non-zero size."""
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "input", "hr", "link", "col", "area", "base", "wbr", "source"}


class Nest(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append(f"line {self.getpos()[0]}: </{tag}> closes {self.stack[-1:]}")
            return
        self.stack.pop()


def main():
    path = sys.argv[-1]
    text = open(path, encoding="utf-8").read()
    errors = []
    p = Nest()
    p.feed(text)
    p.close()
    errors += p.errors + [f"unclosed <{t}> from line {pos[0]}" for t, pos in p.stack]
    svgs = re.findall(r"<svg\b.*?</svg>", text, re.S)
    charts = 0
    for k, svg in enumerate(svgs):
        try:
            root = ET.fromstring(svg)
        except ET.ParseError as e:
            errors.append(f"svg {k}: {e}")
            continue
        for r in root.iter("{http://www.w3.org/2000/svg}rect"):
            if r.get("class") == "sp":
                if float(r.get("width")) > 0 and float(r.get("height")) > 0:
                    charts += 1
                else:
                    errors.append(f"svg {k}: a chart rect of zero size")
    if re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text):
        errors.append("an external URL")
    # table cells and chart labels (a rule's summary is the rules' own wording, not checked here)
    for cell in re.findall(r"<(?:th|td|title|text)\b[^>]*>([^<]*)<", text):
        if re.search(r"\bus\b|µs", cell):
            errors.append("raw microseconds: " + cell)
            break
    if re.search(r"</h2>\s*(<h2>|</body>)", text):
        errors.append("an empty section: " + re.search(r"<h2>[^<]*</h2>\s*(<h2>|</body>)", text).group(0))
    for e in errors:
        print(f"{path}: {e}", file=sys.stderr)
    if "--count-chart" in sys.argv:
        print(charts)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
