# SPDX-License-Identifier: Apache-2.0
"""Loopback ports for the servers the suites start: the kernel picks a free
one on 127.0.0.1 (CTest puts this directory on PYTHONPATH)."""
import socket


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
