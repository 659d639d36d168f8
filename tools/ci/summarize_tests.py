#!/usr/bin/env python3
"""Counts test cases from a `bazel test` run and prints 'N passed, N failed'.

Usage: summarize_tests.py BAZEL_OUTPUT_LOG BAZEL_TESTLOGS_DIR

Targets come from Bazel's per-target summary lines in the log (so stale
results of earlier runs are never counted). For each executed target, the
test cases in its test.xml are counted (a gtest binary contributes one per
TEST; GTEST_SKIP cases count as skipped). A target that failed without
usable XML (crash, timeout, build failure) counts as one failure.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

LINE = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|"
                  r"FAILED TO BUILD|SKIPPED|INCOMPLETE)\b")


def count_xml(path):
    """Returns (passed, failed, skipped) for one test.xml, or None."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    passed = failed = skipped = 0
    cases = list(root.iter("testcase"))
    if not cases:
        return None
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun" \
                or case.get("result") == "skipped":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main():
    log_path, testlogs = sys.argv[1], sys.argv[2]
    targets = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                targets[m.group(1)] = m.group(2)
    passed = failed = skipped = 0
    for target, status in sorted(targets.items()):
        if status == "SKIPPED":
            skipped += 1
            continue
        if status in ("FAILED TO BUILD", "NO STATUS", "INCOMPLETE"):
            failed += 1
            print(f"  {target}: {status}", file=sys.stderr)
            continue
        rel = target[2:].replace(":", "/")
        counts = count_xml(os.path.join(testlogs, rel, "test.xml"))
        target_ok = status in ("PASSED", "FLAKY")
        if counts is None:
            counts = (1, 0, 0) if target_ok else (0, 1, 0)
        p, fl, s = counts
        if not target_ok and fl == 0:
            fl = 1  # e.g. a crash after the last test case, or a timeout
        passed += p
        failed += fl
        skipped += s
        if fl:
            print(f"  {target}: {status}", file=sys.stderr)
    if not targets:
        print("no test targets found in the bazel output", file=sys.stderr)
        failed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
