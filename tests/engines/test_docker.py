# SPDX-License-Identifier: Apache-2.0
"""gpufrac-runtime as a runtime of Debian's Docker 20.10: a private dockerd
(its own socket, data-root, exec-root and pidfile, vfs storage, no iptables
and no bridge, its own managed containerd) started by the suite with the
daemon.json `gpufrac install docker` wrote under the test's root, the probe
image built offline (umoci, then `skopeo copy oci:... docker-archive:...`
and `docker load`), gpufracd and gpusim as the host's agent and GPU. The
request is the GPUFRAC_GPU_* env form (Docker 20.10 has no --annotation).
Exits 77 only where dockerd cannot run at all."""
import json
import os
import signal
import subprocess
import sys
import time

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engines  # noqa: E402
from engines import Gi, Mi, allocs, kv, wait_for  # noqa: E402

DOCKERD, DOCKER = engines.which("dockerd"), "/usr/bin/docker"  # not a newer CLI on PATH
REASON = engines.base_skip(["dockerd", "containerd", "containerd-shim-runc-v2"]) or (
    None if os.access(DOCKER, os.X_OK) else "/usr/bin/docker (docker.io) is not installed")
if REASON and __name__ == "__main__":
    print("SKIP: " + REASON)
    sys.exit(77)

IMAGE = "gpufrac-test/probe:1"
H = None


