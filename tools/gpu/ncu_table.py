#!/usr/bin/env python3
"""Condenses `ncu --print-summary per-kernel` output (metrics gpu__time_duration.sum and
dram__bytes_read.sum) into a markdown table, largest total device time first: where a run's time
goes, kernel by kernel. Reads stdin, writes stdout. Used by tools/gpu/run.sh."""
import re
import sys

TIME = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
HEADER = re.compile(r"^\s{2}(\S.*?)\s+\((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\).*?"
                    r"(?:Invocations (\d+))?\s*$")


def short(name):
    name = re.sub(r"\(.*", "", name)  # parameters
    return name.split("::")[-1][:48]


def main():
    rows, cur = [], None
    for line in sys.stdin:
        m = HEADER.match(line)
        if m:
            grid = "x".join(m.group(i) for i in (2, 3, 4))
            block = m.group(5)
            cur = {"name": short(m.group(1)), "launch": f"{grid} / {block}",
                   "calls": int(m.group(8) or 1), "us": None, "bytes": None}
            rows.append(cur)
            continue
        parts = line.split()
        if cur is None or len(parts) < 5:
            continue
        if parts[0] == "gpu__time_duration.sum" and parts[1] in TIME:
            cur["us"] = float(parts[4].replace(",", "")) * TIME[parts[1]]
        elif parts[0] == "dram__bytes_read.sum" and parts[1] in BYTES:
            cur["bytes"] = float(parts[4].replace(",", "")) * BYTES[parts[1]]
    rows = [r for r in rows if r["us"] is not None]
    total = sum(r["us"] * r["calls"] for r in rows) or 1.0
    rows.sort(key=lambda r: -r["us"] * r["calls"])
    print("| kernel | grid / block | calls | mean µs | total µs | share | MB read (mean) | GB/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows[:40]:
        mb = (r["bytes"] or 0.0) / 1e6
        gbs = (r["bytes"] or 0.0) / (r["us"] * 1e3) if r["us"] > 0 else 0.0
        print(f"| {r['name']} | {r['launch']} | {r['calls']} | {r['us']:.1f} | "
              f"{r['us'] * r['calls']:.0f} | {100 * r['us'] * r['calls'] / total:.1f}% | "
              f"{mb:.2f} | {gbs:.0f} |")
    print(f"\n{len(rows)} kernel signatures, {total:.0f} µs of device time in all")


if __name__ == "__main__":
    main()
