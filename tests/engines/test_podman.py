# SPDX-License-Identifier: Apache-2.0
"""gpufrac-runtime as a runtime of Debian's Podman 4.3, rootful, with its own
storage root, run root and tmp dir, and its own containers.conf
(CONTAINERS_CONF) to which `gpufrac install podman` added the runtime. The
request is `--annotation`, with the keys a pod uses. The image is the probe
layout built offline with umoci, pulled from its oci: directory.

What the suite's containers.conf changes so that Podman runs a container on
these machines at all (cgroup v1 without systemd, no CAP_SYS_RESOURCE, an
nproc hard limit of 96,363 of which Podman's own process keeps 32,768):
cgroup_manager = "cgroupfs", events_logger = "file", no network (netns "none", its config dir the suite's:
nothing of the host's network or /etc changes), default_ulimits at or
under the limits the podman process has (nofile 20000, nproc 32768), and
runc as the real runtime (crun 1.8 refuses a hybrid cgroup hierarchy whose
v2 part has a controller: "cgroups in hybrid mode not supported").

Restart, for an engine without a daemon: a container started with `podman
run -d` outlives that podman process; the suite also SIGKILLs the
container's conmon (the one engine process left) and the later podman
commands (a new process each) still find the container accounted.
Exits 77 only where podman cannot run a container at all."""
import json
import os
import signal
import subprocess
import sys

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engines  # noqa: E402
from engines import Gi, Mi, allocs, kv, wait_for  # noqa: E402

PODMAN = engines.which("podman")
REASON = engines.base_skip(["podman", "conmon"])
if REASON and __name__ == "__main__":
    print("SKIP: " + REASON)
    sys.exit(77)

IMAGE = "localhost/gpufrac-test/probe:1"
NV = "nvidia.com/container."
CONF = """# the suite's engine settings (see the module's docstring)
[containers]
default_ulimits = [
  "nofile=20000:20000",
  "nproc=32768:32768",
]

netns = "none"

[network]
network_config_dir = "%(d)s/networks"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "%(d)s/events.log"
runtime = "runc"
"""
H = None


