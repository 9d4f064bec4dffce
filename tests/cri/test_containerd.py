# SPDX-License-Identifier: Apache-2.0
"""gpufrac under real containerd (Debian's 1.6), driven through the CRI v1
gRPC API the way the kubelet drives it: RunPodSandbox with the pod's
annotations, CreateContainer, StartContainer, ExecSync, StopContainer,
RemoveContainer, StopPodSandbox, RemovePodSandbox. What stands in for the
kubelet is this file's client (crinode.Cri); containerd, its runc shim, runc,
gpufrac-runtime and gpufracd are the real ones; the GPU is gpusim, and MPS is
tests/fakes/nvidia-cuda-mps-control (stand-ins: no GPU here).

containerd is started once for the suite on a private socket and
root/state dirs (a system containerd is neither used nor touched), with the
gpufrac handler's BinaryName set to the build's gpufrac-runtime. Exits 77
(CTest: skipped) with the reason only where containerd cannot run at all."""
import os
import signal
import subprocess
import sys
import time
import unittest
import uuid

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import crinode  # noqa: E402
from crinode import Gi, Mi, RUNTIME, wait_for  # noqa: E402

REASON = crinode.skip_reason()
if REASON and __name__ == "__main__":
    print("SKIP: " + REASON)
    sys.exit(77)

from harness import PROBE, kv  # noqa: E402

NV = "nvidia.com/container."
DEVICES = "4Gi,4Gi"


class Node(crinode.AgentHost):
    """Everything the suite shares: one containerd, one gpufracd at a time."""

    def __init__(self):
        self.tmp = crinode.mkdtemp()
        self.gpusim_dir = os.path.join(self.tmp, "gpusim")
        self.state = os.path.join(self.tmp, "gpufrac")
        self.logs = os.path.join(self.tmp, "pods")
        for d in (self.gpusim_dir, self.state, self.logs):
            os.makedirs(d)
        self.gpusim_state = os.path.join(self.gpusim_dir, "state")
        self.env = crinode.node_env(self.gpusim_state, DEVICES, self.state)
        self.pb, self.stubs = crinode.load_cri(self.tmp)
        tar = crinode.build_images(self.tmp)
        self.ctd = crinode.gpufrac_containerd(os.path.join(self.tmp, "containerd"), self.env,
                                              tar)
        self.agent = None
        self.reset_gpu()
        self.start_agent()
        self.ctd.start()
        self.ctd.import_images()
        self.cri = crinode.Cri(self.pb, self.stubs, self.ctd.sock)

    def reset_gpu(self):
        if os.path.exists(self.gpusim_state):
            os.unlink(self.gpusim_state)
        subprocess.run([PROBE, "info"], env=self.env, check=True, capture_output=True)

    def events(self):
        p = os.path.join(self.state, "events.log")
        if not os.path.exists(p):
            return ""
        with open(p) as f:
            return f.read()

    def close(self):
        try:
            crinode.close_node(self.cri, self.ctd, self.tmp)
        finally:
            self.stop_agent()


NODE = None


def setUpModule():
    global NODE
    NODE = Node()


def tearDownModule():
    if NODE:
        NODE.close()


