# SPDX-License-Identifier: Apache-2.0
"""Debian's python3-numba, unmodified, inside fractions made with `gpufrac run`
over gpusim: the shared script tests/gpu/numba_probe.py (which tests/gpu/run.sh
also runs on a real driver), and a bursting numba process evicted by gpufracd
with its reason. Skips (77) only where numba is not installed.

numba 0.56 looks up "<name>_v2" before "<name>": on a CUDA 13.0 driver it finds
cuCtxGetDevice_v2 and cuCtxSynchronize_v2, which take a context it does not
pass, so it runs on gpusim's 12.8 build (lib/gpusim-cuda12), as on a 12.x
driver."""
import json
import os
import re
import subprocess
import sys

import cases

sys.path.insert(0, os.path.dirname(__file__))
from harness import BUILD, GPUFRAC, PROBE, Gi, Mi, SimTestCase, kv  # noqa: E402

SCRIPT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gpu", "numba_probe.py"))
GPUSIM12 = os.path.join(BUILD, "lib", "gpusim-cuda12")
AGENT = os.path.join(BUILD, "bin", "gpufracd")


def numba_python():
    """An interpreter that imports Debian's numba.cuda (this one, else Debian's)."""
    for py in (sys.executable, "/usr/bin/python3"):
        r = subprocess.run([py, "-c", "import numba.cuda, numpy"], capture_output=True)
        if r.returncode == 0:
            return py
    return None


PY = numba_python()


class NumbaTestCase(SimTestCase):
    gpusim_dir = GPUSIM12

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state
        self.env["NUMBA_CUDA_DRIVER"] = os.path.join(GPUSIM12, "libcuda.so.1")

    def run_cli(self, *args, timeout=300):
        return subprocess.run([GPUFRAC, *[str(a) for a in args]], env=self.env,
                              capture_output=True, text=True, timeout=timeout)


class WorkloadsTest(NumbaTestCase):
    devices = "4Gi"

    def test_numba_sees_the_fraction_round_trips_and_is_refused_past_it(self):
        r = self.run_cli("run", "--memory", "1Gi", "--", PY, SCRIPT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = kv(r.stdout)
        uuid = subprocess.run([GPUFRAC, "status", "--json"], env=self.env, capture_output=True,
                              text=True, check=True)
        self.assertIn(out["detect_uuid"], uuid.stdout)  # the fraction's GPU, as numba names it
        self.assertEqual(int(out["mem_get_info_total"]), 1 * Gi)
        self.assertEqual(int(out["mem_get_info_free"]), 1 * Gi)
        self.assertEqual(out["driver_api_missing"], "none")
        self.assertEqual(int(out["driver_api_bound"]), 75)
        self.assertEqual(out["roundtrip"], "exact")
        self.assertEqual(out["retry_after_flush"], "ok")
        self.assertEqual(out["oom_error"], "[2] Call to cuMemAlloc results in "
                         "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(int(out["oom_reached_bytes"]), 1 * Gi)
        # two numba processes of one fraction: the second sees the first's 512 MiB
        self.assertEqual(int(out["share_child_free"]), 512 * Mi)
        self.assertEqual(out["share_child_over"], "CUDA_ERROR_OUT_OF_MEMORY")
        # IPC: the exporter's 128 MiB counted once, the import adds nothing
        self.assertEqual(out["ipc_child_data"], "exact")
        self.assertEqual(out["ipc_shared_bytes"], "same")
        self.assertEqual(int(out["ipc_child_free_before"]), int(out["ipc_child_free_after"]))
        self.assertEqual(int(out["ipc_child_free_before"]), 1 * Gi - 128 * Mi)
        self.assertEqual(self.driver()["dev0_peak"], 1 * Gi, "never past the limit on the GPU")


class BurstTest(NumbaTestCase):
    devices = "4Gi"

    def setUp(self):
        super().setUp()
        self.agent_log = open(os.path.join(self.tmp, "agent.log"), "w")
        self.agent = subprocess.Popen([AGENT, "--state-dir", self.state, "--metrics-listen",
                                       "127.0.0.1:0", "--watchdog-period-ms", "100"],
                                      env=self.env, stdout=self.agent_log,
                                      stderr=subprocess.STDOUT)
        self.wait_for(lambda: "ready:" in open(self.agent_log.name).read(), "the agent")

    def tearDown(self):
        self.agent.terminate()
        self.agent.wait(timeout=30)
        self.agent_log.close()
        super().tearDown()

    def status(self):
        r = subprocess.run([GPUFRAC, "status", "--json"], env=self.env, capture_output=True,
                           text=True, check=True)
        return {f["name"]: f for f in json.loads(r.stdout)["fractions"]}

    def test_a_bursting_numba_process_is_evicted_with_its_reason(self):
        out = open(os.path.join(self.tmp, "borrower.out"), "w")
        borrower = subprocess.Popen(
            [GPUFRAC, "run", "--name", "borrower", "--memory", "1Gi", "--limit", "3Gi", "--", PY,
             SCRIPT, "hold", str(2560 * Mi)], env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(borrower)
        burst = self.wait_for(lambda: self.status().get("borrower", {}).get("burst"), "a loan",
                              seconds=120)
        self.assertEqual(burst, 1536 * Mi)
        r = self.run_cli("run", "--name", "owner", "--memory", "2Gi", "--", PROBE, "alloc",
                         "1900Mi", "freeall")
        self.assertIn("alloc=ok", r.stdout, r.stderr)
        borrower.wait(timeout=60)
        out.close()
        text = open(out.name).read()
        self.assertIn("holding=%d" % (2560 * Mi), text)
        self.assertEqual(borrower.returncode, 75, text)
        self.assertRegex(text, r"gpufrac run: pid \d+ evicted by gpufracd: its loan of 1\.50 GiB "
                         r"above --memory on GPU 0 was taken back for fraction \"owner\"")
        events = open(os.path.join(self.state, "events.log")).read()
        self.assertTrue(re.search(r"reclaim: terminated pid \d+", events), events)


if __name__ == "__main__":
    if PY is None:
        print("SKIP: python3-numba is not installed (scripts/deps.sh all installs it)")
        sys.exit(77)
    cases.main()