class Podman:
    def __init__(self, host):
        self.host = host
        self.d = os.path.join(host.tmp, "podman")
        os.makedirs(self.d)
        self.conf = os.path.join(host.root, "etc/containers/containers.conf")
        os.makedirs(os.path.dirname(self.conf))
        with open(self.conf, "w") as f:
            f.write(CONF % {"d": self.d})

    def podman(self, *args, check=True, timeout=120, hide=False):
        env = {"PATH": engines.PATH, "HOME": self.d, "CONTAINERS_CONF": self.conf,
               "TMPDIR": self.d}
        argv = [PODMAN, "--root", os.path.join(self.d, "root"), "--runroot",
                os.path.join(self.d, "run"), "--tmpdir", os.path.join(self.d, "tmp"),
                "--storage-driver", "vfs", *args]
        r = subprocess.run(engines.hide_var_lib(argv) if hide else argv, capture_output=True,
                           text=True, timeout=timeout, env=env)
        if check and r.returncode != 0:
            raise AssertionError("podman %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                                r.stderr))
        return r

    def bundle(self, cid):
        return os.path.join(self.d, "root", "vfs-containers", cid, "userdata")

    def teardown(self):
        self.podman("rm", "-af", "-t", "0", check=False)
        engines.unmount_under(self.d)


def setUpModule():
    global H
    H = engines.Host("podman")
    try:
        H.wrapper("gpufrac-runtime-runc")
        H.wrapper("gpufrac-runtime-crun")
        H.podman = Podman(H)
        H.install("podman")  # the real runtime from containers.conf: runc
        image = H.podman.podman("pull", "-q", "oci:%s:probe" % H.layout,
                                hide=True).stdout.split()[-1]
        H.podman.podman("tag", image, IMAGE)
    except BaseException:
        tearDownModule()
        raise
    r = H.podman.podman("run", "--rm", "--runtime", "runc", IMAGE, "true", check=False)
    if r.returncode != 0:
        tearDownModule()
        print("SKIP: podman runs no container here, even with the suite's containers.conf: "
              + r.stderr.strip())
        sys.exit(77)


def tearDownModule():
    if H:
        try:
            if getattr(H, "podman", None):
                H.podman.teardown()
        finally:
            H.close()


def run_args(*flags, ann=None, name=None):
    extra = [a for k, v in (ann or {}).items() for a in ("--annotation", "%s=%s" % (k, v))]
    return H.run_args(IMAGE, flags, extra, name)


class PodmanTest(engines.EngineCase):
    def setUp(self):
        self.host = H
        super().setUp()

    def podman(self, *args, **kw):
        return H.podman.podman(*args, **kw)

    def test_limit_seen_and_enforced_exec_shares_it_status_names_it_rm_releases(self):
        cid = self.podman(*run_args("-d", ann={NV + "trainer.gpu-memory.request": "1Gi"},
                                    name="trainer"),
                          "/bin/sh", "-c", "shimprobe info alloc 600Mi hold 300").stdout.strip()
        self.addCleanup(self.podman, "rm", "-f", "-t", "0", cid, check=False)
        wait_for(lambda: "holding" in self.podman("logs", cid).stdout, "the probe to hold")
        out = self.podman("logs", cid).stdout
        self.assertEqual(int(kv(out)["total"]), 1 * Gi, out)
        name = "podman.%s.trainer" % cid[:12]
        self.assertEqual(H.fractions(), [name])
        r = self.podman("exec", cid, "shimprobe", "info", "alloc", "600Mi", "alloc", "300Mi")
        self.assertEqual(allocs(r.stdout), ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"],
                         r.stdout)
        self.assertIn("NVIDIA_GPU_MEMORY_LIMIT=1024",
                      self.podman("exec", cid, "env").stdout.splitlines())
        st = [f for f in H.status_json()["fractions"] if f["name"] == name]
        self.assertEqual((st[0]["namespace"], st[0]["container"]), ("podman", "trainer"), st)
        self.assertIn("podman/trainer", H.status_text())
        self.podman("rm", "-f", "-t", "0", cid)
        H.wait_released("release on podman rm -f")

    def test_pod_level_form_run_rm_and_kill_release(self):
        # gpu-fraction: a share of the GPU, as a pod asks (the container is its own pod)
        r = self.podman(*run_args("--rm", ann={"gpu-fraction": "0.25"}), "shimprobe", "info")
        self.assertEqual(int(kv(r.stdout)["total"]), 1 * Gi, r.stdout)
        H.wait_released("release after podman run --rm")
        cid = self.podman(*run_args("-d", ann={"gpu-memory": "512"}), "sleep",
                          "300").stdout.strip()
        self.addCleanup(self.podman, "rm", "-f", "-t", "0", cid, check=False)
        wait_for(lambda: len(H.fractions()) == 1, "the fraction")
        self.podman("kill", cid)
        H.wait_released("release on podman kill")

    def test_bad_request_fails_the_start_and_leaves_nothing(self):
        for ann, named in (({"gpu-fraction": "1.5"}, "gpu-fraction"),
                           ({NV + "other.gpu-memory.request": "1Gi"}, "names another container"),
                           ({"gpu-fraction": "0.5", NV + "x.gpu-compute.mode": "fast"},
                            "is not a compute mode"),
                           ({"gpu-memory": "65536"}, "no GPU")):
            r = self.podman(*run_args("--rm", ann=ann, name="x"), "true", check=False)
            self.assertNotEqual(r.returncode, 0, ann)
            self.assertIn(named, r.stderr, ann)
            self.assertEqual(H.fractions(), [], ann)
            self.assertEqual(H.container_entries(), [], ann)
        wait_for(lambda: self.podman("ps", "-aq").stdout.strip() == "", "--rm to remove")

    def test_container_without_a_request_passes_through_byte_for_byte(self):
        cid = self.podman(*run_args("-d"), "sleep", "300").stdout.strip()
        self.addCleanup(self.podman, "rm", "-f", "-t", "0", cid, check=False)
        with open(os.path.join(H.podman.bundle(cid), "config.json"), "rb") as f:
            text = f.read()
        self.assertEqual(text, H.saved_config(cid))
        self.assertEqual(json.loads(text)["annotations"]["io.container.manager"], "libpod")
        for trace in (b"libgpufrac.so", b"ld.so.preload", b"NVIDIA_"):
            self.assertNotIn(trace, text)
        self.assertEqual(H.fractions(), [])

    def test_crun_is_wrapped_when_it_is_the_real_runtime(self):
        # the entry `gpufrac install podman --real-runtime crun` writes
        out = H.install("podman", "--real-runtime", "crun", "--name", "gpufrac-crun",
                        "--dry-run")
        self.assertIn('gpufrac-crun = ["%s/gpufrac-runtime-crun"]' % H.bin, out)
        r = self.podman("run", "--rm", "--runtime", os.path.join(H.bin, "gpufrac-runtime-crun"),
                        IMAGE, "true", check=False)
        plain = self.podman("run", "--rm", "--runtime", engines.which("crun"), IMAGE, "true",
                            check=False)
        # crun's own answer, whatever it is here (on these machines: a refusal of the hybrid
        # cgroup hierarchy, which runc does not make)
        self.assertEqual(r.returncode, plain.returncode, r.stderr + plain.stderr)
        if plain.returncode != 0:
            why = plain.stderr.strip().split("crun: ", 1)[-1]
            self.assertIn(why, r.stderr)

    def test_conmon_killed_the_container_stays_accounted(self):
        cid = self.podman(*run_args("-d", ann={NV + "long.gpu-memory.request": "1Gi"},
                                    name="long"),
                          "/bin/sh", "-c", "shimprobe alloc 700Mi hold 300").stdout.strip()
        self.addCleanup(self.podman, "rm", "-f", "-t", "0", cid, check=False)
        wait_for(lambda: "holding" in self.podman("logs", cid).stdout, "the probe to hold")
        conmon = int(self.podman("inspect", "-f", "{{.State.ConmonPid}}", cid).stdout)
        os.kill(conmon, signal.SIGKILL)
        self.assertEqual(H.fractions(), ["podman.%s.long" % cid[:12]])
        r = self.podman("exec", cid, "shimprobe", "alloc", "400Mi")
        self.assertEqual(allocs(r.stdout), ["alloc=CUDA_ERROR_OUT_OF_MEMORY"], r.stdout)
        self.podman("rm", "-f", "-t", "0", cid)
        # without its conmon, podman kills the container but never calls the runtime's
        # delete: the agent releases the fraction (its processes are gone), and the next
        # create removes the wrapper's entry for it
        wait_for(lambda: H.fractions() == [], "release after conmon's death")
        subprocess.run([engines.which("runc"), "delete", "--force", cid], capture_output=True)
        r = self.podman(*run_args("--rm", ann={"gpu-fraction": "0.25"}), "true")
        H.wait_released("the entry of the container whose delete never came")

    def test_containers_and_gpufrac_run_are_admitted_against_each_other(self):
        run = H.gpufrac_run("--memory", "3Gi", "--name", "host-job", "--", engines.PROBE,
                            "hold", "300")
        self.addCleanup(lambda: run.poll() is None and (run.terminate(), run.communicate()))
        wait_for(lambda: "host-job" in H.fractions(), "gpufrac run's fraction")
        r = self.podman(*run_args("--rm", ann={"gpu-fraction": "0.5"}), "true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no GPU of this node fits", r.stderr)
        self.assertEqual(H.fractions(), ["host-job"])
        run.terminate()
        run.communicate(timeout=30)


if __name__ == "__main__":
    cases.main(verbosity=2)
