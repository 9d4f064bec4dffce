# SPDX-License-Identifier: Apache-2.0
"""A stand-in for gpufracd's admit/attach/release verbs, used by
test_runtime.py only while the real agent does not serve them yet. It keeps
fractions where the agent does (<state>/fractions/<name>/{config,ledger}),
refuses guarantees that do not fit the (simulated) GPU, and answers every
other verb with an error."""
import os
import shutil
import socket
import subprocess
import threading


class StubAgent:
    def __init__(self, state, ledgertool, device_total, uuid=None):
        self.state = state
        self.uuid = uuid  # the one GPU placement (place=) picks
        self.ledgertool = ledgertool
        self.total = device_total
        self.sock_path = os.path.join(state, "agent.sock")
        os.makedirs(os.path.join(state, "fractions"), exist_ok=True)
        if os.path.exists(self.sock_path):
            os.unlink(self.sock_path)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(self.sock_path)
        self.srv.listen(16)
        self.stopping = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping = True
        try:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            c.connect(self.sock_path)
            c.close()
        except OSError:
            pass
        self.thread.join(5)
        self.srv.close()

    def loop(self):
        while not self.stopping:
            c, _ = self.srv.accept()
            with c:
                try:
                    data = c.recv(4096)
                except OSError:
                    continue
                if not data:
                    continue
                c.send(self.handle(data.decode()).encode())

    def frac_dir(self, name):
        return os.path.join(self.state, "fractions", name)

    def guaranteed(self):
        total = 0
        for n in os.listdir(os.path.join(self.state, "fractions")):
            cfg = os.path.join(self.frac_dir(n), "config")
            if os.path.exists(cfg):
                with open(cfg) as f:
                    lines = f.read().splitlines()
                for ln in lines:
                    if ln.startswith("device="):
                        total += int(ln.strip().split(",")[1])
        return total

    def handle(self, text):
        parts = text.split(" ")
        if len(parts) < 2 or parts[0] != "gpufrac/1":
            return "gpufrac/1 error msg=bad request"
        kv = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
        verb = parts[1]
        if verb == "admit":
            return self.admit(kv)
        if verb == "attach":
            d = self.frac_dir(kv.get("name", "-"))
            if not os.path.isdir(d):
                return "gpufrac/1 error msg=name= names no fraction of this node"
            with open(os.path.join(d, "attached"), "w") as f:
                f.write(kv.get("pid", "") + "\n")
            return "gpufrac/1 ok"
        if verb == "release":
            shutil.rmtree(self.frac_dir(kv.get("name", "-")), ignore_errors=True)
            return "gpufrac/1 ok clients=0"
        if verb == "ping":
            return "gpufrac/1 ok agent=stub"
        return "gpufrac/1 error msg=unknown verb " + verb

    def admit(self, kv):
        name = kv["name"]
        d = self.frac_dir(name)
        if "place" in kv:  # no gpus.devices: the one GPU, amounts bytes or portions
            amount = lambda v: int(float(v) * self.total) if float(v) <= 1 else int(v)  # noqa
            kv["devices"] = "%s/%d/%d" % (self.uuid, amount(kv["request"]), amount(kv["limit"]))
        devs = [x.split("/") for x in kv["devices"].split(",")]
        want = sum(int(r) for _, r, _ in devs)
        if os.path.isdir(d):
            return "gpufrac/1 error msg=fraction %s exists" % name
        if self.guaranteed() + want > self.total:
            return ("gpufrac/1 error msg=GPU %s has %d bytes not guaranteed to other "
                    "fractions; %s asks %d" % (devs[0][0], self.total - self.guaranteed(),
                                                name, want))
        os.makedirs(d)
        ledger = os.path.join(d, "ledger")
        subprocess.run([self.ledgertool, "create", ledger, name], check=True)
        lines = ["version=1", "name=" + name, "ledger=" + ledger,
                 "mode=" + kv["mode"], "compute_percent=" + kv["compute"],
                 "agent=" + self.sock_path]
        lines += ["device=%s,%s,%s" % tuple(x) for x in devs]
        with open(os.path.join(d, "config"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return "gpufrac/1 ok config=%s ledger=%s socket=%s mps=- devices=%s" % (
            os.path.join(d, "config"), ledger, self.sock_path, kv["devices"])
