# SPDX-License-Identifier: Apache-2.0
"""<state>/events.log is bounded and rotated, and a flood of lines of one kind
is rate-limited: 200 fraction directories with a broken config make the agent
log "ignoring ..." for each of them at every scan (10 scans a second here);
with --events-max-bytes 4096, events.log never passes 4096 bytes, events.log.1
appears (the one old file kept, itself within the bound), and a "similar lines
suppressed" line counts what was dropped."""
import os
import re
import sys
import time

import cases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_agent import AgentTestCase  # noqa: E402

BOUND = 4096
BROKEN = 200


class EventsTest(AgentTestCase):
    extra_args = ["--events-max-bytes", str(BOUND)]

    def size(self, name):
        try:
            return os.stat(os.path.join(self.state, name)).st_size
        except FileNotFoundError:
            return 0

    def text(self, name):
        try:
            with open(os.path.join(self.state, name)) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def break_fractions(self):
        for i in range(BROKEN):
            d = os.path.join(self.state, "fractions", "broken%03d" % i)
            os.makedirs(d)
            with open(os.path.join(d, "config"), "w") as f:
                f.write("this is not a fraction config\n")

    def test_flood_is_bounded_rotated_and_counted(self):
        self.break_fractions()
        largest = 0
        seen = {"rotated": False, "noted": False}

        def done():
            nonlocal largest
            largest = max(largest, self.size("events.log"))
            self.assertLessEqual(self.size("events.log"), BOUND)
            self.assertLessEqual(self.size("events.log.1"), BOUND)
            seen["rotated"] = seen["rotated"] or os.path.exists(
                os.path.join(self.state, "events.log.1"))
            both = self.text("events.log.1") + self.text("events.log")
            seen["noted"] = seen["noted"] or bool(
                re.search(r" [1-9]\d* similar lines suppressed .*\"ignoring ", both))
            return seen["rotated"] and seen["noted"]
        t = time.monotonic()
        self.wait_for(done, "events.log to rotate and a suppression line")
        self.assertIn("ignoring ", self.text("events.log.1"))
        noted = re.findall(r" (\d+) similar lines suppressed ",
                           self.text("events.log.1") + self.text("events.log"))
        print("\nevents: rotated and noted after %.1f s; events.log at most %d bytes seen; "
              "suppressed counts %s" % (time.monotonic() - t, largest, noted[:5]), flush=True)
        self.assertIsNone(self.agent.poll())
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))

    def test_rotation_does_not_follow_a_link_at_the_old_name(self):
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("root's file\n")
        old = os.path.join(self.state, "events.log.1")
        os.symlink(victim, old)
        self.break_fractions()
        self.wait_for(lambda: not os.path.islink(old), "events.log to rotate over the link")
        with open(victim) as f:
            self.assertEqual(f.read(), "root's file\n")


if __name__ == "__main__":
    cases.main(verbosity=2)