class Pod:
    """A pod as the kubelet runs it: one sandbox, containers by name/attempt."""

    def __init__(self, test, annotations=None, handler="gpufrac", pid=None, name=None):
        self.t = test
        self.pb = NODE.pb
        self.uid = str(uuid.uuid4())
        self.name = name or "pod-" + self.uid[:8]
        self.log_dir = os.path.join(NODE.logs, self.uid)
        os.makedirs(self.log_dir)
        self.config = self.cri.sandbox_config(self.name, self.uid, "ml", annotations or {},
                                              self.log_dir, self.pb.POD if pid is None else pid)
        self.id = self.cri.run_sandbox(self.config, handler)
        self.pid = pid
        self.cids = {}
        test.addCleanup(self.delete)

    @property
    def cri(self):
        return NODE.cri  # a new client after containerd restarts

    def env(self):
        return {"PATH": "/bin:/usr/bin", "LD_LIBRARY_PATH": "/usr/lib/gpusim",
                "GPUSIM_DEVICES": DEVICES, "GPUSIM_STATE": NODE.gpusim_state,
                "GPUSIM_CTX_OVERHEAD": "0"}

    def termination_log(self, name, attempt=0):
        """The host file the kubelet mounts at /dev/termination-log."""
        return os.path.join(self.log_dir, "termination-log-%s-%d" % (name, attempt))

    def create(self, name, command, attempt=0):
        # as the kubelet does: an empty host file under the pod's directory
        with open(self.termination_log(name, attempt), "w"):
            pass
        cid = self.cri.create(self.id, self.config, name, command, self.env(),
                              [NODE.gpusim_dir, (self.termination_log(name, attempt),
                                                 "/dev/termination-log")],
                              attempt=attempt, pid=self.pid)
        self.cids[(name, attempt)] = cid
        return cid

    def run(self, name, command, attempt=0):
        cid = self.create(name, command, attempt)
        self.cri.start(cid)
        return cid

    def fraction(self, container):
        return "k8s.%s.%s" % (self.id[:12], container)

    def log(self, name, attempt=0):
        return crinode.cri_log(os.path.join(self.log_dir, name, "%d.log" % attempt))

    def wait_log(self, name, text, attempt=0, timeout=60):
        return wait_for(lambda: text in self.log(name, attempt) and self.log(name, attempt),
                        "%r in the log of %s" % (text, name), timeout)

    def wait_exited(self, cid, timeout=60):
        return wait_for(lambda: (lambda s: s if s.state == self.pb.CONTAINER_EXITED else None)(
            self.cri.status(cid)), "container %s to exit" % cid[:12], timeout)

    def delete(self):
        try:
            self.cri.stop_sandbox(self.id)
            self.cri.remove_sandbox(self.id)
        except NODE.cri.grpc.RpcError:
            pass  # gone already


def allocs(text):
    return [ln for ln in text.splitlines() if ln.startswith("alloc=")]


def holding(size, seconds=300):
    return ["/usr/bin/shimprobe", "alloc", size, "hold", str(seconds)]


class CriTestCase(unittest.TestCase):
    def setUp(self):
        # each test starts from an empty node
        wait_for(lambda: NODE.fractions() == [], "the previous test's fractions to go", 60)
        if NODE.agent is None or NODE.agent.poll() is not None:
            NODE.start_agent()

    def host_free(self, device=0):
        out = subprocess.run([PROBE, "--device", str(device), "info"], env=NODE.env,
                             capture_output=True, text=True).stdout
        return int(kv(out)["free"])

    def assert_released(self, what):
        # the agent may release a dead container's fraction before containerd's
        # `delete` removes the wrapper's entry: both must happen
        wait_for(lambda: NODE.fractions() == [] and NODE.container_entries() == [], what, 60)


