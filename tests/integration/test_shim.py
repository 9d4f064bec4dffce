# SPDX-License-Identifier: Apache-2.0
"""libgpufrac over gpusim: what a fractional process sees, what is charged,
and that the limit holds across processes, threads and deaths."""
import os
import shutil
import subprocess
import sys
import time
import unittest

import cases

sys.path.insert(0, os.path.dirname(__file__))
from harness import LEDGERTOOL, PROBE, Gi, Mi, SHIM, SimTestCase, kv  # noqa: E402

VIAS = ("direct", "dlsym", "procaddr", "procaddr4")


class InfoTest(SimTestCase):
    def test_every_lookup_path_sees_the_limit(self):
        self.make_fraction(limit=1 * Gi)
        for via in VIAS:
            with self.subTest(via=via):
                out = kv(self.probe("info", "totalmem", "resolved", via=via).stdout)
                self.assertEqual(out["info"], "CUDA_SUCCESS")
                self.assertEqual(int(out["total"]), 1 * Gi)
                self.assertEqual(int(out["free"]), 1 * Gi)
                self.assertEqual(int(out["devtotal"]), 1 * Gi)
                self.assertEqual(out["info_null"], "CUDA_SUCCESS")
                self.assertGreater(int(out["resolved"]), 0)
                self.assertEqual(out["hooked"], out["resolved"], "some entry point escaped")

    def test_without_shim_the_whole_device_shows(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("info", "totalmem", "resolved", shim=False).stdout)
        self.assertEqual(int(out["total"]), 4 * Gi)
        self.assertEqual(int(out["devtotal"]), 4 * Gi)
        self.assertEqual(out["hooked"], "0")

    def test_legacy_32bit_entry_points(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("legacy-info", "totalmem", "legacy-alloc", "100Mi",
                            "legacy-info").stdout)
        self.assertEqual(int(out["legacy_total"]), 1 * Gi)
        self.assertEqual(int(out["legacy_devtotal"]), 1 * Gi)
        self.assertEqual(out["legacy-alloc"], "ok")
        self.assertEqual(int(out["legacy_free"]), 1 * Gi - 100 * Mi)

    def test_nvml_reports_the_fraction(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("alloc", "256Mi", "nvml").stdout)
        self.assertEqual(int(out["nvml_total"]), 1 * Gi)
        self.assertEqual(int(out["nvml_free"]), 768 * Mi)
        self.assertEqual(int(out["nvml_used"]), 256 * Mi)
        self.assertEqual(int(out["nvml2_total"]), 1 * Gi)
        self.assertEqual(int(out["nvml2_free"]), 768 * Mi)

    def test_free_is_capped_by_physical_free(self):
        self.make_fraction(limit=3 * Gi)
        # a neighbour outside the fraction holds 2 GiB of the 4 GiB device
        _, held = self.probe_bg("alloc", "2Gi", "hold", "30", env=dict(self.env))
        self.assertEqual(held["alloc"], "ok")
        out = kv(self.probe("info").stdout)
        self.assertEqual(int(out["total"]), 3 * Gi)
        self.assertEqual(int(out["free"]), 2 * Gi)


