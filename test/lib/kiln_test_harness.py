"""The check-and-report harness of the Python test drivers (kiln-run-test.py
and the others under test/runtime): checks record failures instead of
stopping, so one run reports every broken behaviour."""

import os


class Checks:
    """Failures recorded so far, and the scratch directory."""

    def __init__(self, work_dir):
        self.work = work_dir
        self.failures = []

    def path(self, name):
        return os.path.join(self.work, name)

    def check(self, condition, what):
        if not condition:
            self.failures.append(what)
            print(f"FAIL: {what}")


def run_tests(checks, tests, suite):
    """Runs each test(checks), printing PASS or FAIL per test; returns the
    process exit status."""
    for test in tests:
        before = len(checks.failures)
        test(checks)
        print(f"{'PASS' if len(checks.failures) == before else 'FAIL'}: "
              f"{test.__name__}")
    return report(checks, f"all {len(tests)} {suite} passed")


def report(checks, success):
    """The exit status of a run: 1 with the count of failed checks, else 0
    with `success`."""
    if checks.failures:
        print(f"{len(checks.failures)} checks failed")
        return 1
    print(success)
    return 0
