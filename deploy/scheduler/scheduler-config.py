#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes kube-scheduler's KubeSchedulerConfiguration with gpufrac-scheduler as
its extender, in the schema version the cluster's kube-scheduler accepts.

  scheduler-config.py --api-version v1beta1|v1beta2|v1beta3|v1 [--layout A|B]
                      [--extender URL] [--kubeconfig FILE]
                      [--healthz ADDR --metrics ADDR] [--lease-namespace NS] [-o FILE]

  Kubernetes   accepts (newest first)            layout A / B use
  1.19-1.21    v1beta1                           v1beta1
  1.22         v1beta2, v1beta1                  v1beta2
  1.23-1.24    v1beta3, v1beta2                  v1beta3
  1.25-1.27    v1, v1beta3, v1beta2              v1
  1.28         v1, v1beta3                       v1
  1.29+        v1                                v1

Only v1beta1 has been run here (against kube-scheduler 1.20.2, tests/kube); the
others differ from it only in the fields below, as upstream's schema documents.

layout A (default): a second scheduler, profile "gpufrac-scheduler", its own
leader-election lease gpufrac-scheduler in --lease-namespace (rbac-second-scheduler.yaml grants
exactly that lease). layout B: the cluster's default scheduler with the
extender (it then binds every pod).

--healthz/--metrics: the insecure health and metrics addresses that v1beta1 and
v1beta2 still have (default there *:10251; give 127.0.0.1:PORT outside a
cluster, or "" to turn them off); v1beta3 and v1 have none (flags
--bind-address/--secure-port only). --kubeconfig sets clientConnection.kubeconfig
(needed outside a cluster)."""
import argparse
import json
import sys

VERSIONS = ("v1beta1", "v1beta2", "v1beta3", "v1")


def q(v):
    return json.dumps(v)  # a YAML-safe double-quoted scalar


def render(args):
    out = ["apiVersion: kubescheduler.config.k8s.io/%s" % args.api_version,
           "kind: KubeSchedulerConfiguration"]
    if args.kubeconfig:
        out += ["clientConnection:", "  kubeconfig: %s" % q(args.kubeconfig)]
    if args.api_version in ("v1beta1", "v1beta2"):
        if args.healthz is not None:
            out.append("healthzBindAddress: %s" % q(args.healthz))
        if args.metrics is not None:
            out.append("metricsBindAddress: %s" % q(args.metrics))
    elif args.healthz or args.metrics:
        sys.exit("scheduler-config.py: --healthz/--metrics do not exist in %s "
                 "(use kube-scheduler --bind-address/--secure-port)" % args.api_version)
    out += ["leaderElection:", "  leaderElect: %s" % ("true" if args.leader_elect else "false")]
    if args.layout == "A":
        out += ["  resourceLock: leases",
                "  resourceNamespace: %s" % q(args.lease_namespace),
                "  resourceName: gpufrac-scheduler",
                "profiles:", "  - schedulerName: gpufrac-scheduler"]
    else:
        out += ["  resourceLock: leases"]
    out += ["extenders:",
            "  - urlPrefix: %s" % q(args.extender),
            "    filterVerb: filter",
            "    prioritizeVerb: prioritize",
            "    preemptVerb: preempt",
            "    bindVerb: bind",
            "    weight: 5",
            "    enableHTTPS: false",
            "    nodeCacheCapable: true",
            "    ignorable: false",
            "    httpTimeout: 5s"]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api-version", required=True, choices=VERSIONS)
    ap.add_argument("--layout", choices=("A", "B"), default="A")
    ap.add_argument("--extender", default="http://127.0.0.1:8888")
    ap.add_argument("--kubeconfig")
    ap.add_argument("--healthz")
    ap.add_argument("--metrics")
    ap.add_argument("--lease-namespace", default="gpufrac-system")
    ap.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    text = render(args)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
