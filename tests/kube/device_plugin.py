# SPDX-License-Identifier: Apache-2.0
"""A stand-in for NVIDIA's device plugin (which needs a GPU): a real gRPC
device plugin of the kubelet's v1beta1 API that advertises nvidia.com/gpu
with the simulated GPUs' UUIDs. It serves DevicePlugin on its own socket in
the kubelet's device-plugins directory, registers there with the kubelet's
Registration service (kubelet.sock), streams the devices (ListAndWatch) and
answers Allocate as NVIDIA's plugin does with its default "envvar" device
list strategy: NVIDIA_VISIBLE_DEVICES=<the allocated UUIDs>. Every Allocate
is recorded (allocations) so a test can say which GPU the kubelet gave."""
import importlib
import os
import subprocess
import sys
import tempfile
import threading
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"  # the kubelet's, hard-coded in 1.20
RESOURCE = "nvidia.com/gpu"


def load_api(tmp):
    """Compiles deviceplugin_subset.proto (grpc_tools, as tests/cri does)."""
    out = os.path.join(tmp, "deviceplugin_gen")
    os.makedirs(out, exist_ok=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + HERE,
                    "--python_out=" + out, "--grpc_python_out=" + out,
                    os.path.join(HERE, "deviceplugin_subset.proto")], check=True)
    sys.path.insert(0, out)
    return (importlib.import_module("deviceplugin_subset_pb2"),
            importlib.import_module("deviceplugin_subset_pb2_grpc"))


class DevicePlugin:
    def __init__(self, uuids, tmp=None, plugin_dir=PLUGIN_DIR, name="gpufrac-test-gpu.sock"):
        import grpc
        self.grpc = grpc
        self.pb, self.rpc = load_api(tmp or tempfile.mkdtemp(prefix="gpufrac-dp-"))
        self.uuids, self.dir, self.name = list(uuids), plugin_dir, name
        self.sock = os.path.join(plugin_dir, name)
        self.allocations = []  # [device ids] per container, in Allocate order
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.server = None

    # --- the DevicePlugin service ---

    def GetDevicePluginOptions(self, request, context):
        return self.pb.DevicePluginOptions()

    def ListAndWatch(self, request, context):
        yield self.pb.ListAndWatchResponse(devices=[
            self.pb.Device(ID=u, health="Healthy") for u in self.uuids])
        while not self.stopped.wait(0.5) and context.is_active():
            pass

    def Allocate(self, request, context):
        resp = self.pb.AllocateResponse()
        for c in request.container_requests:
            ids = list(c.devicesIDs)
            unknown = [i for i in ids if i not in self.uuids]
            if unknown:
                context.abort(self.grpc.StatusCode.INVALID_ARGUMENT,
                              "unknown device(s) %s" % ",".join(unknown))
            with self.lock:
                self.allocations.append(ids)
            resp.container_responses.add(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(ids)})
        return resp

    def PreStartContainer(self, request, context):
        return self.pb.PreStartContainerResponse()

    # --- lifecycle ---

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.server = self.grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.rpc.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port("unix://" + self.sock)
        self.server.start()
        with self.grpc.insecure_channel("unix://" + os.path.join(self.dir, "kubelet.sock")) as ch:
            self.rpc.RegistrationStub(ch).Register(self.pb.RegisterRequest(
                version="v1beta1", endpoint=self.name, resource_name=RESOURCE,
                options=self.pb.DevicePluginOptions()), timeout=30)
        return self

    def stop(self):
        self.stopped.set()
        if self.server:
            self.server.stop(1).wait()
            self.server = None
