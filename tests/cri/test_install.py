# SPDX-License-Identifier: Apache-2.0
"""The node installer (the chart's install.sh) the way it is used: run
against Debian's stock /etc/containerd/config.toml and `containerd config
default` (copies in a temp dir; the host's /etc is only read), in each mode
(append, dropin, auto), then real containerd started on that result: CRI Version answers, a pod on
runc and a fractional pod on the gpufrac handler run.

What the test changes in a copy before the installer runs, because this
machine is not a node: containerd's root/state/socket come from its command
line; the opt plugin's path and the runc shim's Root are private dirs. After
the installer it points BinaryName at the installed copy under the fake host
root (the installer writes the node's /usr/local/bin path). Exits 77 only
where containerd cannot run."""
import os
import re
import shutil
import subprocess
import sys
import tomllib
import unittest
import uuid

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "deploy"))
import crinode  # noqa: E402
from crinode import CONTAINERD, PAUSE_IMAGE, RUNC, RUNTIME, wait_for  # noqa: E402

REASON = crinode.skip_reason()
if REASON and __name__ == "__main__":
    print("SKIP: " + REASON)
    sys.exit(77)

from harness import PROBE, SHIM, kv  # noqa: E402

DEPLOY = os.path.join(HERE, "..", "..", "deploy")
STOCK = "/etc/containerd/config.toml"  # Debian's conffile, read only
T = None  # shared: the images and the CRI stubs


def setUpModule():
    global T
    T = type("Shared", (), {})()
    T.tmp = crinode.mkdtemp()
    T.tar = crinode.build_images(T.tmp)
    T.pb, T.stubs = crinode.load_cri(T.tmp)


def tearDownModule():
    shutil.rmtree(T.tmp, ignore_errors=True)


def chart_files():
    """install.sh and the snippets as the chart's ConfigMap carries them."""
    import yaml
    out = subprocess.run([sys.executable, os.path.join(DEPLOY, "render.py"), "--set",
                          "runtime.systemdCgroup=false"],  # no systemd on this machine
                         check=True, capture_output=True, text=True).stdout
    for d in yaml.safe_load_all(out):
        if d and d["kind"] == "ConfigMap" and "install.sh" in d.get("data", {}):
            return d["data"]
    raise AssertionError("no installer ConfigMap in the chart")


def stock_config():
    if subprocess.run(["dpkg", "-V", "containerd"], capture_output=True,
                      text=True).stdout.strip():
        return None  # changed on this machine: not Debian's stock file any more
    with open(STOCK) as f:
        return f.read()


def default_config():
    return subprocess.run([CONTAINERD, "config", "default"], check=True, capture_output=True,
                          text=True).stdout


def fit_machine(text):
    """restrict_oom_score_adj = true: runc here may not lower the sandbox's
    oom_score_adj (no CAP_SYS_RESOURCE in this machine's own container); and
    the native snapshotter where the temp dir is on overlayfs."""
    header = '[plugins."io.containerd.grpc.v1.cri"]'
    if "restrict_oom_score_adj = false" in text:
        text = text.replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
    elif re.search(r"^\s*" + re.escape(header) + r"\s*$", text, re.M):
        text = re.sub(r"^(\s*" + re.escape(header) + r"\s*)$",
                      r"\1\n  restrict_oom_score_adj = true", text, count=1, flags=re.M)
    else:
        text += "\n" + header + "\n  restrict_oom_score_adj = true\n"
    if crinode.snapshotter(T.tmp) == "native":
        if 'snapshotter = "overlayfs"' in text:
            text = text.replace('snapshotter = "overlayfs"', 'snapshotter = "native"')
        else:
            text += '\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "native"\n'
    return text


