#!/usr/bin/env python3
"""Counts test cases in meson's JUnit files and prints the closing 'N passed, N failed' line.

Usage: junit_summary.py [--case NAME=pass|fail ...] [--meson-json testlog.json ...]
                        testlog.junit.xml [...]
--case adds a check run outside meson (a fuzzer, a build step). --meson-json reads meson's own
per-process results: a test binary that passed every case but then died (a sanitizer report at
exit, a crash) is absent from the JUnit cases, so each such process counts as one failure.
Exit status 1 when a file is missing or empty
(a suite that could not run counts as failed, never as silently skipped).
"""
import json
import sys
import xml.etree.ElementTree as ET

passed = failed = 0
args, paths = sys.argv[1:], []
while args:
    a = args.pop(0)
    if a == "--meson-json":
        path = args.pop(0)
        try:
            lines = [l for l in open(path) if l.strip()]
        except OSError as e:
            lines = []
            print(f"junit_summary: {path}: {e}", file=sys.stderr)
        if not lines:
            failed += 1
            print(f"FAILED: {path} has no test results", file=sys.stderr)
        for line in lines:
            t = json.loads(line)
            if t.get("result") not in ("OK", "EXPECTEDFAIL"):
                failed += 1
                print(f"FAILED: {t.get('name')} (process: {t.get('result')}, "
                      f"exit {t.get('returncode')})", file=sys.stderr)
    elif a == "--case":
        name, _, outcome = args.pop(0).partition("=")
        if outcome == "pass":
            passed += 1
        else:
            failed += 1
            print(f"FAILED: {name}", file=sys.stderr)
    else:
        paths.append(a)
for path in paths:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"junit_summary: {path}: {e}", file=sys.stderr)
        failed += 1
        continue
    cases = list(root.iter("testcase"))
    if not cases:
        print(f"junit_summary: {path}: no test cases", file=sys.stderr)
        failed += 1
    for c in cases:
        if c.find("failure") is not None or c.find("error") is not None:
            failed += 1
            print(f"FAILED: {c.get('classname')}.{c.get('name')}", file=sys.stderr)
        elif c.find("skipped") is not None:
            failed += 1  # a test that cannot run fails (DEVELOPERS.md)
            print(f"SKIPPED (counted as failed): {c.get('classname')}.{c.get('name')}", file=sys.stderr)
        else:
            passed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
