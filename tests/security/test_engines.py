# SPDX-License-Identifier: Apache-2.0
"""Attacks on gpufrac-runtime through the inputs Docker and Podman add: the
GPUFRAC_GPU_* environment (a docker run -e), the annotations podman run
--annotation passes, and the engines' records the container's name comes
from. Each test says what is sent, checks the refusal (exit 1, the message
naming the variable or key, on stderr and in the --log file) and what stays:
the real runtime never ran, the agent holds no new fraction, no map entry is
left, config.json is byte-identical, another container's fraction is
untouched.

The bundles are shaped as each engine writes them (tests/engines runs the
real engines): podman's io.container.manager annotation and its
<graphroot>/vfs-containers/<id>/userdata bundle beside containers.json;
Docker's /etc/hostname bind from <data-root>/containers/<id>/, where
config.v2.json is. Driven like test_bundle.py (the build's wrapper in front of
a recorder and runc, gpufracd over gpusim). Needs root; exits 77 otherwise."""
import json
import os
import sys

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_bundle import BundleAttackCase  # noqa: E402
from test_runtime import CRI, NV, SANDBOX, read  # noqa: E402
from harness import Gi  # noqa: E402

REQ = "GPUFRAC_GPU_MEMORY_REQUEST="
PODMAN = {"io.container.manager": "libpod"}


class EngineAttackCase(BundleAttackCase):
    def podman_bundle(self, cid, annotations=None, env=(), name="victim", names=None):
        """A bundle where podman puts it, its name in containers.json."""
        b = self.bundle(["/usr/bin/shimprobe", "info"], dict(PODMAN, **(annotations or {})),
                        env=env, name=os.path.join("vfs-containers", cid, "userdata"))
        rec = os.path.join(self.tmp, "vfs-containers", "containers.json")
        entries = json.loads(read(rec)) if os.path.exists(rec) else []
        entries.append({"id": cid, "names": names or [name]})
        with open(rec, "w") as f:
            json.dump(entries, f)
        return b

    def docker_bundle(self, cid, env=(), record_id=None, name="/trainer", mode=0o600):
        """A bundle with Docker's /etc/hostname bind and config.v2.json."""
        b = self.bundle(["/usr/bin/shimprobe", "info"], None, env=env, name="moby-" + cid)
        d = os.path.join(self.tmp, "docker", "containers", record_id or cid)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "hostname"), "w") as f:
            f.write(cid[:12] + "\n")
        rec = os.path.join(d, "config.v2.json")
        with open(rec, "w") as f:
            json.dump({"ID": record_id or cid, "Name": name}, f)
        os.chmod(rec, mode)
        spec = self.spec_of(b)
        spec["mounts"].append({"destination": "/etc/hostname", "type": "bind",
                               "source": os.path.join(d, "hostname"), "options": ["rbind", "ro"]})
        with open(self.config(b), "w") as f:
            json.dump(spec, f)
        return b

    def admitted(self, b, cid):
        r = self.create(b, cid)
        self.assertEqual(r.returncode, 0, r.output)
        return [f for f in self.fractions() if cid[:12] in f]


class EnvFormAttackTest(EngineAttackCase):
    def test_nul_byte_in_the_env_form(self):
        b = self.docker_bundle("d" * 64, env=[REQ + "1Gi"])
        self.rewrite(b, REQ.encode() + b"1Gi", REQ.encode() + b"1Gi\\u0000x")
        self.refused(b, "d" * 64, ["\\u0000 is not allowed"])

    def test_huge_value(self):
        b = self.docker_bundle("e" * 64, env=[REQ + "9" * (8 << 20)])
        msg = self.refused(b, "e" * 64, ["GPUFRAC_GPU_MEMORY_REQUEST"], bundle_message=False)
        self.assertLess(len(msg), 4096, "the message stays bounded")

    def test_value_past_the_spec_bound(self):
        b = self.docker_bundle("f" * 64, env=[REQ + "9" * (17 << 20)])
        self.refused(b, "f" * 64, ["larger than 16 MiB"])

    def test_unknown_name_set_twice_and_empty(self):
        for env, why in (([REQ + "1Gi", "GPUFRAC_GPU_MEMORY=2Gi"],
                          "GPUFRAC_GPU_MEMORY is not one gpufrac reads"),
                         ([REQ + "1Gi", REQ + "3Gi"], "set twice"),
                         ([REQ], "is empty"),
                         (["GPUFRAC_GPU_COMPUTE_MODE=time-slicing"], "asks no GPU memory"),
                         ([REQ + "-1Gi"], "GPUFRAC_GPU_MEMORY_REQUEST"),
                         ([REQ + "1Gi", "GPUFRAC_GPU_MEMORY_LIMIT=512Mi"],
                          "GPUFRAC_GPU_MEMORY_LIMIT")):
            cid = "%02d" % len(self.containers) * 32
            b = self.docker_bundle(cid, env=env)
            msg = self.refused(b, cid, [why, "container trainer:"], bundle_message=False)
            self.assertNotIn(NV + "c.", msg, "named as the user wrote it")

    def test_env_form_is_not_read_in_a_pod(self):
        # a pod's author sets env too; the scheduler saw only the annotations
        b = self.plain_bundle(self.pod())
        spec = self.spec_of(b)
        spec["process"]["env"].append(REQ + "3Gi")
        with open(self.config(b), "w") as f:
            json.dump(spec, f)
        self.refused(b, "envpod", ["GPUFRAC_GPU_MEMORY_REQUEST is not read in a Kubernetes pod"],
                     bundle_message=False)

    def test_conflicting_forms(self):
        b = self.podman_bundle("c" * 64, {"gpu-fraction": "0.25"}, env=[REQ + "3Gi"])
        self.refused(b, "c" * 64, ["asks for a fraction twice", "annotation gpu-fraction"],
                     bundle_message=False)