class InstallTest(unittest.TestCase):
    def setUp(self):
        self.tmp = os.path.join(T.tmp, uuid.uuid4().hex[:8])
        self.host = os.path.join(self.tmp, "host")
        self.etc = os.path.join(self.host, "etc", "containerd")
        os.makedirs(self.etc)
        self.ctd_dir = os.path.join(self.tmp, "ctd")
        self.gpufrac_state = os.path.join(self.tmp, "gpufrac")
        self.gpusim = os.path.join(self.tmp, "gpusim")
        os.makedirs(self.gpusim)
        self.env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LD_LIBRARY_PATH": crinode.GPUSIM, "GPUSIM_DEVICES": "4Gi",
            "GPUSIM_STATE": os.path.join(self.gpusim, "state"), "GPUSIM_CTX_OVERHEAD": "0",
            "GPUFRAC_STATE_DIR": self.gpufrac_state, "GPUFRAC_SHIM": SHIM,
            "GPUFRAC_RUNTIME_CONF": os.path.join(self.host, "etc/gpufrac/runtime.conf"),
            "ASAN_OPTIONS": "detect_leaks=0",
        }
        subprocess.run([PROBE, "info"], env=self.env, check=True, capture_output=True)
        self.ctd = self.agent = self.cri = None
        self.addCleanup(self.cleanup)

    def cleanup(self):
        if self.cri:
            for p in list(self.pods):
                try:
                    self.cri.stop_sandbox(p)
                    self.cri.remove_sandbox(p)
                except Exception:  # noqa: BLE001
                    pass
            self.cri.close()
        if self.ctd:
            self.ctd.teardown()
        if self.agent and self.agent.poll() is None:
            self.agent.terminate()
            self.agent.wait(timeout=30)

    # -- the node's config before the installer --------------------------
    def private(self, text):
        """The copy made runnable here: a private opt plugin dir, and the
        sandbox's oom_score_adj kept within what this machine lets root set."""
        text = fit_machine(text)
        text = re.sub(r'(\[plugins\."io\.containerd\.internal\.v1\.opt"\]\s*\n\s*path = )"[^"]*"',
                      r'\1"%s/opt"' % self.ctd_dir, text)
        self.assertIn(self.ctd_dir + "/opt", text, "the opt plugin's path was made private")
        return text

    def write_conf(self, text):
        with open(os.path.join(self.etc, "config.toml"), "w") as f:
            f.write(text)

    def read_conf(self):
        with open(os.path.join(self.etc, "config.toml")) as f:
            return f.read()

    def install(self, mode):
        cfg = os.path.join(self.tmp, "installer")
        os.makedirs(cfg, exist_ok=True)
        files = chart_files()
        for k, v in files.items():
            with open(os.path.join(cfg, k), "w") as f:
                f.write(v)
        script = files["install.sh"].replace("CFG=/etc/gpufrac-install", "CFG=" + cfg)
        script = script.replace("H=/host", "H=" + self.host)
        # the image's files are the build's; no nsenter into this machine's PID 1
        for image_path, build_path in (("/usr/sbin/gpufrac-runtime", os.path.realpath(RUNTIME)),
                                       ("/usr/lib/*/gpufrac/libgpufrac.so", SHIM)):
            self.assertIn("put %s " % image_path, script)
            script = script.replace("put %s " % image_path, "put %s " % build_path)
        script = script.replace("nsenter ", "false ")
        with open(os.path.join(cfg, "install.sh"), "w") as f:
            f.write(script)
        env = dict(self.env, GPUFRAC_CONTAINERD_CONFIG=mode, GPUFRAC_NVFRACTIONS="1",
                   GPUFRAC_REAL_RUNTIME=RUNC)
        return subprocess.run(["sh", os.path.join(cfg, "install.sh")], env=env,
                              capture_output=True, text=True)

    def point_binary(self, path):
        """BinaryName names the node's /usr/local/bin; here it is under the fake host."""
        with open(path) as f:
            text = f.read()
        installed = os.path.join(self.host, "usr/local/bin/gpufrac-runtime")
        self.assertTrue(os.access(installed, os.X_OK))
        text = text.replace('BinaryName = "/usr/local/bin/gpufrac-runtime"',
                            'BinaryName = "%s"\n  Root = "%s/runc"' % (installed, self.ctd_dir))
        if "conf.d" in path:
            text = fit_machine(text)
        with open(path, "w") as f:
            f.write(text)

    # -- the node after it ------------------------------------------------
    def start_node(self):
        os.makedirs(self.gpufrac_state, exist_ok=True)
        log = open(os.path.join(self.tmp, "agent.log"), "w")
        self.agent = subprocess.Popen(
            [crinode.AGENT, "--state-dir", self.gpufrac_state, "--metrics-listen", "off"],
            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(lambda: os.path.exists(os.path.join(self.gpufrac_state, "agent.sock")),
                 "gpufracd")
        self.ctd = crinode.Containerd(self.ctd_dir, "", self.env, T.tar)
        self.ctd.config = os.path.join(self.etc, "config.toml")
        self.ctd.start()
        self.ctd.import_images()
        # the configs' own sandbox image, made from the local pause
        t = tomllib.loads(self.read_conf())
        sandbox = t.get("plugins", {}).get("io.containerd.grpc.v1.cri", {}).get(
            "sandbox_image", "registry.k8s.io/pause:3.6")
        self.ctd.tag(PAUSE_IMAGE, sandbox)
        self.cri = crinode.Cri(T.pb, T.stubs, self.ctd.sock)
        self.pods = []

    def run_pod(self, handler, annotations):
        pb = T.pb
        uid = str(uuid.uuid4())
        logs = os.path.join(self.tmp, "pods", uid)
        os.makedirs(logs)
        sc = self.cri.sandbox_config("p-" + uid[:6], uid, "ml", annotations, logs, pb.POD)
        sid = self.cri.run_sandbox(sc, handler)
        self.pods.append(sid)
        env = {"PATH": "/bin:/usr/bin", "LD_LIBRARY_PATH": "/usr/lib/gpusim",
               "GPUSIM_DEVICES": "4Gi", "GPUSIM_STATE": self.env["GPUSIM_STATE"],
               "GPUSIM_CTX_OVERHEAD": "0"}
        cid = self.cri.create(sid, sc, "main", ["/usr/bin/shimprobe", "info"], env,
                              [self.gpusim])
        self.cri.start(cid)
        wait_for(lambda: self.cri.status(cid).state == pb.CONTAINER_EXITED, "the container")
        return kv(crinode.cri_log(os.path.join(logs, "main", "0.log")))

    def assert_node_works(self, gpufrac=True):
        v = self.cri.version()
        self.assertEqual(v.runtime_api_version, "v1")
        self.assertEqual(int(self.run_pod("runc", {})["total"]), 4 << 30)
        if gpufrac:
            got = self.run_pod("gpufrac", {"nvidia.com/container.main.gpu-memory.request": "1Gi"})
            self.assertEqual(int(got["total"]), 1 << 30)

    # -- the cases ----------------------------------------------------------
    def append_case(self, base, mode="append"):
        self.write_conf(self.private(base))
        r = self.install(mode)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        if mode == "auto":
            self.assertIn("installer.containerdConfig=auto: append (", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.etc, "conf.d")))
        tomllib.loads(self.read_conf())
        self.point_binary(os.path.join(self.etc, "config.toml"))
        self.start_node()
        self.assert_node_works()

    def dropin_case(self, base):
        text = self.private(base)
        self.write_conf(text)
        r = self.install("dropin")
        # both have CRI settings: a drop-in would drop them, so nothing is done
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("has CRI settings of its own", r.stdout)
        self.assertIn("installer.containerdConfig=append", r.stdout)
        self.assertEqual(self.read_conf(), text)
        self.assertFalse(os.path.exists(os.path.join(self.etc, "conf.d")))
        self.start_node()
        self.assert_node_works(gpufrac=False)

    def test_stock_config_append(self):
        base = stock_config()
        if base is None:
            self.skipTest("this machine's %s differs from Debian's" % STOCK)
        self.append_case(base)

    def test_default_config_append(self):
        self.append_case(default_config())

    def test_stock_config_dropin_is_refused_and_the_node_keeps_working(self):
        base = stock_config()
        if base is None:
            self.skipTest("this machine's %s differs from Debian's" % STOCK)
        self.dropin_case(base)

    def test_default_config_dropin_is_refused_and_the_node_keeps_working(self):
        self.dropin_case(default_config())

    # auto (the chart's default): append on both 1.x configs, which have CRI
    # settings and import nothing; a drop-in where config.toml imports conf.d
    def test_stock_config_auto_appends(self):
        base = stock_config()
        if base is None:
            self.skipTest("this machine's %s differs from Debian's" % STOCK)
        self.append_case(base, "auto")

    def test_default_config_auto_appends(self):
        self.append_case(default_config(), "auto")

    def test_auto_where_config_toml_imports_conf_d(self):
        self.test_dropin_where_config_toml_imports_conf_d("auto")

    def test_dropin_where_config_toml_imports_conf_d(self, mode="dropin"):
        conf = ('version = 2\nimports = ["%s/conf.d/*.toml"]\n\n'
                '[plugins."io.containerd.internal.v1.opt"]\n  path = "%s/opt"\n'
                % (self.etc, self.ctd_dir))
        self.write_conf(conf)
        r = self.install(mode)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("WARNING", r.stdout)
        if mode == "auto":
            self.assertIn("installer.containerdConfig=auto: dropin (", r.stdout)
        self.assertEqual(self.read_conf(), conf)
        self.point_binary(os.path.join(self.etc, "conf.d", "gpufrac.toml"))
        self.start_node()
        self.assert_node_works()

    def test_handler_without_runc_breaks_cri_on_containerd_1_6(self):
        # why the snippet carries runc: the handler alone, appended to the stock config
        base = stock_config() or default_config().replace(
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.was-runc]')
        with open(os.path.join(DEPLOY, "containerd", "gpufrac-containerd-1.x.toml")) as f:
            snippet = f.read()
        alone = snippet.split('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpufrac]'
                              , 1)[1]
        self.write_conf(self.private(base) + '\n[plugins."io.containerd.grpc.v1.cri".containerd'
                        '.runtimes.gpufrac]' + alone)
        self.ctd = crinode.Containerd(self.ctd_dir, "", self.env, T.tar)
        self.ctd.config = os.path.join(self.etc, "config.toml")
        self.ctd.start()
        self.cri = crinode.Cri(T.pb, T.stubs, self.ctd.sock, wait_ready=False)  # never ready
        self.pods = []
        with self.assertRaises(self.cri.grpc.RpcError) as e:
            self.cri.version()
        self.assertIn("unknown service runtime.v1.RuntimeService", e.exception.details())
        log = self.ctd.log()
        self.assertIn("failed to load plugin io.containerd.grpc.v1.cri", log)
        self.assertIn("no corresponding runtime configured in `containerd.runtimes` for "
                      "`containerd` `default_runtime_name = \\\"runc\\\"", log)


if __name__ == "__main__":
    cases.main(verbosity=2)
