# SPDX-License-Identifier: Apache-2.0
"""Attacks on gpufrac-runtime through the bundle it is handed: a config.json
the wrapper cannot read completely, or one whose gpufrac/KAI annotations it
would skip, must never reach the real runtime. Each test says what the
attacker sends, checks what is refused (exit status, the message on stderr
and in the --log file naming the file and the reason) and what stays
untouched: the real runtime (a recorder in front of runc) never ran, the agent
holds no fraction, no map entry is left, config.json is byte-identical.

Driven like tests/runtime/test_runtime.py (whose helpers it imports): the
build's wrapper, Debian's runc, gpufracd over gpusim. Needs root; exits 77
otherwise."""
import json
import os
import socket
import stat
import subprocess
import sys
import threading

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "runtime"))
from test_runtime import CRI, NV, RUNC, SANDBOX, RuntimeTestCase, read, skip_reason  # noqa: E402
from harness import Gi, kv  # noqa: E402

REFUSING = "refusing bundle "
NEVER = "a bundle gpufrac cannot read is never started"
SPEC_MAX = 16 << 20  # the wrapper's bound on config.json


class BundleAttackCase(RuntimeTestCase):
    def setUp(self):
        super().setUp()
        # the "real runtime": records every call, then is runc
        self.calls = os.path.join(self.tmp, "real-runtime.calls")
        recorder = os.path.join(self.tmp, "real-runtime")
        with open(recorder, "w") as f:
            f.write("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> '%s'\nexec '%s' \"$@\"\n"
                    % (self.calls, RUNC))
        os.chmod(recorder, 0o755)
        self.env["GPUFRAC_REAL_RUNTIME"] = recorder

    # -- what the attacker sends -------------------------------------------
    def plain_bundle(self, annotations=None, name="b"):
        return self.bundle(["/usr/bin/shimprobe", "info"], annotations, name=name)

    def frac(self, **extra):
        """A 1 GiB fraction for container main, plus extra annotations."""
        a = self.pod(**{"gpu-memory.request": "1Gi"})
        a.update(extra)
        return a

    def config(self, b):
        return os.path.join(b, "config.json")

    def rewrite(self, b, old, new):
        """Replaces bytes in config.json: what json.dump cannot write."""
        data = read(self.config(b), "rb")
        self.assertIn(old, data)
        with open(self.config(b), "wb") as f:
            f.write(data.replace(old, new, 1))

    # -- what must hold ----------------------------------------------------
    def real_runtime_calls(self):
        return read(self.calls).splitlines() if os.path.exists(self.calls) else []

    def assert_never_started(self, cid):
        started = [c for c in self.real_runtime_calls()
                   if "create" in c.split() or "run" in c.split()]
        self.assertEqual(started, [], "the real runtime was run")
        self.assertIsNone(self.status(cid), "runc knows no such container")
        self.assertEqual(self.fractions(), [], "the agent admitted nothing")
        self.assertFalse(os.path.lexists(os.path.join(self.state, "containers", cid)))

    def snapshot(self, b):
        p = self.config(b)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            return ("file", read(p, "rb"))
        if stat.S_ISLNK(st.st_mode):
            return ("link", os.readlink(p))
        return ("other", stat.S_IFMT(st.st_mode))

    def refused(self, b, cid, reasons, verb="create", bundle_message=True):
        """Runs verb on b; returns the logged message after checking it all."""
        before = self.snapshot(b)
        out = os.path.join(self.tmp, cid + ".out")
        r = self.wrapper(verb, "--bundle", b, cid, out=out)
        self.containers.append(cid)
        output = read(out)
        self.assertEqual(r.returncode, 1, output)
        errs = self.log_errors()
        self.assertTrue(errs, "an error line in the --log file")
        msg = errs[-1]["msg"]
        self.assertIn(msg, output, "the same message on stderr")
        musts = list(reasons)
        if bundle_message:
            musts += [REFUSING + self.config(b), NEVER]
        for s in musts:
            self.assertIn(s, msg)
        self.assertEqual(self.snapshot(b), before, "config.json untouched")
        self.assert_never_started(cid)
        return msg

    def passes(self, b, cid, total):
        """create, start, wait, delete through the wrapper; config.json as it was."""
        before = read(self.config(b), "rb")
        r = self.create(b, cid)
        self.assertEqual(r.returncode, 0, r.output)
        if total == 4 * Gi:
            self.assertEqual(read(self.config(b), "rb"), before)
        self.assertEqual(self.wrapper("start", cid).returncode, 0)
        self.wait_for(lambda: self.status(cid) == "stopped", "the container to stop", 60)
        got = kv(read(os.path.join(self.tmp, cid + ".out")))
        self.assertEqual(int(got["total"]), total)
        self.assertEqual(self.wrapper("delete", cid).returncode, 0)


