# SPDX-License-Identifier: Apache-2.0
"""`gpufrac install docker|podman` under a root the test owns (the host's /etc
is never written): the runtime entry added to a missing, an empty, a
populated and Debian's stock file; a second run changes nothing (no write at
all); --dry-run writes nothing; a file the engine could not read (JSON or
TOML broken, a daemon.json whose "runtimes" is not an object, a symlink) is
refused with its name and the reason, and left byte for byte as it was."""
import json
import os
import subprocess
import sys
import tempfile
import tomllib
import unittest

import cases

BUILD = os.environ.get("GPUFRAC_BUILD", "build")
CLI = os.path.join(BUILD, "bin", "gpufrac")
STOCK = "/usr/share/containers/containers.conf"  # containers-common's, read only
RT = "/opt/gpufrac/sbin/gpufrac-runtime"


class InstallTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gpufrac-install-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.root])

    def path(self, engine):
        return os.path.join(self.root, "etc/docker/daemon.json" if engine == "docker"
                            else "etc/containers/containers.conf")

    def install(self, engine, *flags, ok=True):
        r = subprocess.run([CLI, "install", engine, "--root", self.root, "--runtime", RT,
                            *flags], capture_output=True, text=True)
        if ok and r.returncode != 0:
            raise AssertionError("install failed: " + r.stderr)
        return r

    def put(self, engine, text):
        p = self.path(engine)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        return p

    def read(self, engine):
        with open(self.path(engine)) as f:
            return f.read()

    def assert_idempotent(self, engine, *flags):
        st = os.stat(self.path(engine))
        r = self.install(engine, *flags)
        self.assertIn("nothing changed", r.stdout)
        st2 = os.stat(self.path(engine))
        self.assertEqual((st.st_ino, st.st_mtime_ns), (st2.st_ino, st2.st_mtime_ns))

    def test_docker_new_file_then_idempotent(self):
        self.install("docker")
        self.assertEqual(json.loads(self.read("docker")),
                         {"runtimes": {"gpufrac": {"path": RT}}})
        self.assert_idempotent("docker")

    def test_docker_keeps_every_other_setting(self):
        self.put("docker", '{"log-level": "warn", "runtimes": {"nvidia": {"path": '
                           '"nvidia-container-runtime", "runtimeArgs": []}},\n"live-restore": true}')
        os.chmod(self.path("docker"), 0o600)
        self.install("docker")
        d = json.loads(self.read("docker"))
        self.assertEqual(list(d), ["log-level", "runtimes", "live-restore"])
        self.assertEqual(d["runtimes"], {"nvidia": {"path": "nvidia-container-runtime",
                                                    "runtimeArgs": []},
                                         "gpufrac": {"path": RT}})
        self.assertEqual(os.stat(self.path("docker")).st_mode & 0o777, 0o600)
        self.assert_idempotent("docker")
        # another path is set in place, the entry's own keys kept
        r = self.install("docker", "--runtime", "/usr/sbin/gpufrac-runtime")
        self.assertEqual(json.loads(self.read("docker"))["runtimes"]["gpufrac"],
                         {"path": "/usr/sbin/gpufrac-runtime"}, r.stdout)

    def test_dry_run_writes_nothing(self):
        r = self.install("docker", "--dry-run")
        self.assertIn('"path": "%s"' % RT, r.stdout)
        self.assertFalse(os.path.exists(self.path("docker")))
        self.put("podman", "[engine]\ncgroup_manager = \"cgroupfs\"\n")
        r = self.install("podman", "--dry-run", "--real-runtime", "runc")
        self.assertIn('gpufrac = ["%s-runc"]' % RT, r.stdout)
        self.assertEqual(self.read("podman"), "[engine]\ncgroup_manager = \"cgroupfs\"\n")

    def test_malformed_files_are_refused_and_left_as_they_were(self):
        cases = [("docker", '{"runtimes": {"x": {"path": "/x"}},', "is not JSON dockerd can read"),
                 ("docker", '{"runtimes": ["runc"]}', '"runtimes" is not an object'),
                 ("docker", '{"a": 1, "a": 2}', "duplicate"),
                 ("docker", '[]', "the document is not an object"),
                 ("podman", '[engine]\nruntimes = [\n  "x",\n', "line 2: an array or inline"),
                 ("podman", '[engine\n', "line 1: a table header is not closed"),
                 ("podman", 'cgroup_manager "cgroupfs"\n', "line 1: expected key = value"),
                 ("podman", '[engine]\nx = "a\n', "line 2: a string ends at the end"),
                 ("podman", '[engine]\nruntimes.gpufrac = ["/x"]\n', "dotted key")]
        for engine, text, why in cases:
            p = self.put(engine, text)
            r = self.install(engine, ok=False)
            self.assertEqual(r.returncode, 1, (text, r.stdout))
            self.assertIn(p, r.stderr)
            self.assertIn(why, r.stderr, text)
            self.assertIn("not changed", r.stderr)
            self.assertEqual(self.read(engine), text)
            self.assertEqual(os.listdir(os.path.dirname(p)), [os.path.basename(p)])

    def test_a_symlink_is_not_followed(self):
        target = os.path.join(self.root, "elsewhere.json")
        with open(target, "w") as f:
            f.write("{}")
        os.makedirs(os.path.join(self.root, "etc/docker"))
        os.symlink(target, self.path("docker"))
        r = self.install("docker", ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot be opened", r.stderr)
        with open(target) as f:
            self.assertEqual(f.read(), "{}")

    def test_podman_new_file_existing_table_and_debian_stock(self):
        self.install("podman", "--real-runtime", "runc")
        self.assertEqual(tomllib.loads(self.read("podman")),
                         {"engine": {"runtimes": {"gpufrac": [RT + "-runc"]}}})
        self.assert_idempotent("podman", "--real-runtime", "runc")
        # an existing [engine.runtimes] table gets the key after its header
        self.put("podman", '[engine]\nruntime = "crun"\n\n[engine.runtimes]\n'
                           'crun = ["/usr/bin/crun"]\n')
        self.install("podman")  # the real runtime from [engine] runtime
        t = tomllib.loads(self.read("podman"))
        self.assertEqual(t["engine"]["runtimes"], {"crun": ["/usr/bin/crun"],
                                                   "gpufrac": [RT + "-crun"]})
        self.assert_idempotent("podman")
        # an entry with another value is replaced in place
        self.install("podman", "--real-runtime", "runc")
        self.assertEqual(tomllib.loads(self.read("podman"))["engine"]["runtimes"]["gpufrac"],
                         [RT + "-runc"])
        self.assertEqual(self.read("podman").count("gpufrac ="), 1)
        if not os.path.exists(STOCK):
            return
        with open(STOCK) as f:
            stock = f.read()
        self.put("podman", stock)
        self.install("podman", "--real-runtime", "crun")
        new = self.read("podman")
        added = [ln for ln in new.splitlines() if ln not in stock.splitlines()]
        self.assertEqual(added, ['gpufrac = ["%s-crun"]' % RT])
        self.assertEqual(tomllib.loads(new)["engine"]["runtimes"], {"gpufrac": [RT + "-crun"]})

    def test_bad_flags(self):
        for args, code, why in ((["containerd"], 2, "expected the engine"),
                                (["podman", "--real-runtime", "kata"], 1, "runc or crun"),
                                (["docker", "--name", "a b"], 1, "--name"),
                                (["docker", "--runtime", "rel/path"], 1, "--runtime")):
            r = subprocess.run([CLI, "install", *args, "--root", self.root], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, code, (args, r.stderr))
            self.assertIn(why, r.stderr)
            self.assertEqual(os.listdir(self.root), [])


if __name__ == "__main__":
    cases.main(verbosity=2)
