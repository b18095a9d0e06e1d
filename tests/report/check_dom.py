#!/usr/bin/env python3
"""Checks the report as Chromium laid it out (its --dump-dom): legends sit under their charts,
never inside them over the data; a chart whose x counts whole things (steps, depths) has only
whole-number ticks; the experience graph's rows are at least 14 px apart.
Usage: check_dom.py DOM.html   (exit 1 naming the first chart that breaks a rule)"""
import sys
from html.parser import HTMLParser


class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts = []  # {id, whole_x, ticks, legend_inside, rows}
        self.legends = 0
        self.depth = 0  # svg nesting inside a chart
        self.in_tick = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "")
        if tag == "svg" and "data-chart" in a:
            self.charts.append({"id": a["data-chart"], "whole_x": a.get("data-whole-x") == "1", "ticks": [],
                                "legend_inside": 0, "rows": set()})
            self.depth = 1
        elif tag == "svg" and self.depth:
            self.depth += 1
        if tag == "figcaption" and "legend" in cls:
            self.legends += 1
        if self.depth:
            c = self.charts[-1]
            if cls in ("leg", "legend") or tag == "figcaption":
                c["legend_inside"] += 1
            self.in_tick = tag == "text" and cls == "tick" and a.get("text-anchor") == "middle"
            if tag == "circle" and c["id"].startswith("forest-"):
                c["rows"].add(round(float(a.get("cy", "0")), 1))

    def handle_endtag(self, tag):
        if tag == "svg" and self.depth:
            self.depth -= 1
        self.in_tick = False

    def handle_data(self, data):
        if self.in_tick and self.depth:
            self.charts[-1]["ticks"].append(data.strip())


def main():
    p = Charts()
    p.feed(open(sys.argv[1], encoding="utf-8").read())
    if not p.charts:
        print("FAIL: no charts in the page")
        return 1
    for c in p.charts:
        if c["legend_inside"]:
            print(f"FAIL: chart {c['id']} draws its legend inside the plot")
            return 1
        if c["whole_x"]:
            bad = [t for t in c["ticks"] if not t.lstrip("-").isdigit()]
            if bad or not c["ticks"]:
                print(f"FAIL: chart {c['id']} counts whole steps but has ticks {c['ticks']}")
                return 1
        rows = sorted(c["rows"])
        if len(rows) > 1 and min(b - a for a, b in zip(rows, rows[1:])) < 14:
            print(f"FAIL: chart {c['id']} has rows closer than 14 px")
            return 1
    whole = [c["id"] for c in p.charts if c["whole_x"]]
    print(f"layout: {len(p.charts)} charts, {p.legends} legends under them, whole-step axes: {', '.join(whole)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