class Dockerd:
    def __init__(self, host):
        self.host = host
        self.d = os.path.join(host.tmp, "docker")
        self.sock = os.path.join(self.d, "docker.sock")
        self.proc = None
        os.makedirs(self.d)

    def start(self):
        log = open(os.path.join(self.d, "dockerd.log"), "a")
        self.proc = subprocess.Popen(
            [DOCKERD, "-H", "unix://" + self.sock, "--data-root", os.path.join(self.d, "data"),
             "--exec-root", os.path.join(self.d, "exec"), "--pidfile",
             os.path.join(self.d, "docker.pid"), "--storage-driver", "vfs", "--iptables=false",
             "--ip-masq=false", "--bridge=none", "--userland-proxy=false", "--live-restore",
             "--config-file", os.path.join(self.host.root, "etc/docker/daemon.json")],
            env=self.host.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(lambda: self.proc.poll() is not None or self.docker(
            "version", check=False).returncode == 0, "dockerd to answer", 60)
        if self.proc.poll() is not None:
            raise AssertionError("dockerd exited: " + self.log())

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)

    def teardown(self):
        if self.proc and self.proc.poll() is None:
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False)
        self.stop()
        # the managed containerd and the shims outlive a live-restore dockerd
        pid = os.path.join(self.d, "exec", "containerd", "containerd.pid")
        if os.path.exists(pid):
            with open(pid) as f:
                try:
                    os.kill(int(f.read().strip()), signal.SIGTERM)
                except (ValueError, ProcessLookupError):
                    pass
        engines.unmount_under(self.d)

    def log(self):
        with open(os.path.join(self.d, "dockerd.log"), errors="replace") as f:
            return f.read()

    def docker(self, *args, check=True, timeout=120):
        r = subprocess.run([DOCKER, "-H", "unix://" + self.sock, *args], capture_output=True,
                           text=True, timeout=timeout, env={"PATH": engines.PATH,
                                                            "HOME": self.d})
        if check and r.returncode != 0:
            raise AssertionError("docker %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                                r.stderr))
        return r

    def bundle(self, cid):
        return os.path.join(self.d, "exec", "containerd", "daemon",
                            "io.containerd.runtime.v2.task", "moby", cid)

    def spec(self, cid):
        """containerd's own copy of the container's spec."""
        r = subprocess.run([engines.which("ctr"), "--address",
                            os.path.join(self.d, "exec", "containerd", "containerd.sock"),
                            "-n", "moby", "containers", "info", cid], check=True,
                           capture_output=True, text=True)
        return json.loads(r.stdout)["Spec"]


def setUpModule():
    global H
    H = engines.Host("docker")
    try:
        H.wrapper("gpufrac-runtime")
        H.install("docker")
        tar = engines.docker_archive(H, IMAGE)
        H.dockerd = Dockerd(H)
        H.dockerd.start()
        H.dockerd.docker("load", "-i", tar)
    except BaseException:
        tearDownModule()
        raise


def tearDownModule():
    if H:
        try:
            if getattr(H, "dockerd", None):
                H.dockerd.teardown()
        finally:
            H.close()


def run_args(*flags, env=(), name=None):
    extra = [a for e in env for a in ("-e", e)]
    return H.run_args(IMAGE, flags, extra, name)


REQ = "GPUFRAC_GPU_MEMORY_REQUEST="


class DockerTest(engines.EngineCase):
    def setUp(self):
        self.host = H
        super().setUp()

    def docker(self, *args, **kw):
        return H.dockerd.docker(*args, **kw)

    def test_limit_seen_and_enforced_exec_shares_it_status_names_it_rm_releases(self):
        cid = self.docker(*run_args("-d", env=[REQ + "1Gi"], name="trainer"), "/bin/sh", "-c",
                          "shimprobe info alloc 600Mi hold 300").stdout.strip()
        self.addCleanup(self.docker, "rm", "-f", cid, check=False)
        wait_for(lambda: "holding" in self.docker("logs", cid).stdout, "the probe to hold")
        out = self.docker("logs", cid).stdout
        self.assertEqual(int(kv(out)["total"]), 1 * Gi, out)
        name = "docker.%s.trainer" % cid[:12]
        self.assertEqual(H.fractions(), [name])
        # docker exec: the same fraction, the fraction's env
        r = self.docker("exec", cid, "shimprobe", "info", "alloc", "600Mi", "alloc", "300Mi")
        self.assertEqual(allocs(r.stdout), ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"],
                         r.stdout)
        env = self.docker("exec", cid, "env").stdout.splitlines()
        self.assertIn("NVIDIA_GPU_MEMORY_REQUEST=1024", env)
        # gpufrac status names the container as Docker does
        st = [f for f in H.status_json()["fractions"] if f["name"] == name]
        self.assertEqual((st[0]["namespace"], st[0]["pod"], st[0]["container"]),
                         ("docker", "-", "trainer"), st)
        self.assertIn("docker/trainer", H.status_text())
        self.docker("rm", "-f", cid)
        H.wait_released("release on docker rm -f")

    def test_run_rm_and_kill_release(self):
        r = self.docker(*run_args("--rm", env=[REQ + "512Mi"]), "shimprobe", "info", "alloc",
                        "600Mi")
        self.assertEqual(int(kv(r.stdout)["total"]), 512 * Mi, r.stdout)
        self.assertEqual(allocs(r.stdout), ["alloc=CUDA_ERROR_OUT_OF_MEMORY"], r.stdout)
        H.wait_released("release after docker run --rm")
        cid = self.docker(*run_args("-d", env=[REQ + "512Mi"]), "sleep", "300").stdout.strip()
        self.addCleanup(self.docker, "rm", "-f", cid, check=False)
        wait_for(lambda: len(H.fractions()) == 1, "the fraction")
        self.docker("kill", cid)
        H.wait_released("release on docker kill")

    def test_bad_request_fails_the_start_and_leaves_nothing(self):
        for env, named in (([REQ + "1gb"], "GPUFRAC_GPU_MEMORY_REQUEST"),
                           (["GPUFRAC_GPU_MEMORY=1Gi"], "GPUFRAC_GPU_MEMORY"),
                           ([REQ + "1Gi", "GPUFRAC_GPU_COMPUTE_MODE=fast"],
                            "GPUFRAC_GPU_COMPUTE_MODE"),
                           ([REQ + "64Gi"], "no GPU")):
            r = self.docker(*run_args("--rm", env=env), "true", check=False)
            self.assertNotEqual(r.returncode, 0, env)
            self.assertIn("OCI runtime create failed", r.stderr)
            self.assertIn(named, r.stderr, env)
            self.assertEqual(H.fractions(), [], env)
            self.assertEqual(H.container_entries(), [], env)
        wait_for(lambda: self.docker("ps", "-aq").stdout.strip() == "", "--rm to remove")

    def test_container_without_a_request_passes_through_byte_for_byte(self):
        cid = self.docker(*run_args("-d"), "sleep", "300").stdout.strip()
        self.addCleanup(self.docker, "rm", "-f", cid, check=False)
        with open(os.path.join(H.dockerd.bundle(cid), "config.json"), "rb") as f:
            text = f.read()
        self.assertEqual(text, H.saved_config(cid))  # what containerd handed over
        self.assertEqual(json.loads(text), H.dockerd.spec(cid))
        for trace in (b"libgpufrac.so", b"ld.so.preload", b"NVIDIA_"):
            self.assertNotIn(trace, text)
        self.assertEqual(H.fractions(), [])
        # the whole simulated GPU
        r = self.docker("exec", cid, "shimprobe", "info")
        self.assertEqual(int(kv(r.stdout)["total"]), 4 * Gi, r.stdout)

    def test_dockerd_restart_keeps_the_container_accounted(self):
        cid = self.docker(*run_args("-d", env=[REQ + "1Gi"], name="long"), "/bin/sh", "-c",
                          "shimprobe alloc 700Mi hold 300").stdout.strip()
        self.addCleanup(self.docker, "rm", "-f", cid, check=False)
        wait_for(lambda: "holding" in self.docker("logs", cid).stdout, "the probe to hold")
        H.dockerd.stop()
        H.dockerd.start()  # --live-restore: the container ran on
        self.assertEqual(self.docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip(),
                         "true")
        self.assertEqual(H.fractions(), ["docker.%s.long" % cid[:12]])
        r = self.docker("exec", cid, "shimprobe", "alloc", "400Mi")
        self.assertEqual(allocs(r.stdout), ["alloc=CUDA_ERROR_OUT_OF_MEMORY"], r.stdout)
        self.docker("rm", "-f", cid)
        H.wait_released("release after the restart")

    def test_containers_and_gpufrac_run_are_admitted_against_each_other(self):
        cid = self.docker(*run_args("-d", env=[REQ + "3Gi"]), "sleep", "300").stdout.strip()
        self.addCleanup(self.docker, "rm", "-f", cid, check=False)
        wait_for(lambda: len(H.fractions()) == 1, "the container's fraction")
        run = H.gpufrac_run("--memory", "2Gi", "--", engines.PROBE, "info")
        _, err = run.communicate(timeout=60)
        self.assertNotEqual(run.returncode, 0, err)
        self.assertIn("2.00 GiB", err)
        self.docker("rm", "-f", cid)
        H.wait_released("the container's release")
        run = H.gpufrac_run("--memory", "3Gi", "--name", "host-job", "--", engines.PROBE,
                            "hold", "300")
        self.addCleanup(lambda: run.poll() is None and (run.terminate(), run.communicate()))
        wait_for(lambda: "host-job" in H.fractions(), "gpufrac run's fraction")
        r = self.docker(*run_args("--rm", env=[REQ + "2Gi"]), "true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no GPU of this node fits", r.stderr)
        self.assertEqual(H.fractions(), ["host-job"])
        run.terminate()
        run.communicate(timeout=30)


if __name__ == "__main__":
    cases.main(verbosity=2)