class LimitTest(CriTestCase):
    def test_limit_seen_and_enforced_then_released_on_remove(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi"})
        cid = pod.run("main", ["/usr/bin/shimprobe", "info", "alloc", "600Mi", "alloc", "600Mi",
                               "nvml"])
        st = pod.wait_exited(cid)
        self.assertEqual(st.exit_code, 0, pod.log("main"))
        out = pod.log("main")
        self.assertEqual(int(kv(out)["total"]), 1 * Gi, out)
        self.assertEqual(allocs(out), ["alloc=ok", "alloc=CUDA_ERROR_OUT_OF_MEMORY"], out)
        # the exit already deleted the task: containerd's delete ran the poststop hook
        self.assert_released("release on exit")
        NODE.cri.remove(cid)
        self.assertEqual(NODE.fractions(), [])

    def test_exec_shares_the_limit_and_gets_the_env_then_stop_releases(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi",
                         NV + "main.gpu-memory.limit": "1Gi"})
        cid = pod.run("main", holding("700Mi"))
        pod.wait_log("main", "holding")
        self.assertEqual(NODE.fractions(), [pod.fraction("main")])
        r = NODE.cri.exec_sync(cid, ["/usr/bin/shimprobe", "info", "alloc", "600Mi", "alloc",
                                     "300Mi"])
        out = r.stdout.decode()
        self.assertEqual(r.exit_code, 0, out + r.stderr.decode())
        self.assertEqual(allocs(out), ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"], out)
        self.assertIn("free=%d" % (324 * Mi), out)
        # the exec'd process has the fraction's env, as the container's own does
        env = NODE.cri.exec_sync(cid, ["/bin/env"]).stdout.decode().splitlines()
        self.assertIn("NVIDIA_GPU_MEMORY_REQUEST=1024", env)
        self.assertIn("NVIDIA_GPU_MEMORY_LIMIT=1024", env)
        vis = [e for e in env if e.startswith("NVIDIA_VISIBLE_DEVICES=GPU-")]
        self.assertEqual(len(vis), 1, env)
        spec_env = NODE.ctd.spec(cid)["process"]["env"]
        self.assertFalse([e for e in spec_env if e.startswith("NVIDIA_")],
                         "containerd's own spec has none of it: the wrapper added it")
        NODE.cri.stop(cid, timeout=0)
        self.assert_released("release on stop")
        self.assertEqual(self.host_free(), 4 * Gi)


class BurstTest(CriTestCase):
    def test_burst_in_a_pod_pid_namespace_and_reclaim_evicts_the_borrower(self):
        # shareProcessNamespace: one PID namespace for the pod, not the host's
        borrower = Pod(self, {NV + "trainer.gpu-memory.request": "1Gi",
                              NV + "trainer.gpu-memory.limit": "3Gi"}, pid=NODE.pb.POD)
        bystander = Pod(self, {NV + "main.gpu-memory.request": "512Mi"})
        cb = bystander.run("main", holding("100Mi"))
        bystander.wait_log("main", "holding")
        # GPUFRAC_LOG: the shim says why a borrow was refused (the agent's reply)
        ct = borrower.run("trainer", ["/bin/sh", "-c", "GPUFRAC_LOG=debug exec shimprobe alloc "
                                      "2560Mi hold 300"])
        out = borrower.wait_log("trainer", "alloc=")
        host_pid = NODE.cri.host_pid(ct)  # the borrower itself (sh exec'd it)
        self.assertEqual(allocs(out), ["alloc=ok"],
                         "burst past the request inside a pod PID namespace: " + out +
                         NODE.agent_log()[-2000:])
        owner = Pod(self, {NV + "main.gpu-memory.request": "2Gi"})
        co = owner.run("main", ["/usr/bin/shimprobe", "alloc", "1900Mi", "freeall"])
        st = owner.wait_exited(co)
        self.assertEqual(allocs(owner.log("main")), ["alloc=ok"], owner.log("main"))
        self.assertEqual(st.exit_code, 0)
        # the borrower was terminated, the bystander of the same GPU was not
        st = borrower.wait_exited(ct)
        self.assertNotEqual(st.exit_code, 0)
        reclaims = [ln for ln in NODE.events().splitlines() if "reclaim:" in ln]
        self.assertEqual(len(reclaims), 1, reclaims)
        self.assertIn("reclaim: terminated pid %d of fraction %s " % (
            host_pid, borrower.fraction("trainer")), reclaims[0])
        self.assertEqual(NODE.cri.status(cb).state, NODE.pb.CONTAINER_RUNNING)
        # the reason is the container's termination message (what the kubelet
        # reads from the host file after the container ended)
        with open(borrower.termination_log("trainer")) as f:
            message = f.read()
        self.assertIn("evicted by gpufracd: its loan of", message)
        self.assertIn('fraction "%s"' % owner.fraction("main"), message)
        for p in (bystander, owner):
            with open(p.termination_log("main")) as f:
                self.assertEqual(f.read(), "", "no message for a container gpufracd left alone")


class SmSharingTest(CriTestCase):
    def test_sm_sharing_env_and_pipe_dir_reach_container_and_exec(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi",
                         NV + "main.gpu-compute.mode": "sm-sharing",
                         NV + "main.gpu-compute.portion": "0.5"})
        cid = pod.run("main", ["/bin/sh", "-c", "env; ls -d \"$CUDA_MPS_PIPE_DIRECTORY\" && "
                               "echo pipe=ok; exec sleep 300"])
        out = pod.wait_log("main", "pipe=")
        self.assertIn("pipe=ok", out)
        for got in (out.splitlines(), NODE.cri.exec_sync(cid, ["/bin/env"]).stdout.decode()
                    .splitlines()):
            self.assertIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", got)
            self.assertIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M", got)
            pipe = [e.split("=", 1)[1] for e in got if e.startswith("CUDA_MPS_PIPE_DIRECTORY=")]
            self.assertEqual(len(pipe), 1, got)
            self.assertTrue(pipe[0].startswith(os.path.join(NODE.state, "mps")), pipe)
        self.assertTrue(os.path.isdir(pipe[0]))
        NODE.cri.stop(cid, timeout=0)
        self.assert_released("release of an sm-sharing fraction")


