# SPDX-License-Identifier: Apache-2.0
"""The one runner of the Python suites: unittest's, with skips reported.

A case that skips never counts as a pass: after the run every skipped case
is listed with its reason, and a suite with any skipped case exits 77, which
CTest reports as "Skipped" (not "Passed") even when its other cases passed.
A failure still exits 1. Every suite ends with `cases.main(...)` where it
would call unittest.main; CTest puts this directory on PYTHONPATH.
"""
import sys
import unittest

SKIPPED = 77


def main(**kwargs):
    kwargs.setdefault("verbosity", 2)
    prog = unittest.main(exit=False, **kwargs)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        ran = result.testsRun - len(result.skipped)
        print("\n%d of %d cases skipped (the suite reports as skipped, not passed; "
              "%d passed):" % (len(result.skipped), result.testsRun, ran), file=sys.stderr)
        for case, reason in result.skipped:
            print("  SKIPPED %s: %s" % (case.id(), reason), file=sys.stderr)
        sys.exit(SKIPPED)
    if result.testsRun == 0:
        print("no cases ran", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