class UnreadableBundleTest(BundleAttackCase):
    def test_nul_in_an_unrelated_annotation_value(self):
        # jansson refuses \u0000, runc (Go) takes it: the wrapper used to hand
        # the untouched bundle over, fraction and all
        b = self.plain_bundle(self.frac(**{"example.com/note": "hello\x00world"}))
        self.assertIn(b"\\u0000", read(self.config(b), "rb"))
        self.refused(b, "nul1", ["\\u0000 is not allowed", "(line "])

    def test_nul_in_a_plain_containers_annotation(self):
        # read completely or not at all: no fraction asked, still refused
        b = self.plain_bundle({"example.com/note": "\x00"})
        self.refused(b, "nul2", ["\\u0000 is not allowed"])

    def test_nul_in_our_annotation_value(self):
        b = self.plain_bundle(self.pod(**{"gpu-memory.request": "1Gi\x00junk"}))
        self.refused(b, "nul3", ["\\u0000 is not allowed"])

    def test_nul_in_an_annotation_key(self):
        a = self.frac()
        a[NV + "main.gpu-memory.request\x00x"] = "15Gi"
        self.refused(self.plain_bundle(a), "nul4", ["NUL byte in object key"])

    def test_run_is_refused_like_create(self):
        b = self.plain_bundle(self.frac(**{"example.com/note": "\x00"}))
        self.refused(b, "nul5", ["\\u0000 is not allowed"], verb="run")

    def test_invalid_utf8(self):
        b = self.plain_bundle(self.frac(**{"example.com/note": "@@BAD@@"}))
        self.rewrite(b, b"@@BAD@@", b"\xff\xfe")
        self.refused(b, "utf8", ["unable to decode byte 0xff"])

    def test_a_raw_nul_byte(self):
        # found by fuzz_bundle: jansson took a raw NUL after a number as its end
        b = self.plain_bundle(self.frac(**{"example.com/note": "x"}))
        self.rewrite(b, b'"x"', b'0\x00')
        self.refused(b, "nul", ["a NUL byte at offset"])

    def test_truncated_file(self):
        b = self.plain_bundle(self.frac())
        data = read(self.config(b), "rb")
        with open(self.config(b), "wb") as f:
            f.write(data[:len(data) // 2])
        self.refused(b, "trunc", ["(line "])

    def test_a_second_document_after_the_first(self):
        # runc decodes the first value and ignores the rest
        b = self.plain_bundle(self.frac())
        with open(self.config(b), "ab") as f:
            f.write(b'{"annotations": {}}')
        self.refused(b, "trail", ["end of file expected"])

    def test_duplicate_annotation_key(self):
        b = self.plain_bundle(self.frac(**{"example.com/dup": "x"}))
        key = (NV + "main.gpu-memory.request").encode()
        self.rewrite(b, b'"example.com/dup": "x"', b'"' + key + b'": "15Gi"')
        self.refused(b, "dup", ["duplicate object key"])

    def test_config_json_is_a_symlink(self):
        b = self.plain_bundle(self.frac())
        os.rename(self.config(b), os.path.join(self.tmp, "elsewhere.json"))
        os.symlink(os.path.join(self.tmp, "elsewhere.json"), self.config(b))
        self.refused(b, "link", ["not a regular file"])

    def test_config_json_is_a_directory(self):
        b = self.plain_bundle(self.frac())
        os.unlink(self.config(b))
        os.mkdir(self.config(b))
        self.refused(b, "dir", ["not a regular file"])

    def test_config_json_is_a_fifo(self):
        # a read that would never end: refused without waiting for a writer
        b = self.plain_bundle(self.frac())
        os.unlink(self.config(b))
        os.mkfifo(self.config(b))
        self.refused(b, "fifo", ["not a regular file"])

    def test_missing_config_json(self):
        b = self.plain_bundle(self.frac())
        os.unlink(self.config(b))
        before_calls = self.real_runtime_calls()
        out = os.path.join(self.tmp, "none.out")
        r = self.wrapper("create", "--bundle", b, "none", out=out)
        self.containers.append("none")
        self.assertEqual(r.returncode, 1, read(out))
        self.assertIn(REFUSING + self.config(b), read(out))
        self.assertIn("No such file or directory", read(out))
        self.assertEqual(self.real_runtime_calls(), before_calls)
        self.assert_never_started("none")

    def test_huge_file(self):
        b = self.plain_bundle(self.frac(**{"example.com/pad": "x" * SPEC_MAX}))
        self.assertGreater(os.path.getsize(self.config(b)), SPEC_MAX)
        self.refused(b, "huge", ["larger than 16 MiB"])


class AnnotationTypeTest(BundleAttackCase):
    def test_number_under_our_key(self):
        key = NV + "main.gpu-memory.request"
        b = self.plain_bundle(self.pod(**{"gpu-memory.request": 1073741824}))
        msg = self.refused(b, "num", [key, "a number, not a string"])
        self.assertIn("annotation", msg)

    def test_object_under_our_key(self):
        key = NV + "main.gpu-memory.limit"
        a = self.frac()
        a[key] = {"value": "15Gi"}
        self.refused(self.plain_bundle(a), "obj", [key, "an object, not a string"])

    def test_kai_pod_level_form_as_a_number(self):
        # gpu-fraction: 0.25 as a JSON number, the only fraction key of the pod
        a = self.pod()
        a["gpu-fraction"] = 0.25
        self.refused(self.plain_bundle(a), "kainum", ["gpu-fraction", "a number, not a string"])

    def test_cri_identity_as_a_number(self):
        a = self.frac()
        a[CRI + "container-type"] = 7
        self.refused(self.plain_bundle(a), "cri", [CRI + "container-type", "not a string"])

    def test_annotations_not_an_object(self):
        b = self.plain_bundle(["not", "an", "object"])
        self.refused(b, "arr", ["annotations", "not a JSON object"])


class KeyWithoutFractionTest(BundleAttackCase):
    """A key naming this container that asks no memory: once the whole GPU,
    now a refusal naming the key."""

    def test_compute_mode_alone(self):
        a = self.pod(**{"gpu-compute.mode": "sm-sharing"})
        self.refused(self.plain_bundle(a), "mode", [NV + "main.gpu-compute.mode", "main"],
                     bundle_message=False)

    def test_devices_alone(self):
        a = self.pod(**{"gpus.devices": "0"})
        self.refused(self.plain_bundle(a), "devs", [NV + "main.gpus.devices"],
                     bundle_message=False)

    def test_kai_portion_limit_alone(self):
        a = self.pod()
        a["kai.scheduler/container.main.gpu-memory.portion.limit"] = "0.5"
        self.refused(self.plain_bundle(a), "plim",
                     ["kai.scheduler/container.main.gpu-memory.portion.limit"],
                     bundle_message=False)

    def test_container_name_alone(self):
        a = self.pod()
        a["gpu-fraction-container-name"] = "main"
        self.refused(self.plain_bundle(a), "cname", ["gpu-fraction-container-name"],
                     bundle_message=False)

    def test_pod_level_forms_on_a_node_without_nvfractions(self):
        # KAI's binder wrote gpus.devices for main; with nvfractions=0 the
        # pod-level gpu-fraction is not read: main must not get the whole GPU
        a = self.pod(**{"gpus.devices": "0"})
        a["gpu-fraction"] = "0.25"
        self.env["GPUFRAC_NVFRACTIONS"] = "0"
        self.refused(self.plain_bundle(a), "kaioff", [NV + "main.gpus.devices"],
                     bundle_message=False)

    def test_other_containers_keys_still_pass(self):
        a = self.pod(container="trainer")
        a[NV + "trainer-2.gpu-compute.mode"] = "sm-sharing"
        self.passes(self.plain_bundle(a), "trainer", 4 * Gi)


class FailedStepTest(BundleAttackCase):
    """Every step between reading and handing over refuses on failure."""

    def test_pod_claim_that_cannot_be_written(self):
        # gpu-fraction for the pod's first container; the claim file cannot
        # be made: no container of the pod may take the whole GPU instead
        os.makedirs(self.state, exist_ok=True)
        with open(os.path.join(self.state, "pods"), "w") as f:
            f.write("not a directory\n")
        a = self.pod()
        a["gpu-fraction"] = "0.25"
        self.refused(self.plain_bundle(a), "claim", ["pods"], bundle_message=False)

    def test_map_entry_that_cannot_be_written(self):
        os.makedirs(self.state, exist_ok=True)
        with open(os.path.join(self.state, "containers"), "w") as f:
            f.write("not a directory\n")
        self.refused(self.plain_bundle(self.frac()), "map", ["containers"],
                     bundle_message=False)

    def test_no_agent(self):
        self.stop_agent()
        self.refused(self.plain_bundle(self.frac()), "noagent", ["gpufracd"],
                     bundle_message=False)

    def test_agent_closes_without_answering(self):
        agent = self.fake_agent(lambda verb: None)
        self.refused(self.plain_bundle(self.frac()), "mute", ["gpufracd"],
                     bundle_message=False)
        self.assertEqual(agent.verbs, ["admit"])

    def test_admit_reply_the_wrapper_cannot_use_is_released(self):
        # the agent said ok but named no config or device: the fraction it
        # admitted must not stay behind
        agent = self.fake_agent(lambda verb: "gpufrac/1 ok")
        self.refused(self.plain_bundle(self.frac()), "badreply", ["gpufracd"],
                     bundle_message=False)
        self.assertEqual(agent.verbs, ["admit", "release"])
        self.assertEqual(agent.names[0], agent.names[1])

    def test_full_disk_when_saving_the_spec(self):
        b = self.plain_bundle(self.frac())
        spec = self.spec_of(b)
        spec["root"]["path"] = os.path.join(b, "rootfs")
        small = os.path.join(self.tmp, "small")
        os.mkdir(small)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", small]).returncode:
            self.skipTest("cannot mount a tmpfs here")
        try:
            self.full_disk(small, spec)
        finally:
            subprocess.run(["umount", small], check=True)

    def full_disk(self, small, spec):
        with open(os.path.join(small, "config.json"), "w") as f:
            json.dump(spec, f, indent="\t")
        fd = os.open(os.path.join(small, "fill"), os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        os.close(fd)
        msg = self.refused(small, "full", ["No space left on device"], bundle_message=False)
        self.assertIn("config.json", msg)
        self.assertEqual(sorted(os.listdir(small)), ["config.json", "fill"])

    # -- helpers -------------------------------------------------------------
    def stop_agent(self):
        if self.agent:
            self.agent.terminate()
            self.agent.wait(timeout=30)
            self.agent = None
        if self.stub:
            self.stub.stop()
            self.stub = None
        sock = os.path.join(self.state, "agent.sock")
        if os.path.lexists(sock):
            os.unlink(sock)

    def fake_agent(self, answer):
        self.stop_agent()
        agent = FakeAgent(os.path.join(self.state, "agent.sock"), answer)
        self.addCleanup(agent.stop)
        return agent


class FakeAgent:
    """An agent that records each verb and answers with answer(verb): a
    reply, or None to close without one."""

    def __init__(self, path, answer):
        self.path, self.answer = path, answer
        self.verbs, self.names = [], []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(path)
        self.srv.listen(8)
        self.stopping = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while True:
            c, _ = self.srv.accept()
            with c:
                if self.stopping:
                    return
                parts = c.recv(8192).decode().split(" ")
                if len(parts) < 2:
                    continue
                self.verbs.append(parts[1])
                self.names += [p[5:] for p in parts if p.startswith("name=")]
                reply = self.answer(parts[1])
                if reply is not None:
                    c.send(reply.encode())

    def stop(self):
        self.stopping = True
        try:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            c.connect(self.path)
            c.close()
        except OSError:
            pass
        self.thread.join(5)
        self.srv.close()


class ExecEntryTest(BundleAttackCase):
    def test_exec_with_an_entry_it_cannot_read_is_refused(self):
        # the container's entry exists but cannot be read: the exec'd process
        # would lack the fraction's env (in sm-sharing, not an MPS client)
        os.makedirs(os.path.join(self.state, "containers", "ex1"))
        proc = os.path.join(self.tmp, "process.json")
        with open(proc, "w") as f:
            json.dump({"args": ["/bin/true"], "cwd": "/", "env": ["PATH=/bin"]}, f)
        before = read(proc, "rb")
        r = self.wrapper("exec", "--process", proc, "ex1")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("exec in container ex1", r.stderr)
        self.assertIn("exec in container ex1", self.log_errors()[-1]["msg"])
        self.assertEqual([c for c in self.real_runtime_calls() if "exec" in c.split()], [])
        self.assertEqual(read(proc, "rb"), before)


class StillPassesTest(BundleAttackCase):
    def test_plain_bundle_with_go_escapes_is_byte_identical(self):
        # what containerd's Go encoder writes for <, >, &, U+2028 and non-ASCII
        b = self.plain_bundle({"example.com/note": "@@GO@@"})
        self.rewrite(b, b'"@@GO@@"', b'"\\u003chi\\u0026bye\\u003e \\u2028 \\u00e9 \xc3\xa9"')
        self.passes(b, "goesc", 4 * Gi)

    def test_fraction_with_unrelated_annotations_is_admitted(self):
        b = self.plain_bundle(self.frac(**{"example.com/note": "@@GO@@"}))
        self.rewrite(b, b'"@@GO@@"', b'"\\u003c\\u2028\\ud83d\\ude00"')
        self.passes(b, "fracok", 1 * Gi)


if __name__ == "__main__":
    if skip_reason():
        print("security.bundle: skipped: " + skip_reason())
        sys.exit(77)
    cases.main(verbosity=2)