class MalformedTest(CriTestCase):
    def test_bad_annotation_fails_start_container_and_leaves_nothing(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1gb"})
        cid = pod.create("main", ["/usr/bin/shimprobe", "info"])  # CreateContainer succeeds
        with self.assertRaises(NODE.cri.grpc.RpcError) as e:
            NODE.cri.start(cid)
        msg = e.exception.details()
        self.assertIn("container main", msg)
        self.assertIn(NV + "main.gpu-memory.request", msg)
        self.assertIn("1gb", msg)
        st = NODE.cri.status(cid)
        self.assertEqual(st.state, NODE.pb.CONTAINER_EXITED)
        self.assertEqual(st.reason, "StartError")
        self.assertEqual(st.exit_code, 128)
        self.assertIn(NV + "main.gpu-memory.request", st.message)
        self.assertEqual(NODE.fractions(), [])
        self.assertEqual(NODE.container_entries(), [])

    def test_nothing_fits_names_what_was_asked_and_what_is_free(self):
        pods = [Pod(self, {NV + "main.gpu-memory.request": "3Gi"}) for _ in range(2)]
        for p in pods:
            p.run("main", holding("1Mi"))
        late = Pod(self, {NV + "main.gpu-memory.request": "2Gi"})
        cid = late.create("main", ["/usr/bin/shimprobe", "info"])
        with self.assertRaises(NODE.cri.grpc.RpcError) as e:
            NODE.cri.start(cid)
        msg = e.exception.details()
        self.assertIn("no GPU of this node fits", msg)
        self.assertIn("2.00 GiB guaranteed each (time-slicing)", msg)
        self.assertIn("1.00 GiB not guaranteed", msg)
        self.assertEqual(NODE.cri.status(cid).reason, "StartError")
        self.assertEqual(len(NODE.fractions()), 2)


class PlacementTest(CriTestCase):
    def gpu_of(self, pod, cid):
        env = NODE.cri.exec_sync(cid, ["/bin/env"]).stdout.decode().splitlines()
        return [e.split("=", 1)[1] for e in env if e.startswith("NVIDIA_VISIBLE_DEVICES=")][0]

    def test_binpack_and_modes_apart(self):
        uuids = [kv(subprocess.run([PROBE, "--device", str(i), "uuid"], env=NODE.env,
                                   capture_output=True, text=True).stdout)["uuid"]
                 for i in (0, 1)]
        a = Pod(self, {NV + "main.gpu-memory.request": "1Gi"})
        ca = a.run("main", holding("1Mi"))
        b = Pod(self, {NV + "main.gpu-memory.request": "2Gi"})
        cb = b.run("main", holding("1Mi"))
        s = Pod(self, {NV + "main.gpu-memory.request": "512Mi",
                       NV + "main.gpu-compute.mode": "sm-sharing"})
        cs = s.run("main", holding("1Mi"))
        for p in (a, b, s):
            p.wait_log("main", "holding")
        self.assertEqual(self.gpu_of(a, ca), uuids[0])
        self.assertEqual(self.gpu_of(b, cb), uuids[0], "binpack: the fuller GPU that fits")
        self.assertEqual(self.gpu_of(s, cs), uuids[1], "modes never share a GPU")


class KaiTest(CriTestCase):
    def test_pod_level_gpu_fraction_goes_to_the_first_container(self):
        pod = Pod(self, {"gpu-fraction": "0.25"})
        c1 = pod.run("main", ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
        c2 = pod.run("sidecar", ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
        self.assertEqual(int(kv(pod.wait_log("main", "total="))["total"]), 1 * Gi)
        self.assertEqual(int(kv(pod.wait_log("sidecar", "total="))["total"]), 4 * Gi)
        self.assertEqual(NODE.fractions(), [pod.fraction("main")])
        NODE.cri.stop(c1, timeout=0)
        # main restarts (attempt 1): it is still the pod's fractional container
        c3 = pod.run("main", ["/usr/bin/shimprobe", "info"], attempt=1)
        pod.wait_exited(c3)
        self.assertEqual(int(kv(pod.log("main", 1))["total"]), 1 * Gi)
        claim = os.path.join(NODE.state, "pods", pod.id)
        with open(claim) as f:
            self.assertEqual(f.read(), "main")
        NODE.cri.stop(c2, timeout=0)
        pod.delete()  # the sandbox's delete ends the claim
        self.assertFalse(os.path.exists(claim))

    def test_gpu_memory_and_container_name(self):
        pod = Pod(self, {"gpu-memory": "512", "gpu-fraction-container-name": "worker"})
        pod.run("helper", ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
        pod.run("worker", ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
        self.assertEqual(int(kv(pod.wait_log("worker", "total="))["total"]), 512 * Mi)
        self.assertEqual(int(kv(pod.wait_log("helper", "total="))["total"]), 4 * Gi)
        self.assertEqual(NODE.fractions(), [pod.fraction("worker")])


class MultiContainerTest(CriTestCase):
    def test_trainer_trainer2_and_sidecar(self):
        pod = Pod(self, {NV + "trainer.gpu-memory.request": "1Gi",
                         NV + "trainer-2.gpu-memory.request": "512Mi"})
        ids = {n: pod.run(n, ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
               for n in ("trainer", "trainer-2", "sidecar")}
        want = {"trainer": 1 * Gi, "trainer-2": 512 * Mi, "sidecar": 4 * Gi}
        for n, total in want.items():
            self.assertEqual(int(kv(pod.wait_log(n, "total="))["total"]), total, n)
        self.assertEqual(NODE.fractions(), sorted([pod.fraction("trainer"),
                                                   pod.fraction("trainer-2")]))
        # the sidecar's spec is containerd's, untouched
        self.assert_untouched(ids["sidecar"])

    def assert_untouched(self, cid):
        path = os.path.join(NODE.ctd.bundle(cid), "config.json")
        with open(path) as f:
            text = f.read()
        import json
        spec = NODE.ctd.spec(cid)
        self.assertEqual(json.loads(text), spec)
        # byte for byte what containerd wrote: Go's json.Marshal of its spec
        # (struct order, compact), which ctr prints back in the same order
        self.assertEqual(text, json.dumps(spec, separators=(",", ":"), ensure_ascii=False))
        for trace in ("libgpufrac.so", "ld.so.preload", "hook", "NVIDIA_", os.path.realpath(
                RUNTIME)):
            self.assertNotIn(trace, text)


class RestartTest(CriTestCase):
    def test_container_restarts_attempt_1_and_2(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi"})
        for attempt in range(3):
            cid = pod.run("main", ["/usr/bin/shimprobe", "info", "alloc", "1100Mi"],
                          attempt=attempt)
            st = pod.wait_exited(cid)
            out = pod.log("main", attempt)
            self.assertEqual(st.exit_code, 0, out)
            self.assertEqual(int(kv(out)["total"]), 1 * Gi, (attempt, out))
            self.assertEqual(allocs(out), ["alloc=CUDA_ERROR_OUT_OF_MEMORY"], out)
            self.assert_released("release after attempt %d" % attempt)
        self.assertEqual(len(NODE.cri.containers(pod.id)), 3)

    def test_release_when_the_shim_is_sigkilled(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi"})
        cid = pod.run("main", holding("100Mi"))
        pod.wait_log("main", "holding")
        shim = self.shim_pid(pod.id)
        os.kill(shim, signal.SIGKILL)
        # containerd cleans up with `delete --force` from a new shim process
        self.assert_released("release after the shim was SIGKILLed")
        wait_for(lambda: NODE.cri.status(cid).state != NODE.pb.CONTAINER_RUNNING,
                 "the container to be gone with its shim")
        self.assertIn("cleaning up dead shim", NODE.ctd.log())

    def shim_pid(self, sandbox):
        for pid in NODE.ctd.shim_pids(sandbox):
            return pid
        raise AssertionError("no shim for sandbox " + sandbox)

    def test_containerd_restart_while_a_fraction_runs(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi"})
        cid = pod.run("main", holding("700Mi"))
        pod.wait_log("main", "holding")
        NODE.cri.close()
        NODE.ctd.stop()
        NODE.ctd.start()
        NODE.cri = crinode.Cri(NODE.pb, NODE.stubs, NODE.ctd.sock)
        self.assertEqual(NODE.cri.status(cid).state, NODE.pb.CONTAINER_RUNNING)
        self.assertEqual(NODE.fractions(), [pod.fraction("main")])
        out = NODE.cri.exec_sync(cid, ["/usr/bin/shimprobe", "alloc", "400Mi"]).stdout.decode()
        self.assertEqual(allocs(out), ["alloc=CUDA_ERROR_OUT_OF_MEMORY"], out)
        NODE.cri.stop(cid, timeout=0)
        self.assert_released("release after containerd's restart")

    def test_gpufracd_sigkilled_and_restarted_while_a_fraction_runs(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi"})
        cid = pod.run("main", holding("700Mi"))
        pod.wait_log("main", "holding")
        NODE.stop_agent(signal.SIGKILL)
        NODE.start_agent()
        self.assertEqual(NODE.fractions(), [pod.fraction("main")])
        out = NODE.cri.exec_sync(cid, ["/usr/bin/shimprobe", "alloc", "300Mi",
                                       "alloc", "100Mi"]).stdout.decode()
        self.assertEqual(allocs(out), ["alloc=ok", "alloc=CUDA_ERROR_OUT_OF_MEMORY"], out)
        NODE.cri.stop(cid, timeout=0)
        self.assert_released("release after gpufracd's restart")


class PassThroughTest(CriTestCase):
    def test_plain_pod_on_the_gpufrac_handler_is_untouched(self):
        pod = Pod(self, {"example.com/other": "x"})
        cid = pod.run("main", ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
        self.assertEqual(int(kv(pod.wait_log("main", "total="))["total"]), 4 * Gi)
        MultiContainerTest.assert_untouched(self, cid)
        self.assertEqual(NODE.fractions(), [])

    def test_runc_handler_pod_ignores_annotations(self):
        pod = Pod(self, {NV + "main.gpu-memory.request": "1Gi"}, handler="runc")
        pod.run("main", ["/bin/sh", "-c", "shimprobe info; exec sleep 300"])
        self.assertEqual(int(kv(pod.wait_log("main", "total="))["total"]), 4 * Gi)
        self.assertEqual(NODE.fractions(), [])


if __name__ == "__main__":
    cases.main(verbosity=2)