class PodmanAnnotationAttackTest(EngineAttackCase):
    def test_nul_byte_in_an_annotation(self):
        b = self.podman_bundle("1" * 64, {"gpu-fraction": "0.25"})
        self.rewrite(b, b'"0.25"', b'"0.25\\u0000"')
        self.refused(b, "1" * 64, ["\\u0000 is not allowed"])

    def test_huge_annotation_value(self):
        b = self.podman_bundle("2" * 64, {"gpu-memory": "1" * (4 << 20)})
        msg = self.refused(b, "2" * 64, ["gpu-memory"], bundle_message=False)
        self.assertLess(len(msg), 4096)

    def test_keys_of_another_container(self):
        # podman run --name x --annotation nvidia.com/container.y...: whole GPU for x? no
        b = self.podman_bundle("3" * 64, {NV + "y.gpu-memory.request": "1Gi"}, name="x")
        self.refused(b, "3" * 64, ["names another container than this podman container, x"],
                     bundle_message=False)

    def test_claiming_a_pods_identity(self):
        # the victim: a pod's container with its fraction k8s.<sandbox>.main
        victim = self.plain_bundle(self.pod(**{"gpu-memory.request": "1Gi"}), name="pod")
        self.assertEqual(self.create(victim, "victim").returncode, 0)
        frac = "k8s.%s.main" % SANDBOX[:12]
        self.assertEqual(self.fractions(), [frac])
        forged = {CRI + "sandbox-id": SANDBOX, CRI + "container-name": "main",
                  "gpu-fraction": "0.25"}
        b = self.podman_bundle("4" * 64, forged)
        before = read(self.config(b), "rb")
        r = self.create(b, "4" * 64)
        self.assertEqual(r.returncode, 1, r.output)
        self.assertIn("a podman container cannot carry it", r.output)
        self.assertEqual(read(self.config(b), "rb"), before)
        self.assertEqual(self.fractions(), [frac])
        # its delete does not release the victim's fraction either
        self.wrapper("delete", "--force", "4" * 64)
        self.assertEqual(self.fractions(), [frac])
        # nor does calling itself a pod's sandbox (passed through as a pause container)
        b = self.podman_bundle("b" * 64, {CRI + "container-type": "sandbox",
                                          "gpu-fraction": "0.25"})
        r = self.create(b, "b" * 64)
        self.assertEqual(r.returncode, 1, r.output)
        self.assertIn("a podman container cannot carry it", r.output)
        self.assertIsNone(self.status("b" * 64), "runc never ran")
        self.assertEqual(self.fractions(), [frac])


class NameClaimTest(EngineAttackCase):
    def test_two_containers_with_one_name_get_their_own_fractions(self):
        a, b = "5" * 64, "6" * 64
        fa = self.admitted(self.podman_bundle(a, {"gpu-fraction": "0.25"}, name="trainer"), a)
        fb = self.admitted(self.podman_bundle(b, {"gpu-fraction": "0.25"}, name="trainer"), b)
        self.assertEqual((fa, fb), (["podman.%s.trainer" % a[:12]],
                                    ["podman.%s.trainer" % b[:12]]))
        self.wrapper("delete", "--force", b)
        self.assertEqual(self.fractions(), fa)

    def test_a_record_of_another_id_or_writable_names_nothing(self):
        victim = "7" * 64
        self.admitted(self.docker_bundle(victim, env=[REQ + "1Gi"]), victim)
        # the attacker's /etc/hostname bind points at the victim's record
        att = "8" * 64
        b = self.docker_bundle(att, env=[REQ + "1Gi"], record_id=victim)
        # not Docker's record of this container: a plain OCI container, oci.<id>
        self.assertEqual([f[:16] for f in self.admitted(b, att)], ["oci." + att[:12]])
        # a record others may write is not Docker's either
        w = "9" * 64
        got = self.admitted(self.docker_bundle(w, env=[REQ + "1Gi"], name="/victim",
                                               mode=0o666), w)
        self.assertEqual([f[:16] for f in got], ["oci." + w[:12]])
        self.assertIn("docker.%s.trainer" % victim[:12], self.fractions())
        self.assertEqual(len(self.fractions()), 3)

    def test_names_docker_and_podman_do_not_allow_are_not_taken(self):
        c = "a1" * 32
        got = self.admitted(self.podman_bundle(c, {"gpu-fraction": "0.25"},
                                               names=["../../x\nns=kube-system"]), c)
        self.assertEqual(got, ["podman.%s.%s" % (c[:12], c[:12])])


if __name__ == "__main__":
    from test_runtime import skip_reason
    if skip_reason():
        print("security.engines: %s; skipped" % skip_reason())
        sys.exit(77)
    cases.main(verbosity=2)