class ChargeTest(SimTestCase):
    def free_after(self, *steps):
        out = self.probe(*steps, "info").stdout
        return kv(out), int(kv(out)["free"])

    def assert_charged_then_returned(self, steps, at_least):
        self.make_fraction(limit=2 * Gi)
        out = self.probe(*steps, "info", "freeall", "sync", "trim", "graph-trim",
                         "info").stdout
        frees = [int(line.split("=")[1]) for line in out.splitlines()
                 if line.startswith("free=")]
        self.assertEqual(len(frees), 2, out)
        self.assertLessEqual(frees[0], 2 * Gi - at_least, out)
        self.assertEqual(frees[1], 2 * Gi, out)
        d = self.dump()
        self.assertEqual(d["dev0_used"], 0)
        self.assertEqual(d["slot_bytes"], 0)

    def test_plain(self):
        self.assert_charged_then_returned(["alloc", "300Mi"], 300 * Mi)

    def test_freed_by_another_thread(self):
        # more pointers than fit their direct-mapped slots without a collision
        # (some land in the table behind them): all found by another thread
        self.make_fraction(limit=2 * Gi)
        steps = ["alloc", "4Mi"] * 300
        out = self.probe(*steps, "info", "freeall-thread", "info").stdout
        self.assertEqual(out.count("freed=ok"), 300, out)
        frees = [int(line.split("=")[1]) for line in out.splitlines()
                 if line.startswith("free=")]
        self.assertEqual(frees, [2 * Gi - 300 * 4 * Mi, 2 * Gi], out)
        d = self.dump()
        self.assertEqual(d["dev0_used"], 0)
        self.assertEqual(d["slot_bytes"], 0)

    def test_managed(self):
        self.assert_charged_then_returned(["managed", "300Mi"], 300 * Mi)

    def test_pitch_charges_the_real_pitch(self):
        self.make_fraction(limit=2 * Gi)
        out = kv(self.probe("pitch", "1000", "1000", "info").stdout)
        self.assertEqual(out["pitch"], "ok")
        pitch = int(out["pitch_bytes"])
        self.assertGreater(pitch, 1000)
        self.assertEqual(int(out["free"]), 2 * Gi - pitch * 1000)

    def test_pitch_returned(self):
        self.assert_charged_then_returned(["pitch", "4096", "4096"], 4096 * 4096)

    def test_async_default_pool(self):
        self.assert_charged_then_returned(["async", "300Mi"], 300 * Mi)

    def test_async_own_pool(self):
        self.assert_charged_then_returned(["pool-async", "300Mi"], 300 * Mi)

    def test_async_follows_the_current_pool(self):
        # the shim caches each thread's current pool: setting another (either
        # way) must move it, or the new pool's growth would go uncharged (no
        # memory query in between: its resync from NVML would cover that up)
        ways = {"cuDeviceSetMemPool": ["async", "100Mi", "set-pool", "async", "200Mi"],
                "cuMemSetMemPool": ["set-pool", "async", "200Mi", "set-pool-default", "async",
                                    "100Mi"]}
        for way, steps in ways.items():
            with self.subTest(way=way):
                self.env["GPUSIM_STATE"] = os.path.join(self.tmp, "gpusim.state." + way)
                self.make_fraction(limit=2 * Gi, name=way)
                p, held = self.probe_bg(*steps, "hold", "60")
                self.assertEqual(held.get("set-pool-default", "ok"), "ok")
                self.assertEqual(held["set-pool"], "ok")
                d, drv = self.dump(), self.driver()
                self.assertGreaterEqual(d["dev0_used"], 300 * Mi)
                self.assertEqual(d["dev0_used"], drv["dev0_used"])
                self.kill(p)

    def test_a_shrunk_pool_does_not_refuse_another_pools_rounding(self):
        # a pool that shrank at a synchronisation stays charged until a
        # true-up; an allocation whose rounding (2 MiB granules) needs more
        # than it was admitted for trues the pools up before it refuses
        self.make_fraction(limit=1023 * Mi)
        out = kv(self.probe("pool-async", "4Mi", "free", "sync", "async", str(1018 * Mi + Mi // 2),
                            "info").stdout)
        self.assertEqual(out["async"], "ok")
        self.assertEqual(int(out["free"]), 3 * Mi)

    def test_async_pool_destroyed_with_live_allocations(self):
        # the driver keeps a destroyed pool's memory for its live allocations
        # until they are freed; only the unused rest of the reservation goes
        self.make_fraction(limit=2 * Gi)
        out = self.probe("pool-async", "301Mi", "info", "pool-destroy", "info", "freeall",
                         "info").stdout
        frees = [int(v.split("=")[1]) for v in out.splitlines() if v.startswith("free=")]
        self.assertEqual(frees[0], 2 * Gi - 302 * Mi, out)  # reserved in 2 MiB granules
        self.assertEqual(frees[1], 2 * Gi - 301 * Mi, out)
        self.assertEqual(frees[2], 2 * Gi, out)
        self.assertEqual(self.dump()["dev0_used"], 0)

    def test_many_pools_stay_charged(self):
        self.make_fraction(limit=3 * Gi)
        p, held = self.probe_bg("pools", "600", "2Mi", "info", "hold", "60")
        self.assertEqual(held["pools_ok"], "600")
        self.assertEqual(int(held["free"]), 3 * Gi - 1200 * Mi)
        self.assertEqual(self.dump()["dev0_used"], self.driver()["dev0_used"])
        self.kill(p)
        out = self.probe("pools", "600", "2Mi", "pools-destroy", "info", "freeall", "info").stdout
        frees = [int(v.split("=")[1]) for v in out.splitlines() if v.startswith("free=")]
        self.assertIn("pools_destroyed=600", out)
        self.assertEqual(frees, [3 * Gi - 1200 * Mi, 3 * Gi], out)

    def test_over_limit_pool_growth_in_many_pools(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("pools", "600", "2Mi", "info").stdout)
        self.assertEqual(out["pools_ok"], "512")
        self.assertEqual(int(out["free"]), 0)
        self.assertLessEqual(self.dump()["dev0_peak"], 1 * Gi)

    def test_async_over_limit(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("async", "600Mi", "async", "600Mi", "info").stdout)
        self.assertEqual(out["async"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertGreaterEqual(int(out["free"]), 1 * Gi - 602 * Mi)

    def test_vmm(self):
        self.assert_charged_then_returned(["vmm", "256Mi"], 256 * Mi)

    def test_arrays(self):
        self.assert_charged_then_returned(["array", "4096", "4096"], 4096 * 4096 * 16)

    def test_array3d(self):
        self.assert_charged_then_returned(["array3d", "512", "512", "64"], 512 * 512 * 64 * 16)

    def test_mipmapped_array(self):
        self.assert_charged_then_returned(["mipmap", "4096", "4096", "4"], 4096 * 4096 * 16)

    def test_graph_memory_nodes(self):
        self.assert_charged_then_returned(["graph", "300Mi"], 300 * Mi)

    def test_graph_upload(self):
        self.assert_charged_then_returned(["graph-upload", "300Mi"], 300 * Mi)

    def test_graph_over_limit_does_not_launch(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("alloc", "800Mi", "graph", "300Mi", "info").stdout)
        self.assertEqual(out["graph"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(int(out["free"]), 224 * Mi)

    def test_over_limit_fails_and_charges_nothing(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("alloc", "700Mi", "alloc", "400Mi", "info").stdout)
        self.assertEqual(out["alloc"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(int(out["free"]), 324 * Mi)
        d = self.dump()
        self.assertEqual(d["dev0_denied"], 1)
        self.assertLessEqual(d["dev0_peak"], 1 * Gi)
        for steps in (["vmm", "2Gi"], ["array", "16384", "8192"], ["pitch", "32768", "40000"],
                      ["managed", "2Gi"], ["legacy-alloc", "2000000000"]):
            with self.subTest(steps=steps):
                out = kv(self.probe(*steps, "info").stdout)
                self.assertEqual(out[steps[0]], "CUDA_ERROR_OUT_OF_MEMORY", out)
                self.assertEqual(int(out["free"]), 1 * Gi)

    def test_driver_refusal_returns_the_reservation(self):
        self.make_fraction(limit=1 * Gi)
        env = self.shim_env(GPUSIM_FAIL="cuMemAlloc_v2:1:999")
        out = kv(self.probe("alloc", "100Mi", "info", env=env).stdout)
        self.assertEqual(out["alloc"], "CUDA_ERROR_UNKNOWN")
        self.assertEqual(int(out["free"]), 1 * Gi)
        self.assertEqual(self.dump()["dev0_used"], 0)

    def test_free_of_unknown_pointer_reaches_driver(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("free-unknown").stdout)
        self.assertEqual(out["free-unknown"], "CUDA_ERROR_INVALID_VALUE")


class CrossProcessTest(SimTestCase):
    devices = "16Gi"

    def test_forked_child_is_charged_in_its_own_slot(self):
        # the hot path writes the process's slot through a pointer: a fork
        # child must write its own, or its death would leave its bytes counted
        self.make_fraction(limit=1 * Gi)
        p, held = self.probe_bg("alloc", "100Mi", "fork-alloc", "200Mi", "hold", "60")
        self.assertEqual(held["fork-alloc"], "ok")
        self.assertEqual(self.dump()["dev0_used"], 300 * Mi)
        out = kv(subprocess.run([LEDGERTOOL, "reclaim", self.ledger], capture_output=True,
                                text=True, check=True).stdout)
        self.assertEqual(out["reclaimed"], "1")
        self.assertEqual(self.dump()["dev0_used"], 100 * Mi)
        self.kill(p)

    def test_two_processes_share_one_limit(self):
        self.make_fraction(limit=1 * Gi)
        p, held = self.probe_bg("alloc", "600Mi", "hold", "30")
        self.assertEqual(held["alloc"], "ok")
        out = kv(self.probe("info", "alloc", "600Mi", "alloc", "300Mi").stdout)
        self.assertEqual(int(out["free"]), 424 * Mi)
        self.assertEqual(out["alloc"], "ok")  # the last one: 300Mi
        self.assertIn("alloc=CUDA_ERROR_OUT_OF_MEMORY", self.probe(
            "alloc", "600Mi").stdout)

    def test_sigkilled_process_usage_is_reclaimed(self):
        self.make_fraction(limit=1 * Gi)
        p, held = self.probe_bg("alloc", "800Mi", "hold", "60")
        self.assertEqual(self.dump()["dev0_used"], 800 * Mi)
        self.kill(p)
        # the next allocation that needs the memory gets it back at once
        out = kv(self.probe("alloc", "900Mi", "info", "freeall").stdout)
        self.assertEqual(out["alloc"], "ok")
        d = self.dump()
        self.assertEqual(d["dev0_reclaimed"], 800 * Mi)
        self.assertEqual(d["dev0_used"], 0)

    def test_reclaim_without_pressure(self):
        self.make_fraction(limit=1 * Gi)
        p, _ = self.probe_bg("alloc", "100Mi", "hold", "60")
        self.kill(p)
        out = kv(subprocess.run([LEDGERTOOL, "reclaim", self.ledger], capture_output=True,
                                text=True, check=True).stdout)
        self.assertEqual(out["reclaimed"], "1")
        self.assertEqual(self.dump()["dev0_used"], 0)

    def test_a_refused_pool_growth_stays_counted_until_it_is_given_back(self):
        # A's 1 MiB fits the ledger exactly, but its pool grows by a 2 MiB
        # granule: refused, and the memory goes back by a stream-ordered free
        # (held here, as one that has not run yet). Until then the driver
        # still holds it, so B of the same fraction must not get that room.
        self.make_fraction(limit=1 * Gi)
        hold = os.path.join(self.tmp, "free-hold")
        out = os.path.join(self.tmp, "a.out")
        with open(out, "w") as f:
            a = subprocess.Popen([PROBE, "alloc", "1023Mi", "async", "1Mi", "hold", "60"],
                                 env=self.shim_env(GPUSIM_FREE_ASYNC_HOLD=hold), stdout=f,
                                 stderr=subprocess.STDOUT, text=True)
        self.procs.append(a)
        self.wait_for(lambda: os.path.exists(hold + ".reached"), "A's refused growth to be freed")
        self.assertEqual(self.dump()["dev0_used"], 1 * Gi, "the admission stays counted")
        b = kv(self.probe("alloc", "1Mi").stdout)
        self.assertEqual(b["alloc"], "CUDA_ERROR_OUT_OF_MEMORY")
        open(hold, "w").close()
        self.wait_for(lambda: "holding=" in open(out).read(), "A to finish")
        self.assertIn("async=CUDA_ERROR_OUT_OF_MEMORY", open(out).read())
        drv = self.driver()
        # past the limit only by the granule's rounding beyond the admission
        self.assertLessEqual(drv["dev0_peak"], 1 * Gi + 1 * Mi)
        self.assertEqual(self.dump()["dev0_used"], 1023 * Mi)  # trued up once freed
        self.assertEqual(drv["dev0_used"], 1023 * Mi)
        self.kill(a)

    def race(self, *steps):
        """8 probes running steps at once: their granted and refused counts."""
        procs = [subprocess.Popen([PROBE] + list(steps), env=self.shim_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(8)]
        ok = refused = 0
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
            o = kv(out)
            ok += int(o["race_ok"])
            refused += int(o["race_refused"])
        return ok, refused

    def test_racing_processes_never_pass_the_limit(self):
        self.make_fraction(limit=1 * Gi)
        ok, refused = self.race("race", "4", "200", "100Mi")
        d = self.dump()
        self.assertEqual(ok + refused, 8 * 4 * 200)
        self.assertGreater(ok, 0)
        self.assertGreater(refused, 0, "32 threads x 100Mi on 1Gi must contend")
        self.assertLessEqual(d["dev0_peak"], 1 * Gi)
        self.assertEqual(d["dev0_used"], 0)
        self.assertEqual(d["slot_bytes"], 0)

    def test_racing_stream_ordered_processes_never_pass_the_limit(self):
        # the same race through pools that grow and shrink (a synchronisation
        # after each round): their charges move without a lock
        self.make_fraction(limit=1 * Gi)
        ok, refused = self.race("race-async", "4", "100", "100Mi", "2")
        self.assertEqual(ok + refused, 8 * 4 * 100 * 2)
        self.assertGreater(ok, 0)
        self.assertGreater(refused, 0, "32 threads x 2 x 100Mi on 1Gi must contend")
        self.assertLessEqual(self.driver()["dev0_peak"], 1 * Gi, "the driver's own measure")
        self.assertLessEqual(self.dump()["dev0_peak"], 1 * Gi)
        # what the exited processes' pools still held comes back with their slots
        subprocess.run([LEDGERTOOL, "reclaim", self.ledger], check=True, capture_output=True)
        self.assertEqual(self.dump()["dev0_used"], 0)


class FootprintTest(SimTestCase):
    """The limit bounds what the driver attributes to the fraction: contexts,
    their limit reservations and modules as well as allocations."""
    devices = "16Gi"
    ctx_overhead = "64Mi"
    STACK_THREADS = 132 * 2048  # gpusim: SMs x resident threads per SM

    def test_racing_processes_footprint_never_exceeds_limit(self):
        # 8 processes x 4 threads, each holding up to 4 x 64 MiB at once, into
        # 4 GiB: without the contexts counted the device would hold 4608 MiB.
        # A first process measures the fraction's context overhead on the GPU
        # (the estimate later contexts reserve before they are made).
        self.make_fraction(limit=4 * Gi)
        self.probe("info")
        subprocess.run([LEDGERTOOL, "reclaim", self.ledger], check=True, capture_output=True)
        go = os.path.join(self.tmp, "go")
        procs = [subprocess.Popen(
            [PROBE, "barrier", go, "race", "4", "60", "64Mi", "4"], env=self.shim_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
        for p in procs:  # every process has its context before the race starts
            self.assertTrue(p.stdout.readline().startswith("waiting="), "a probe did not start")
        self.assertEqual(self.dump()["dev0_overhead"], 8 * 64 * Mi)
        open(go, "w").close()
        ok = refused = 0
        for p in procs:
            out, err = p.communicate(timeout=240)
            self.assertEqual(p.returncode, 0, err)
            o = kv(out)
            ok += int(o["race_ok"])
            refused += int(o["race_refused"])
        self.assertGreater(ok, 0)
        self.assertGreater(refused, 0, "32 threads x 256 MiB on 4 GiB must contend")
        drv = self.driver()
        self.assertGreater(drv["dev0_peak"], 3 * Gi, "the race must reach the limit")
        self.assertLessEqual(drv["dev0_peak"], 4 * Gi)
        self.assertLessEqual(self.dump()["dev0_peak"], 4 * Gi)

    # -- a fraction's first context on a GPU, held mid-creation by gpusim
    CTX_LOCK = (1 << 40) + (1 << 20)  # core/ledger.h: GF_LEDGER_CTX_LOCK_BASE + device 0

    def start_held_first_context(self):
        """A process whose first context gpusim holds mid-creation (its memory
        charged by the driver, the call not returned): nothing is measured yet."""
        hold = os.path.join(self.tmp, "hold")
        a = subprocess.Popen([PROBE, "hold", "60"], env=self.shim_env(GPUSIM_CTX_HOLD=hold),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(a)
        self.wait_for(lambda: os.path.exists(hold + ".reached"), "the held context creation")
        return a, hold

    @staticmethod
    def text(path):
        with open(path) as f:
            return f.read()

    def start_racer(self, *steps):
        out = os.path.join(self.tmp, "racer.out")
        with open(out, "w") as f:
            b = subprocess.Popen([PROBE, *steps], env=self.shim_env(), stdout=f,
                                 stderr=subprocess.STDOUT, text=True)
        self.procs.append(b)
        return b, out

    def blocked_on_first_context_lock(self):
        ino = os.stat(self.ledger).st_ino
        with open("/proc/locks") as f:
            return any("->" in ln and ":%d " % ino in ln and " %d " % self.CTX_LOCK in ln
                       for ln in f)

    def test_first_context_race_never_passes_the_limit(self):
        # A's first context holds 64 MiB in the driver and is not measured yet;
        # B, of the same fraction, makes a context and asks for all the ledger
        # shows free. Unserialised B gets it and the driver holds 1 GiB + 64 MiB.
        self.make_fraction(limit=Gi)
        a, hold = self.start_held_first_context()
        b, out = self.start_racer("alloc", "960Mi", "hold", "60")
        # either B is through (the race lost) or it waits for A's creation
        self.wait_for(lambda: "holding=" in self.text(out) or
                      self.blocked_on_first_context_lock(), "B to allocate or wait")
        open(hold, "w").close()
        a_line = a.stdout.readline()  # A's context is measured (and charged or refused)
        self.assertLessEqual(self.driver()["dev0_peak"], Gi, "the driver passed the limit")
        if not a_line.startswith("holding="):
            self.fail("A: " + a.stderr.read())
        self.wait_for(lambda: "holding=" in self.text(out), "B to finish")
        self.assertIn("alloc=CUDA_ERROR_OUT_OF_MEMORY", self.text(out))
        drv, d = self.driver(), self.dump()
        self.assertLessEqual(drv["dev0_peak"], Gi)
        self.assertEqual(d["dev0_used"], drv["dev0_used"])
        self.assertEqual(d["dev0_used"], 2 * 64 * Mi)  # both contexts, counted
        self.kill(a)
        self.kill(b)

    def test_first_context_lock_dies_with_its_holder(self):
        # A dies mid-creation holding the lock: the kernel drops it and B,
        # which waited for it, makes the fraction's first measured context
        self.make_fraction(limit=Gi)
        a, hold = self.start_held_first_context()
        b, out = self.start_racer("alloc", "512Mi", "hold", "60")
        self.wait_for(self.blocked_on_first_context_lock, "B to wait for A's creation")
        self.assertNotIn("holding=", self.text(out))
        self.kill(a)
        self.wait_for(lambda: "holding=" in self.text(out), "B to go on")
        self.assertIn("alloc=ok", self.text(out))
        d = self.dump()
        self.assertEqual(d["dev0_used"], 64 * Mi + 512 * Mi)
        self.assertEqual(self.driver()["dev0_used"], d["dev0_used"])
        self.kill(b)

    # -- gpusim's peak (what the race test asserts on) and a dead process
    RECLAIM_LOCK = (1 << 40) - 1  # gpusim/gs.h: GS_LOCK_RECLAIM

    def blocked_on_gpusim_reclaim(self):
        ino = os.stat(self.env["GPUSIM_STATE"]).st_ino
        with open("/proc/locks") as f:
            return any("->" in ln and ":%d " % ino in ln and " %d " % self.RECLAIM_LOCK in ln
                       for ln in f)

    def test_driver_peak_never_counts_a_dead_process_being_reclaimed(self):
        # D dies holding 320 MiB (context + 256 MiB); Y starts returning it and
        # is held by gpusim mid-reclaim; X then makes 576 MiB. Were reclaims not
        # serialised, X's reclaim would pass over the slot Y holds and the peak
        # would count the dead 320 MiB: 896 MiB where at most 640 MiB lived.
        d, _ = self.probe_bg("alloc", "256Mi", "hold", "60", env=dict(self.env))
        self.kill(d)
        hold = os.path.join(self.tmp, "reclaim-hold")
        y = subprocess.Popen([PROBE, "hold", "60"], env=dict(self.env, GPUSIM_RECLAIM_HOLD=hold),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(y)
        self.wait_for(lambda: os.path.exists(hold + ".reached"), "Y to hold the reclaim")
        out = os.path.join(self.tmp, "x.out")
        with open(out, "w") as f:
            x = subprocess.Popen([PROBE, "alloc", "512Mi", "hold", "60"], env=dict(self.env),
                                 stdout=f, stderr=subprocess.STDOUT, text=True)
        self.procs.append(x)
        self.wait_for(lambda: "holding=" in self.text(out) or self.blocked_on_gpusim_reclaim(),
                      "X to allocate or wait for the reclaim")
        open(hold, "w").close()
        if not y.stdout.readline().startswith("holding="):
            self.fail("Y: " + y.stderr.read())
        self.wait_for(lambda: "holding=" in self.text(out), "X to allocate")
        self.assertIn("alloc=ok", self.text(out))
        drv = self.driver()
        self.assertEqual(drv["dev0_used"], 64 * Mi + 64 * Mi + 512 * Mi)
        self.assertEqual(drv["dev0_peak"], drv["dev0_used"], "the peak counted dead memory")
        self.kill(x)
        self.kill(y)

    def test_context_overhead_is_charged_as_measured(self):
        self.make_fraction(limit=2 * Gi)
        p, held = self.probe_bg("info", "ctx-create", "0", "info", "hold", "60")
        self.assertEqual(int(held["free"]), 2 * Gi - 128 * Mi)  # primary + created context
        d = self.dump()
        self.assertEqual(d["dev0_used"], 128 * Mi)
        self.assertEqual(d["dev0_overhead"], 128 * Mi)
        self.assertEqual(self.driver()["dev0_used"], 128 * Mi)
        self.kill(p)

    @unittest.skipUnless(shutil.which("unshare") and subprocess.run(
        ["unshare", "--user", "--pid", "--fork", "--map-root-user", "true"],
        capture_output=True).returncode == 0, "unprivileged user + PID namespaces unavailable")
    def test_contexts_in_a_pid_namespace_are_measured_device_wide(self):
        # NVML names the process by its host pid (gpusim as the driver does),
        # the shim knows only its namespace's (1): no entry for it, so the
        # first context is measured from the device's used memory, and the
        # later ones too (each sample then reads only that figure)
        self.make_fraction(limit=2 * Gi)
        p, out = self.probe_lines("info", "ctx-create", "0", "info", "hold", "60",
                                  wrap=["unshare", "--user", "--pid", "--fork", "--kill-child",
                                        "--map-root-user"])
        frees = [int(v) for k, v in (ln.strip().split("=", 1) for ln in out if "=" in ln)
                 if k == "free"]
        self.assertEqual(frees, [2 * Gi - 64 * Mi, 2 * Gi - 128 * Mi], "".join(out))
        self.assertEqual(self.dump()["dev0_overhead"], 128 * Mi)
        self.assertEqual(self.driver()["dev0_used"], 128 * Mi)
        self.kill(p)

    def test_context_destroy_and_primary_release_return_it(self):
        self.make_fraction(limit=2 * Gi)
        out = self.probe("ctx-create", "0", "ctx-legacy", "0", "free", "free",
                         "primary-reset", "0", "hold", "0").stdout
        self.assertIn("ctx-legacy=ok", out)
        self.assertEqual(self.dump()["dev0_used"], 0)
        self.assertEqual(self.dump()["dev0_overhead"], 0)

    def test_contexts_on_two_devices_and_a_raised_stack(self):
        self.env["GPUSIM_DEVICES"] = "4Gi,4Gi"
        self.env["GPUSIM_CTX_OVERHEAD"] = "64Mi,96Mi"  # the overhead depends on the device
        self.make_fraction(limit=2 * Gi)
        p, held = self.probe_bg("retain", "1", "set-limit", "stack", "2048", "info",
                                "hold", "60")
        self.assertEqual(held["set-limit"], "ok")
        self.assertEqual(held["limit_stack"], "2048")
        stack = 1024 * self.STACK_THREADS
        self.assertEqual(int(held["free"]), 2 * Gi - 96 * Mi - stack)
        d, drv = self.dump(), self.driver()
        self.assertEqual(d["dev0_used"], 64 * Mi)
        self.assertEqual(d["dev1_used"], 96 * Mi + stack)
        self.assertEqual((drv["dev0_used"], drv["dev1_used"]), (d["dev0_used"], d["dev1_used"]))
        self.kill(p)

    def test_limits_that_do_not_fit_are_refused_at_once(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("set-limit", "stack", "8192", "set-limit", "heap", "2Gi",
                            "set-limit", "fifo", "100Mi", "info").stdout)
        self.assertEqual(out["limit_stack"], "1024")
        self.assertEqual(out["limit_heap"], str(8 * Mi))
        self.assertEqual(out["set-limit"], "ok")  # the last one, the FIFO, fits
        self.assertEqual(int(out["free"]), 1 * Gi - 64 * Mi - 99 * Mi)
        r = self.probe("set-limit", "stack", "8192", "primary-reset", "0").stdout
        self.assertIn("set-limit=CUDA_ERROR_OUT_OF_MEMORY", r)
        self.assertEqual(self.dump()["dev0_used"], 0)
        self.assertGreaterEqual(self.dump()["dev0_denied"], 2)

    def test_a_context_past_the_limit_is_refused(self):
        self.make_fraction(limit=100 * Mi)
        out = kv(self.probe("ctx-create", "0", "info").stdout)
        self.assertEqual(out["ctx-create"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(int(out["free"]), 36 * Mi)
        self.make_fraction(limit=32 * Mi, name="small")
        r = self.probe(check=False)
        self.assertEqual(r.returncode, 2, "the primary context itself does not fit")
        self.assertEqual(self.dump()["dev0_used"], 0)

    def test_modules_and_libraries_are_charged(self):
        self.make_fraction(limit=1 * Gi)
        out = self.probe("module", "100Mi", "library", "50Mi", "info", "module", "2Gi",
                         "info", "freeall", "info").stdout
        frees = [int(v.split("=")[1]) for v in out.splitlines() if v.startswith("free=")]
        self.assertIn("module=CUDA_ERROR_OUT_OF_MEMORY", out)
        self.assertEqual(frees, [1 * Gi - 214 * Mi, 1 * Gi - 214 * Mi, 1 * Gi - 64 * Mi], out)

    def test_sigkilled_process_context_overhead_returned(self):
        self.make_fraction(limit=1 * Gi)
        p, _ = self.probe_bg("set-limit", "heap", "72Mi", "module", "10Mi", "hold", "60")
        self.assertEqual(self.dump()["dev0_used"], 64 * Mi + 64 * Mi + 10 * Mi)
        self.kill(p)
        out = kv(subprocess.run([LEDGERTOOL, "reclaim", self.ledger], capture_output=True,
                                text=True, check=True).stdout)
        self.assertEqual(out["reclaimed"], "1")
        self.assertEqual(self.dump()["dev0_used"], 0)
        self.assertEqual(self.dump()["dev0_overhead"], 0)
        self.assertEqual(self.dump()["dev0_reclaimed"], 138 * Mi)

    def test_untracked_overhead_is_resynced_from_nvml(self):
        # memory the driver gives the process with no hooked call (here gpusim's
        # implicit primary context, like lazy loading on a real driver) is
        # charged at the next cuMemGetInfo, where NVML names the process
        self.make_fraction(limit=1 * Gi)
        out = self.probe("primary-reset", "0", "info", "hold", "0").stdout
        self.assertIn("free=%d" % (1 * Gi - 64 * Mi), out)


class LegacyEntryPointTest(SimTestCase):
    def test_lookup_at_version_2000_returns_the_hooks(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("pa2000").stdout)
        names = [k for k in out if k.startswith("pa2000")]
        self.assertEqual(len(names), 22, out)
        for k in names:
            # cuDevicePrimaryCtxRetain came with CUDA 7.0: the driver has none at 2000
            want = "none" if k.endswith("PrimaryCtxRetain") else "hook"
            self.assertEqual(out[k], want, k)

    def test_legacy_pitch_is_charged(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("legacy-pitch", "1000", "1000", "info").stdout)
        self.assertEqual(out["legacy-pitch"], "ok")
        self.assertEqual(int(out["legacy_pitch_bytes"]), 1024)
        self.assertEqual(int(out["free"]), 1 * Gi - 1024 * 1000)
        out = kv(self.probe("alloc", "900Mi", "legacy-pitch", "32768", "4000", "info").stdout)
        self.assertEqual(out["legacy-pitch"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(int(out["free"]), 124 * Mi)

    def test_every_lookup_path_reaches_the_new_hooks(self):
        self.make_fraction(limit=1 * Gi)
        for via in VIAS:
            with self.subTest(via=via):
                out = kv(self.probe("resolved", via=via).stdout)
                self.assertEqual(out["hooked"], out["resolved"], "some entry point escaped")


class TrustTest(SimTestCase):
    def test_environment_can_lower_but_not_raise(self):
        self.make_fraction(limit=1 * Gi)
        out = kv(self.probe("info", env=self.shim_env(GPUFRAC_MEMORY_LIMIT="3Gi")).stdout)
        self.assertEqual(int(out["total"]), 1 * Gi)
        out = kv(self.probe("info", "alloc", "600Mi",
                            env=self.shim_env(GPUFRAC_MEMORY_LIMIT="512Mi")).stdout)
        self.assertEqual(int(out["total"]), 512 * Mi)
        self.assertEqual(out["alloc"], "CUDA_ERROR_OUT_OF_MEMORY")

    def test_unreadable_config_fails_closed(self):
        self.make_fraction(limit=1 * Gi)
        env = self.shim_env(GPUFRAC_CONFIG=os.path.join(self.tmp, "missing"))
        out = kv(self.probe("alloc", "1Mi", env=env).stdout)
        self.assertEqual(out["alloc"], "CUDA_ERROR_OUT_OF_MEMORY")

    def test_silent_unless_asked(self):
        self.make_fraction(limit=1 * Gi)
        r = self.probe("info", "alloc", "2Gi")
        self.assertEqual(r.stderr, "")
        r = self.probe("info", "alloc", "2Gi", env=self.shim_env(GPUFRAC_LOG="info"))
        self.assertIn("refused", r.stderr)

    def test_no_driver_dependency_and_only_hooks_exported(self):
        dyn = subprocess.run(["readelf", "-dW", SHIM], capture_output=True, text=True).stdout
        self.assertNotIn("libcuda", dyn)
        self.assertNotIn("libnvidia-ml", dyn)
        syms = subprocess.run(["readelf", "--dyn-syms", "-W", SHIM], capture_output=True,
                              text=True).stdout
        exported = set()
        for line in syms.splitlines():
            parts = line.split()
            if len(parts) >= 8 and parts[6] != "UND" and parts[4] in ("GLOBAL", "WEAK"):
                exported.add(parts[7].split("@")[0])
        hooks = set()
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "shim",
                               "hooks.def")) as f:
            for line in f:
                if line.startswith(("CU_HOOK(", "NVML_HOOK(")):
                    hooks.add(line.split("(")[1].split(",")[0])
        exported.discard("GLIBC_2.2.5")
        exported.discard("GLIBC_2.34")
        exported.discard("GPUFRAC_1")
        self.assertEqual(exported, hooks | {"dlsym"})

    def test_unrelated_programs_unaffected(self):
        self.make_fraction(limit=1 * Gi)
        r = subprocess.run(["sh", "-c", "echo hello"], env=self.shim_env(), capture_output=True,
                           text=True)
        self.assertEqual(r.stdout, "hello\n")
        self.assertEqual(r.stderr, "")
        code = "import ctypes; l=ctypes.CDLL(None); print(bool(l.dlsym))"
        r = subprocess.run([sys.executable, "-c", code], env=self.shim_env(),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


class DeviceMappingTest(SimTestCase):
    devices = "4Gi,8Gi"

    def test_cuda_visible_devices_maps_by_uuid(self):
        # only the second GPU is in the fraction; it is ordinal 0 when
        # CUDA_VISIBLE_DEVICES=1 (the index-space trap: CUDA indexes only the visible GPUs)
        env = dict(self.env, CUDA_VISIBLE_DEVICES="1")
        uuid = kv(self.probe("uuid", env=env).stdout)["uuid"]
        uuid0 = kv(self.probe("uuid", shim=False).stdout)["uuid"]
        self.assertNotEqual(uuid, uuid0)
        self.make_fraction(limit=1 * Gi, devices=(uuid,))
        env = self.shim_env(CUDA_VISIBLE_DEVICES="1")
        out = kv(self.probe("info", "totalmem", env=env).stdout)
        self.assertEqual(int(out["total"]), 1 * Gi)
        out = kv(self.probe("info", env=self.shim_env(CUDA_VISIBLE_DEVICES="0")).stdout)
        self.assertEqual(int(out["total"]), 0, "a GPU outside the fraction gets nothing")
        self.assertEqual(int(out["free"]), 0)

    def test_each_allocation_is_charged_to_the_current_contexts_device(self):
        # the shim caches each thread's current device: every way of switching
        # contexts must move it (set, push and pop, both ABIs, create)
        legacy = ["ctx-push-legacy", "0", "alloc", "10Mi", "ctx-pop-legacy", "alloc", "20Mi",
                  "ctx-create", "0", "alloc", "1Mi"]
        for via in ("direct", "dlsym", "procaddr"):
            # a lookup by base name never returns the pre-4.0 push and pop (nor,
            # at the probe's version, cuCtxCreate_v2)
            old = legacy if via != "procaddr" else []
            steps = ["retain", "0", "alloc", "100Mi", "retain", "1", "alloc", "200Mi",
                     "ctx-push", "0", "alloc", "300Mi", "ctx-pop", "alloc", "50Mi", *old,
                     "hold", "60"]
            with self.subTest(via=via):
                # a fraction and a simulated GPU of its own for each way
                self.env["GPUSIM_STATE"] = os.path.join(self.tmp, "gpusim.state." + via)
                self.make_fraction(limit=2 * Gi, name=via)
                p, out = self.probe_lines("--via", via, *steps)
                held = kv("".join(out))
                named = ["ctx-push-legacy", "ctx-pop-legacy", "ctx-create"] if old else []
                for step in ["ctx-push", "ctx-pop"] + named:
                    self.assertEqual(held[step], "ok", "".join(out))
                d, drv = self.dump(), self.driver()
                self.assertEqual(d["dev0_used"], (100 + 300 + (11 if old else 0)) * Mi)
                self.assertEqual(d["dev1_used"], (200 + 50 + (20 if old else 0)) * Mi)
                self.assertEqual((drv["dev0_used"], drv["dev1_used"]),
                                 (d["dev0_used"], d["dev1_used"]))
                self.kill(p)


if __name__ == "__main__":
    cases.main(verbosity=2)
