# SPDX-License-Identifier: Apache-2.0
"""A tenant in one fraction against the driver entry points real clients use
(copies, host memory, pointer queries, IPC), over gpusim: another fraction's
IPC handle, forged handles (one naming a FIFO another process holds, which
must never be opened), bogus pointers, huge and overlapping host
registrations. Each is refused or, for the other fraction's own handle, charged
to nobody but its exporter; nothing crashes, and the fractions' counts and the
device's stay exact."""
import json
import os
import subprocess
import sys

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import GPUFRAC, PROBE, Gi, Mi, SimTestCase, kv  # noqa: E402

TENANT = os.path.join(HERE, "driver_tenant.py")


class DriverApiAttackTest(SimTestCase):
    devices = "4Gi"

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state

    def used(self):
        r = subprocess.run([GPUFRAC, "status", "--json"], env=self.env, capture_output=True,
                           text=True, check=True)
        return {f["name"]: f["used"] for f in json.loads(r.stdout)["fractions"]}

    def test_ipc_pointers_and_host_memory_from_another_fraction(self):
        handle, release = os.path.join(self.tmp, "handle"), os.path.join(self.tmp, "release")
        out = open(os.path.join(self.tmp, "exporter.out"), "w")
        exporter = subprocess.Popen(
            [GPUFRAC, "run", "--name", "exporter", "--memory", "1Gi", "--", sys.executable,
             TENANT, "export", str(256 * Mi), handle, release],
            env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(exporter)
        self.wait_for(lambda: os.path.exists(handle), "the export", seconds=60)
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        held = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a FIFO this process holds
        try:
            r = subprocess.run(
                [GPUFRAC, "run", "--name", "attacker", "--memory", "1Gi", "--", sys.executable,
                 TENANT, "attack", handle, str(os.getpid()), str(held),
                 str(os.fstat(held).st_ino)], env=self.env, capture_output=True, text=True,
                timeout=120)
        finally:
            os.close(held)
        got = kv(r.stdout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(got["other_fraction_open"], "ok")
        self.assertEqual(int(got["charged_by_open"]), 0, "the importer is never charged")
        for k in ("forged_bytes", "fifo_handle", "random_handle", "own_pid_handle",
                  "close_bogus", "bogus_pointers", "host_memory"):
            self.assertEqual(got[k], "refused", k)
        self.assertEqual(int(got["attacker_used_before"]), 0)
        self.assertEqual(int(got["attacker_used_after"]), 0)
        # the exporter, alive, is charged once; the device holds exactly that
        self.assertEqual(self.used().get("exporter"), 256 * Mi)
        self.assertEqual(self.driver()["dev0_used"], 256 * Mi)
        open(release, "w").close()
        exporter.wait(timeout=60)
        out.close()
        text = open(out.name).read()
        self.assertEqual(exporter.returncode, 0, text)
        self.assertIn("exporter_bytes=intact", text)
        self.assertEqual(int(kv(text)["exporter_used"]), 256 * Mi)


class SwitchAttackTest(SimTestCase):
    """A tenant that switches contexts and pools every wrong way it can (pops
    past the bottom of its stack, a null context, a context destroyed while
    current, another device's pool made current, pools set and destroyed, then
    more than the limit) to make the
    shim's cached current device or pool name the wrong one: each device's
    charge must stay the driver's own figure, and the limit hold."""
    devices = "4Gi,4Gi"

    def test_context_and_pool_switches_cannot_shift_charges(self):
        self.make_fraction(limit=1 * Gi)
        steps = ["retain", "0", "alloc", "64Mi", "ctx-pop", "ctx-pop", "alloc", "32Mi",
                 "set-current", "0", "alloc", "8Mi",
                 "retain", "1", "alloc", "64Mi", "ctx-push", "0", "ctx-pop", "alloc", "4Mi",
                 "ctx-create", "0", "free", "alloc", "2Mi",
                 "set-pool", "async", "16Mi", "set-pool-default",
                 "async", "8Mi", "pool-destroy", "async", "4Mi", "alloc", "1000Mi",
                 "hold", "60"]
        p, out = self.probe_lines(*steps)
        held = kv("".join(out))
        self.assertIn("holding", held, "".join(out))
        self.assertEqual(held["alloc"], "CUDA_ERROR_OUT_OF_MEMORY", "the last is over the limit")
        d, drv = self.dump(), self.driver()
        self.assertEqual((d["dev0_used"], d["dev1_used"]), (drv["dev0_used"], drv["dev1_used"]),
                         "".join(out))
        self.assertLessEqual(drv["dev0_peak"], 1 * Gi)
        self.assertLessEqual(drv["dev1_peak"], 1 * Gi)
        self.kill(p)


if __name__ == "__main__":
    cases.main()
