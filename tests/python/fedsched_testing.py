"""Helpers of the Python tests: a live fedsched-server on a free loopback port."""
import os
import pathlib
import re
import socket
import subprocess
import threading
import time

BINARY_DIR = pathlib.Path(os.environ.get("FEDSCHED_BINARY_DIR", "build")).resolve()
SOURCE_DIR = pathlib.Path(os.environ.get("FEDSCHED_SOURCE_DIR", ".")).resolve()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """fedsched-server with `config_text` (ServerConfig text format) in `workdir`."""

    def __init__(self, workdir, config_text):
        self.workdir = pathlib.Path(workdir)
        self.port = free_port()
        self.metrics = self.workdir / "metrics.csv"
        config = self.workdir / "server.textproto"
        config.write_text(config_text + f'\nmetrics_csv: "{self.metrics}"\n')
        self.log_path = self.workdir / "server.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(BINARY_DIR / "server" / "fedsched-server"), f"--config={config}",
             f"--store_path={self.workdir / 'store'}", f"--listen=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.address = f"127.0.0.1:{self.port}"

    def wait_listening(self, timeout_s=120):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "listening on" in self.log_path.read_text():
                return
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.log_path.read_text())
            time.sleep(0.2)
        raise TimeoutError("server did not listen:\n" + self.log_path.read_text())

    def provision(self, state_dir, identity):
        """Writes `state_dir`/credential for `identity` with fedsched-enroll from the server's
        enrolment key (created at its start: call after wait_listening), as an operator would
        provision the device (docs/guides/SECURITY.md "Identities and admission")."""
        subprocess.run(
            [str(BINARY_DIR / "server" / "fedsched-enroll"),
             f"--key_file={self.workdir / 'store' / 'enrolment_key'}", f"--identity={identity}",
             f"--state_dir={state_dir}"], check=True, stdout=subprocess.DEVNULL)

    def wait(self, timeout_s):
        code = self.proc.wait(timeout=timeout_s)
        self.log.close()
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def rows(self):
        """The metrics CSV as a list of {column: str}."""
        lines = self.metrics.read_text().splitlines()
        header = lines[0].split(",")
        return [dict(zip(header, line.split(","))) for line in lines[1:]]

    def text(self):
        return self.log_path.read_text()


def round_lines(text):
    return [line for line in text.splitlines() if re.match(r"^round +\d+ \|", line)]


def run_clients(clients, server, timeout_s=400):
    """Runs every fedsched.Client on a Python thread of its own until the server ends the run.

    A round needs all of them, so this finishes only if Client.run releases the GIL while the
    SDK does network I/O. Fails the test if a client is still running after `timeout_s`, a run
    raised, or the server exited non-zero.
    """
    errors = []

    def run(client):
        try:
            client.run()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout_s)
    assert not any(t.is_alive() for t in threads), server.text()
    assert not errors, errors
    assert server.wait(timeout_s=120) == 0, server.text()
